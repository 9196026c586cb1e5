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
fn rbac_grants_get_list_watch_on_exactly_what_axon_reads_and_token_reviews() {
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
        ("", "secrets"),
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
    .chain([(
        (
            "authentication.k8s.io".to_string(),
            "tokenreviews".to_string(),
        ),
        BTreeSet::from(["create".to_string()]),
    )])
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
            (15012, Some("tls-xds".to_string())),
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
                15012,
                (Some("tls-xds".to_string()), Some(IntOrString::Int(15012)))
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
    assert!(text.contains("EXPOSE 15010 15012 15014"));
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

/// The value after `flag` in `args`.
fn arg<'a>(args: &'a [String], flag: &str) -> Option<&'a str> {
    args.iter()
        .position(|a| a == flag)
        .and_then(|i| args.get(i + 1))
        .map(String::as_str)
}

#[test]
fn the_tls_port_serves_its_certificate_from_the_secret_with_token_auth_on() {
    let docs = documents();
    let deployment: Deployment = one(&docs, "Deployment");
    let c = container(&deployment);
    let args = c.args.clone().expect("args");
    assert_eq!(arg(&args, "--xds-tls-addr"), Some("0.0.0.0:15012"));
    assert_eq!(arg(&args, "--token-auth"), Some("kubernetes"));
    let pod = deployment
        .spec
        .as_ref()
        .and_then(|s| s.template.spec.as_ref())
        .expect("pod");
    // Each TLS file is in a directory mounted whole (a subPath mount is never updated, so a
    // renewed certificate would not reach axon) from the Secret axon-tls, under its key.
    for (flag, key) in [
        ("--tls-cert", "tls.crt"),
        ("--tls-key", "tls.key"),
        ("--client-ca", "ca.crt"),
    ] {
        let path = arg(&args, flag).unwrap_or_else(|| panic!("{flag}"));
        let mount = c
            .volume_mounts
            .iter()
            .flatten()
            .find(|m| path.starts_with(&format!("{}/", m.mount_path)))
            .unwrap_or_else(|| panic!("{flag} {path} is not in a mounted volume"));
        assert_eq!(mount.sub_path, None, "{flag}: a subPath mount");
        assert_eq!(path, format!("{}/{key}", mount.mount_path));
        let volume = pod
            .volumes
            .iter()
            .flatten()
            .find(|v| v.name == mount.name)
            .expect("the mounted volume");
        let secret = volume.secret.as_ref().expect("a Secret volume");
        assert_eq!(secret.secret_name.as_deref(), Some("axon-tls"));
    }
}

#[test]
fn the_cert_manager_example_makes_the_secret_for_the_services_name() {
    let path = root().join("config/kubernetes/examples/cert-manager.yaml");
    let text = std::fs::read_to_string(&path).expect("the cert-manager example");
    let docs: Vec<serde_json::Value> = text
        .split("\n---\n")
        .map(|d| serde_norway::from_str(d).expect("YAML"))
        .collect();
    let serving = docs
        .iter()
        .find(|d| d["kind"] == "Certificate" && d["spec"]["isCA"] != true)
        .expect("axon's Certificate");
    assert_eq!(serving["spec"]["secretName"], "axon-tls");
    assert_eq!(serving["metadata"]["namespace"], "axon-system");
    let names: Vec<&str> = serving["spec"]["dnsNames"]
        .as_array()
        .expect("dnsNames")
        .iter()
        .filter_map(|n| n.as_str())
        .collect();
    let service: Service = one(&documents(), "Service");
    let name = format!(
        "{}.{}.svc",
        service.metadata.name.as_deref().unwrap(),
        service.metadata.namespace.as_deref().unwrap()
    );
    assert!(names.contains(&name.as_str()), "{names:?} lacks {name}");
    // The issuer it names is in the example.
    let issuer = serving["spec"]["issuerRef"]["name"].as_str().unwrap();
    assert!(
        docs.iter()
            .any(|d| d["kind"] == "Issuer" && d["metadata"]["name"] == issuer)
    );

    // The TLS gateway bootstrap dials that name on the TLS port.
    let bootstrap = std::fs::read_to_string(root().join("config/envoy-gateway-bootstrap-tls.yaml"))
        .expect("the TLS gateway bootstrap");
    let bootstrap: serde_json::Value = serde_norway::from_str(&bootstrap).expect("YAML");
    assert_eq!(
        bootstrap["dynamic_resources"]["ads_config"]["grpc_services"][0]["google_grpc"]["target_uri"],
        format!("{name}:15012")
    );
}
