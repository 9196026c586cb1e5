//! The Kubernetes manifests (`config/kubernetes/`) and the Dockerfile, checked without a
//! cluster: every document is parsed into its k8s-openapi type, and the image, args, ports,
//! probes, security context and RBAC rules are asserted.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use clap::Parser;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Container, Namespace, Service, ServiceAccount};
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use serde::de::DeserializeOwned;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Every document of every file of `config/kubernetes/`, by kind.
fn documents() -> BTreeMap<String, Vec<serde_json::Value>> {
    let dir = root().join("config/kubernetes");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .expect("config/kubernetes exists")
        .map(|e| e.expect("dir entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "yaml" || e == "yml"))
        .collect();
    files.sort();
    assert!(!files.is_empty());
    let mut by_kind: BTreeMap<String, Vec<serde_json::Value>> = BTreeMap::new();
    for file in files {
        let text = std::fs::read_to_string(&file).expect("readable");
        for doc in text.split("\n---\n").filter(|d| !d.trim().is_empty()) {
            let value: serde_json::Value = serde_norway::from_str(doc)
                .unwrap_or_else(|e| panic!("{}: invalid YAML: {e}", file.display()));
            let kind = value["kind"]
                .as_str()
                .unwrap_or_else(|| panic!("{}: a document without kind", file.display()))
                .to_string();
            by_kind.entry(kind).or_default().push(value);
        }
    }
    by_kind
}

/// The one object of `kind`, typed.
fn one<T: DeserializeOwned>(docs: &BTreeMap<String, Vec<serde_json::Value>>, kind: &str) -> T {
    let all = docs.get(kind).unwrap_or_else(|| panic!("no {kind}"));
    assert_eq!(all.len(), 1, "exactly one {kind}");
    serde_json::from_value(all[0].clone())
        .unwrap_or_else(|e| panic!("{kind} does not parse as its k8s-openapi type: {e}"))
}

fn container(deployment: &Deployment) -> &Container {
    let spec = deployment.spec.as_ref().expect("spec");
    let pod = spec.template.spec.as_ref().expect("pod spec");
    assert_eq!(pod.containers.len(), 1);
    &pod.containers[0]
}

#[test]
fn every_document_is_a_known_kind_in_axon_system() {
    let docs = documents();
    let kinds: BTreeSet<&str> = docs.keys().map(String::as_str).collect();
    assert_eq!(
        kinds,
        BTreeSet::from([
            "ClusterRole",
            "ClusterRoleBinding",
            "ConfigMap",
            "Deployment",
            "Namespace",
            "Service",
            "ServiceAccount"
        ])
    );
    let ns: Namespace = one(&docs, "Namespace");
    assert_eq!(ns.metadata.name.as_deref(), Some("axon-system"));
    for kind in ["ServiceAccount", "ConfigMap", "Deployment", "Service"] {
        let namespace = docs[kind][0]["metadata"]["namespace"].as_str();
        assert_eq!(namespace, Some("axon-system"), "{kind}");
    }
}

#[test]
fn rbac_grants_get_list_watch_on_exactly_what_axon_reads() {
    let docs = documents();
    let role: ClusterRole = one(&docs, "ClusterRole");
    let mut granted: BTreeMap<(String, String), BTreeSet<String>> = BTreeMap::new();
    for rule in role.rules.iter().flatten() {
        assert!(rule.resource_names.is_none() && rule.non_resource_urls.is_none());
        for group in rule.api_groups.iter().flatten() {
            for resource in rule.resources.iter().flatten() {
                granted
                    .entry((group.clone(), resource.clone()))
                    .or_default()
                    .extend(rule.verbs.iter().cloned());
            }
        }
    }
    let read: BTreeSet<String> = ["get", "list", "watch"].map(String::from).into();
    let expected: BTreeMap<(String, String), BTreeSet<String>> = [
        ("", "services"),
        ("", "pods"),
        ("", "namespaces"),
        ("discovery.k8s.io", "endpointslices"),
        ("networking.istio.io", "virtualservices"),
        ("networking.istio.io", "destinationrules"),
        ("networking.istio.io", "gateways"),
        ("networking.istio.io", "serviceentries"),
        ("networking.istio.io", "workloadentries"),
        ("networking.istio.io", "sidecars"),
    ]
    .into_iter()
    .map(|(g, r)| ((g.to_string(), r.to_string()), read.clone()))
    .collect();
    assert_eq!(granted, expected);

    let account: ServiceAccount = one(&docs, "ServiceAccount");
    let binding: ClusterRoleBinding = one(&docs, "ClusterRoleBinding");
    assert_eq!(binding.role_ref.kind, "ClusterRole");
    assert_eq!(
        Some(binding.role_ref.name.as_str()),
        role.metadata.name.as_deref()
    );
    let subjects = binding.subjects.expect("subjects");
    assert_eq!(subjects.len(), 1);
    assert_eq!(subjects[0].kind, "ServiceAccount");
    assert_eq!(
        Some(subjects[0].name.as_str()),
        account.metadata.name.as_deref()
    );
    assert_eq!(subjects[0].namespace.as_deref(), Some("axon-system"));

    let deployment: Deployment = one(&docs, "Deployment");
    let pod = deployment
        .spec
        .as_ref()
        .and_then(|s| s.template.spec.as_ref())
        .expect("pod");
    assert_eq!(pod.service_account_name, account.metadata.name);
}

#[test]
fn the_deployment_runs_axon_on_kubernetes_hardened_and_probed() {
    let docs = documents();
    let deployment: Deployment = one(&docs, "Deployment");
    let c = container(&deployment);
    assert!(
        c.image.as_deref().is_some_and(|i| i.starts_with("axon:")),
        "{:?}",
        c.image
    );
    assert_eq!(c.command, None, "the image's entrypoint is axon");
    let args = c.args.clone().expect("args replace the image's demo CMD");
    assert_eq!(
        &args[..4],
        [
            "serve",
            "--kubernetes",
            "--limits",
            "/etc/axon/actor-limits.toml"
        ]
    );
    // The args are ones axon accepts.
    let argv = std::iter::once("axon".to_string()).chain(args.iter().cloned());
    axon::cli::Cli::try_parse_from(argv).expect("axon accepts the Deployment's args");

    let ports: BTreeMap<i32, Option<String>> = c
        .ports
        .iter()
        .flatten()
        .map(|p| (p.container_port, p.name.clone()))
        .collect();
    assert_eq!(
        ports,
        BTreeMap::from([
            (15010, Some("grpc-xds".to_string())),
            (15014, Some("http-monitoring".to_string()))
        ])
    );
    let probe = |p: Option<&k8s_openapi::api::core::v1::Probe>| {
        let get = p.and_then(|p| p.http_get.as_ref()).expect("an HTTP probe");
        (get.path.clone().unwrap_or_default(), get.port.clone())
    };
    assert_eq!(
        probe(c.readiness_probe.as_ref()),
        ("/ready".to_string(), IntOrString::Int(15014))
    );
    assert_eq!(
        probe(c.liveness_probe.as_ref()),
        ("/healthz".to_string(), IntOrString::Int(15014))
    );

    let requests = c
        .resources
        .as_ref()
        .and_then(|r| r.requests.as_ref())
        .expect("resource requests");
    assert!(requests.contains_key("cpu") && requests.contains_key("memory"));

    let sc = c
        .security_context
        .as_ref()
        .expect("container security context");
    assert_eq!(sc.run_as_non_root, Some(true));
    assert_eq!(sc.read_only_root_filesystem, Some(true));
    assert_eq!(sc.allow_privilege_escalation, Some(false));
    let pod = deployment
        .spec
        .as_ref()
        .and_then(|s| s.template.spec.as_ref())
        .expect("pod");
    let pod_sc = pod.security_context.as_ref().expect("pod security context");
    assert_eq!(pod_sc.run_as_non_root, Some(true));
    assert_ne!(pod_sc.run_as_user, Some(0));

    // The limits file comes from the ConfigMap, at the path the args name.
    let mount = c
        .volume_mounts
        .iter()
        .flatten()
        .find(|m| m.mount_path == "/etc/axon/actor-limits.toml")
        .expect("the limits file is mounted");
    let volume = pod
        .volumes
        .iter()
        .flatten()
        .find(|v| v.name == mount.name)
        .expect("the mounted volume");
    let config_map: ConfigMap = one(&docs, "ConfigMap");
    assert_eq!(
        volume.config_map.as_ref().map(|c| c.name.as_str()),
        config_map.metadata.name.as_deref()
    );
    assert_eq!(mount.sub_path.as_deref(), Some("actor-limits.toml"));
}

#[test]
fn the_config_map_holds_the_limits_file() {
    let docs = documents();
    let config_map: ConfigMap = one(&docs, "ConfigMap");
    let data = config_map.data.expect("data");
    let text = data.get("actor-limits.toml").expect("actor-limits.toml");
    let file = std::fs::read_to_string(root().join("config/actor-limits.toml")).expect("file");
    assert_eq!(
        text, &file,
        "the ConfigMap and config/actor-limits.toml differ"
    );
    axon::limits::Limits::parse(text, "ConfigMap axon-limits").expect("valid limits");
}

#[test]
fn the_service_exposes_xds_and_monitoring_to_the_pods() {
    let docs = documents();
    let service: Service = one(&docs, "Service");
    let deployment: Deployment = one(&docs, "Deployment");
    let spec = service.spec.expect("spec");
    let ports: BTreeMap<i32, (Option<String>, Option<IntOrString>)> = spec
        .ports
        .iter()
        .flatten()
        .map(|p| (p.port, (p.name.clone(), p.target_port.clone())))
        .collect();
    assert_eq!(
        ports,
        BTreeMap::from([
            (
                15010,
                (Some("grpc-xds".to_string()), Some(IntOrString::Int(15010)))
            ),
            (
                15014,
                (
                    Some("http-monitoring".to_string()),
                    Some(IntOrString::Int(15014))
                )
            ),
        ])
    );
    let selector = spec.selector.expect("selector");
    let template_labels = deployment
        .spec
        .as_ref()
        .and_then(|s| s.template.metadata.as_ref())
        .and_then(|m| m.labels.clone())
        .expect("pod labels");
    assert!(
        selector
            .iter()
            .all(|(k, v)| template_labels.get(k) == Some(v))
    );
}

#[test]
fn the_dockerfile_builds_a_release_binary_into_a_non_root_image() {
    let text = std::fs::read_to_string(root().join("Dockerfile")).expect("Dockerfile");
    let froms: Vec<&str> = text.lines().filter(|l| l.starts_with("FROM ")).collect();
    assert_eq!(froms.len(), 2, "multi-stage: {froms:?}");
    assert!(
        froms[1].contains("distroless") && froms[1].contains("nonroot"),
        "{froms:?}"
    );
    assert!(text.contains("cargo build --release"));
    assert!(text.contains("ENTRYPOINT [\"/usr/local/bin/axon\"]"));
    assert!(
        text.lines()
            .any(|l| l.starts_with("USER ") && !l.contains("root:root"))
    );
    assert!(text.contains("EXPOSE 15010 15014"));
    // Every path the build stage copies exists (Cargo.toml names the benches).
    for line in text
        .lines()
        .filter(|l| l.starts_with("COPY ") && !l.contains("--from"))
    {
        let parts: Vec<&str> = line.split_whitespace().collect();
        for src in &parts[1..parts.len() - 1] {
            assert!(
                Path::new(&root()).join(src).exists(),
                "{line}: {src} is missing"
            );
        }
    }
}
