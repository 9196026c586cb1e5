//! A directory's Kubernetes objects, from YAML text through a `FileSet` to ServiceEntries.

use std::path::Path;

use super::*;
use axon_config::config::Spec;
use axon_config::config_set::compare;
use axon_config::file_set::FileSet;
use axon_config::parse::DocError;

const NAMESPACE: &str =
    "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: shop\n  labels: {mesh: 'on'}\n";

const SERVICE: &str = "apiVersion: v1\nkind: Service\nmetadata:\n  name: web\n  namespace: shop\nspec:\n  clusterIP: 10.96.0.7\n  clusterIPs: [10.96.0.7]\n  ports:\n  - {name: http, port: 80, protocol: TCP, targetPort: 8080}\n";

const POD: &str = "apiVersion: v1\nkind: Pod\nmetadata:\n  name: web-1\n  namespace: shop\n  labels: {app: web, version: v1}\nspec:\n  serviceAccountName: web\n  containers: [{name: app, image: web}]\n";

fn slice(address: &str) -> String {
    format!(
        "apiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\nmetadata:\n  name: web-abc\n  namespace: shop\n  labels: {{kubernetes.io/service-name: web}}\naddressType: IPv4\nports: [{{name: http, port: 8080, protocol: TCP}}]\nendpoints:\n- addresses: [{address}]\n  conditions: {{ready: true}}\n  targetRef: {{kind: Pod, name: web-1, namespace: shop}}\n"
    )
}

fn cluster(text: &str) -> String {
    format!("{NAMESPACE}---\n{SERVICE}---\n{POD}---\n{text}")
}

struct Dir {
    files: FileSet,
    objects: DirectoryObjects,
    configs: Arc<ConfigSet>,
}

impl Dir {
    fn new(selector: Option<&str>) -> Dir {
        let settings = Settings {
            namespace_selector: selector.map(|s| s.parse().expect("a selector")),
            ..Settings::default()
        };
        Dir {
            files: FileSet::new("default").with_object_check(check),
            objects: DirectoryObjects::new(&settings),
            configs: Arc::default(),
        }
    }

    /// Writes `text` as `name` and returns what changed: (keys, endpoints only).
    fn write(&mut self, name: &str, text: Option<&str>) -> (Vec<String>, bool) {
        let report = self.files.apply(&Path::new("/d").join(name), text);
        assert!(report.errors.is_empty(), "{:?}", report.errors);
        let commit = self.files.commit();
        self.objects.apply(&commit.objects, self.files.objects());
        let configs = self.objects.configs();
        let (changed, endpoints_only) = compare(&self.configs, &configs);
        self.configs = configs;
        (
            changed.iter().map(ToString::to_string).collect(),
            endpoints_only,
        )
    }

    fn entry(&self) -> Option<axon_config::istio::ServiceEntry> {
        self.configs.values().find_map(|c| match &c.spec {
            Spec::ServiceEntry(se) => Some(se.clone()),
            _ => None,
        })
    }
}

#[test]
fn a_cluster_in_files_becomes_the_service_entries_of_the_api_server() {
    let mut dir = Dir::new(None);
    let (changed, _) = dir.write("cluster.yaml", Some(&cluster(&slice("10.1.0.5"))));
    // The Service's entry, and the Namespace (its labels, for the Gateway API's selectors).
    assert_eq!(changed, ["ServiceEntry/shop/svc:web", "Namespace//shop"]);
    let se = dir.entry().expect("an entry");
    assert_eq!(se.hosts, ["web.shop.svc.cluster.local"]);
    assert_eq!(se.addresses, ["10.96.0.7"]);
    assert_eq!(se.ports[0].protocol, "HTTP");
    let ep = &se.endpoints[0];
    assert_eq!(ep.address, "10.1.0.5");
    assert_eq!(ep.ports.get("http"), Some(&8080));
    assert_eq!(ep.labels.get("version").map(String::as_str), Some("v1"));
    assert_eq!(ep.service_account, "web");
    // An EndpointSlice edit changes the entry's endpoints only: the EDS fast path.
    let (changed, endpoints_only) = dir.write("cluster.yaml", Some(&cluster(&slice("10.1.0.6"))));
    assert_eq!(changed, ["ServiceEntry/shop/svc:web"]);
    assert!(endpoints_only);
    // A Pod label edit too.
    let relabeled = cluster(&slice("10.1.0.6")).replace("version: v1", "version: v2");
    assert!(dir.write("cluster.yaml", Some(&relabeled)).1);
    // The Service (and the Namespace) gone: its entry is removed.
    let (changed, endpoints_only) = dir.write("cluster.yaml", Some(&slice("10.1.0.6")));
    assert_eq!((changed.len(), endpoints_only), (2, false));
    assert!(dir.configs.is_empty());
}

#[test]
fn the_directory_namespaces_feed_the_namespace_selector() {
    let mut dir = Dir::new(Some("mesh=on"));
    dir.write(
        "svc.yaml",
        Some(&format!("{SERVICE}---\n{POD}---\n{}", slice("10.1.0.5"))),
    );
    assert!(
        dir.configs.is_empty(),
        "namespace shop is not known to be selected"
    );
    dir.write("ns.yaml", Some(NAMESPACE));
    let se = dir.entry().expect("selected: its objects are read again");
    assert_eq!(se.endpoints.len(), 1);
    assert_eq!(se.endpoints[0].service_account, "web");
    dir.write("ns.yaml", Some(&NAMESPACE.replace("'on'", "'off'")));
    assert!(dir.configs.is_empty(), "no longer selected: purged");
    dir.write("ns.yaml", Some(NAMESPACE));
    assert_eq!(dir.entry().map(|se| se.endpoints.len()), Some(1));
    dir.write("ns.yaml", None);
    assert!(dir.configs.is_empty(), "the Namespace removed");
}

#[test]
fn a_malformed_object_is_refused_with_its_field_and_line() {
    let mut files = FileSet::new("default").with_object_check(check);
    let bad = SERVICE.replace("port: 80", "port: eighty");
    let report = files.apply(Path::new("/d/a.yaml"), Some(&format!("{POD}---\n{bad}")));
    assert_eq!(report.objects, 1);
    let error = &report.errors[0];
    assert_eq!((error.index, error.line), (2, 20));
    let DocError::Object { path, .. } = &error.error else {
        panic!("{error}")
    };
    assert_eq!(path, "spec.ports[0].port");
    assert!(
        error.to_string().starts_with(
            "/d/a.yaml: document 2 (line 20): Service: spec.ports[0].port: invalid type"
        )
    );
    let labels = POD.replace("version: v1", "version: 1");
    let report = files.apply(Path::new("/d/b.yaml"), Some(&labels));
    assert!(
        matches!(&report.errors[0].error, DocError::Object { path, .. } if path == "metadata.labels.version"),
        "{:?}",
        report.errors
    );
    assert_eq!(report.errors[0].line, 6);
}
