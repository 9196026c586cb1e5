//! The Kubernetes manifests (`config/kubernetes/`) and the Dockerfile, checked without a
//! cluster: every document is parsed into its k8s-openapi type, and the image, args, ports,
//! probes, security context and RBAC rules are asserted, and what running several replicas
//! needs: three of them spread over the nodes, a disruption budget, a CPU autoscaler, the
//! headless peer Service and the Role that reads its EndpointSlices, a preStop that lets the
//! drain finish, requests from the benchmark figures, a versioned image.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use clap::Parser;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::autoscaling::v2::HorizontalPodAutoscaler;
use k8s_openapi::api::core::v1::{ConfigMap, Container, Namespace, Service, ServiceAccount};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, Role, RoleBinding};
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

/// The object of `kind` named `name`, typed.
fn named<T: DeserializeOwned>(
    docs: &BTreeMap<String, Vec<serde_json::Value>>,
    kind: &str,
    name: &str,
) -> T {
    let doc = docs
        .get(kind)
        .into_iter()
        .flatten()
        .find(|d| d["metadata"]["name"] == name)
        .unwrap_or_else(|| panic!("no {kind} {name}"));
    serde_json::from_value(doc.clone())
        .unwrap_or_else(|e| panic!("{kind} {name} does not parse as its k8s-openapi type: {e}"))
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
            "HorizontalPodAutoscaler",
            "Namespace",
            "PodDisruptionBudget",
            "Role",
            "RoleBinding",
            "Service",
            "ServiceAccount",
            "ValidatingWebhookConfiguration"
        ])
    );
    let ns: Namespace = one(&docs, "Namespace");
    assert_eq!(ns.metadata.name.as_deref(), Some("axon-system"));
    for kind in [
        "ServiceAccount",
        "ConfigMap",
        "Deployment",
        "Service",
        "PodDisruptionBudget",
        "HorizontalPodAutoscaler",
        "Role",
        "RoleBinding",
    ] {
        for doc in &docs[kind] {
            let namespace = doc["metadata"]["namespace"].as_str();
            assert_eq!(namespace, Some("axon-system"), "{kind}");
        }
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
    let mut expected: BTreeMap<(String, String), BTreeSet<String>> = [
        ("", "pods"),
        ("", "namespaces"),
        ("", "secrets"),
        ("discovery.k8s.io", "endpointslices"),
        ("networking.istio.io", "virtualservices"),
        ("networking.istio.io", "destinationrules"),
        ("networking.istio.io", "serviceentries"),
        ("networking.istio.io", "workloadentries"),
        ("networking.istio.io", "sidecars"),
        ("security.istio.io", "peerauthentications"),
        ("security.istio.io", "authorizationpolicies"),
        ("security.istio.io", "requestauthentications"),
        ("telemetry.istio.io", "telemetries"),
        ("gateway.networking.k8s.io", "gatewayclasses"),
        ("gateway.networking.k8s.io", "gateways"),
        ("gateway.networking.k8s.io", "httproutes"),
        ("gateway.networking.k8s.io", "grpcroutes"),
        ("gateway.networking.k8s.io", "tlsroutes"),
        ("gateway.networking.k8s.io", "tcproutes"),
        ("gateway.networking.k8s.io", "referencegrants"),
        ("gateway.networking.k8s.io", "backendtlspolicies"),
    ]
    .into_iter()
    .map(|(g, r)| ((g.to_string(), r.to_string()), read.clone()))
    .chain([
        (
            (
                "authentication.k8s.io".to_string(),
                "tokenreviews".to_string(),
            ),
            BTreeSet::from(["create".to_string()]),
        ),
        // The CA's root in every namespace's istio-ca-root-cert.
        (
            ("".to_string(), "configmaps".to_string()),
            ["get", "list", "watch", "create", "update"]
                .map(String::from)
                .into(),
        ),
        // The webhook's caBundle and failurePolicy, and the dry-run Gateway that tells the
        // API server calls the webhook.
        (
            (
                "admissionregistration.k8s.io".to_string(),
                "validatingwebhookconfigurations".to_string(),
            ),
            ["get", "list", "watch", "update"].map(String::from).into(),
        ),
        (
            ("networking.istio.io".to_string(), "gateways".to_string()),
            ["get", "list", "watch", "create"].map(String::from).into(),
        ),
    ])
    // The Gateway API status, written by the holder of the status Lease.
    .chain(
        [
            "gatewayclasses",
            "gateways",
            "httproutes",
            "grpcroutes",
            "tlsroutes",
            "tcproutes",
            "backendtlspolicies",
        ]
        .map(|r| {
            (
                (
                    "gateway.networking.k8s.io".to_string(),
                    format!("{r}/status"),
                ),
                ["get", "patch", "update"].map(String::from).into(),
            )
        }),
    )
    // What the automated deployment of managed Gateways applies (server-side) and deletes.
    .chain(
        [
            ("", "services"),
            ("", "serviceaccounts"),
            ("apps", "deployments"),
            ("autoscaling", "horizontalpodautoscalers"),
            ("policy", "poddisruptionbudgets"),
        ]
        .map(|(g, r)| {
            (
                (g.to_string(), r.to_string()),
                ["get", "list", "watch", "create", "patch", "delete"]
                    .map(String::from)
                    .into(),
            )
        }),
    )
    .collect();
    // The GatewayClass istio, created when missing.
    expected
        .get_mut(&(
            "gateway.networking.k8s.io".to_string(),
            "gatewayclasses".to_string(),
        ))
        .unwrap()
        .insert("create".to_string());
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
    assert_eq!(
        c.image.as_deref(),
        Some(format!("axon:{}", env!("CARGO_PKG_VERSION")).as_str()),
        "the image is tagged with the crate's version, never latest"
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
            (15014, Some("http-monitoring".to_string())),
            (15017, Some("https-webhook".to_string()))
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
    let service: Service = named(&docs, "Service", "axon");
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
            (
                443,
                (
                    Some("https-webhook".to_string()),
                    Some(IntOrString::Int(15017))
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
    // Every path the build stage copies exists.
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
    // Every crate Cargo.toml patches in from a path is in the build context.
    let copied: Vec<&str> = text
        .lines()
        .filter(|l| l.starts_with("COPY ") && !l.contains("--from"))
        .flat_map(|l| {
            let parts: Vec<&str> = l.split_whitespace().collect();
            parts[1..parts.len() - 1].to_vec()
        })
        .collect();
    let manifest: toml::Table = std::fs::read_to_string(root().join("Cargo.toml"))
        .expect("Cargo.toml")
        .parse()
        .expect("Cargo.toml is TOML");
    let patched = manifest
        .get("patch")
        .and_then(|p| p.get("crates-io"))
        .and_then(|p| p.as_table());
    // And every member crate of the workspace.
    let members = manifest
        .get("workspace")
        .and_then(|w| w.get("members"))
        .and_then(|m| m.as_array())
        .expect("Cargo.toml is a workspace");
    for member in members
        .iter()
        .filter_map(|m| m.as_str())
        .filter(|m| *m != ".")
    {
        assert!(
            copied
                .iter()
                .any(|src| Path::new(member).starts_with(src.trim_end_matches('/'))),
            "the workspace's member {member}: the Dockerfile must copy it"
        );
    }
    for (name, spec) in patched.into_iter().flatten() {
        let Some(path) = spec.get("path").and_then(|p| p.as_str()) else {
            continue;
        };
        assert!(
            copied
                .iter()
                .any(|src| Path::new(path).starts_with(src.trim_end_matches('/'))),
            "Cargo.toml patches {name} in from {path}: the Dockerfile must copy it"
        );
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
fn the_tls_port_is_the_meshs_ca_with_token_auth_on() {
    let docs = documents();
    let deployment: Deployment = one(&docs, "Deployment");
    let c = container(&deployment);
    let args = c.args.clone().expect("args");
    assert_eq!(arg(&args, "--xds-tls-addr"), Some("0.0.0.0:15012"));
    assert_eq!(arg(&args, "--token-auth"), Some("kubernetes"));
    // The service's name in the CA-issued serving certificate.
    let service: Service = named(&docs, "Service", "axon");
    let name = format!(
        "{}.{}.svc",
        service.metadata.name.as_deref().unwrap(),
        service.metadata.namespace.as_deref().unwrap()
    );
    assert_eq!(arg(&args, "--xds-dns-names"), Some(name.as_str()));
    // The deployed Gateways' proxies reach axon at that name, on the TLS port.
    assert_eq!(
        arg(&args, "--gateway-discovery-address"),
        Some(format!("{name}:15012").as_str())
    );
    assert_eq!(
        arg(&args, "--tls-cert"),
        None,
        "the CA issues the serving certificate"
    );
    // The CA's directory: a writable emptyDir mounted whole (the root file is kept in the
    // Secret istio-ca-secret, the directory holds the copy the CA reads).
    let pod = deployment
        .spec
        .as_ref()
        .and_then(|s| s.template.spec.as_ref())
        .expect("pod");
    let dir = arg(&args, "--ca-dir").expect("--ca-dir");
    let mount = c
        .volume_mounts
        .iter()
        .flatten()
        .find(|m| m.mount_path == dir)
        .expect("--ca-dir is a mounted volume");
    assert_ne!(mount.read_only, Some(true));
    let volume = pod
        .volumes
        .iter()
        .flatten()
        .find(|v| v.name == mount.name)
        .expect("the mounted volume");
    assert!(volume.empty_dir.is_some(), "{volume:?}");
    // What the CA writes: Secrets in axon's namespace (Role axon-ca, bound to its account).
    let role: Role = named(&docs, "Role", "axon-ca");
    let rules = role.rules.expect("rules");
    assert_eq!(rules.len(), 1);
    assert_eq!(rules[0].api_groups.as_deref(), Some(&["".to_string()][..]));
    assert_eq!(
        rules[0].resources.as_deref(),
        Some(&["secrets".to_string()][..])
    );
    assert_eq!(rules[0].verbs, ["get", "create"]);
    let binding: RoleBinding = named(&docs, "RoleBinding", "axon-ca");
    assert_eq!(binding.role_ref.name, "axon-ca");
    let subjects = binding.subjects.expect("subjects");
    assert_eq!(subjects[0].name, "axon");
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
    let service: Service = named(&documents(), "Service", "axon");
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

/// The pod template's labels.
fn pod_labels(deployment: &Deployment) -> BTreeMap<String, String> {
    deployment
        .spec
        .as_ref()
        .and_then(|s| s.template.metadata.as_ref())
        .and_then(|m| m.labels.clone())
        .expect("pod labels")
}

/// Whether a label selector's `matchLabels` (and nothing else) select the pods.
fn selects(
    selector: Option<&k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector>,
    labels: &BTreeMap<String, String>,
) -> bool {
    selector.is_some_and(|s| {
        s.match_expressions.is_none()
            && s.match_labels
                .as_ref()
                .is_some_and(|m| !m.is_empty() && m.iter().all(|(k, v)| labels.get(k) == Some(v)))
    })
}

#[test]
fn three_replicas_spread_over_the_nodes_at_most_one_disrupted() {
    let docs = documents();
    let deployment: Deployment = one(&docs, "Deployment");
    let spec = deployment.spec.as_ref().expect("spec");
    assert_eq!(spec.replicas, Some(3));
    let rolling = spec
        .strategy
        .as_ref()
        .and_then(|s| s.rolling_update.as_ref())
        .expect("a rolling update");
    assert_eq!(rolling.max_unavailable, Some(IntOrString::Int(0)));
    let labels = pod_labels(&deployment);
    let pod = spec.template.spec.as_ref().expect("pod");
    let spread = pod
        .topology_spread_constraints
        .iter()
        .flatten()
        .find(|t| t.topology_key == "kubernetes.io/hostname")
        .expect("a spread over the nodes");
    assert_eq!(spread.max_skew, 1);
    assert!(selects(spread.label_selector.as_ref(), &labels));

    let budget: PodDisruptionBudget = one(&docs, "PodDisruptionBudget");
    let budget = budget.spec.expect("spec");
    assert!(selects(budget.selector.as_ref(), &labels));
    assert_eq!(budget.max_unavailable, Some(IntOrString::Int(1)));
    assert_eq!(budget.min_available, None);
}

#[test]
fn the_autoscaler_scales_the_deployment_on_cpu_from_three() {
    let docs = documents();
    let deployment: Deployment = one(&docs, "Deployment");
    let hpa: HorizontalPodAutoscaler = one(&docs, "HorizontalPodAutoscaler");
    let spec = hpa.spec.expect("spec");
    assert_eq!(spec.scale_target_ref.kind, "Deployment");
    assert_eq!(
        spec.scale_target_ref.api_version.as_deref(),
        Some("apps/v1")
    );
    assert_eq!(
        Some(spec.scale_target_ref.name.as_str()),
        deployment.metadata.name.as_deref()
    );
    let replicas = deployment.spec.as_ref().and_then(|s| s.replicas);
    assert_eq!(spec.min_replicas, replicas, "never fewer than the three");
    assert!(Some(spec.max_replicas) > replicas);
    let metrics = spec.metrics.expect("metrics");
    assert_eq!(metrics.len(), 1);
    let cpu = metrics[0].resource.as_ref().expect("a resource metric");
    assert_eq!(cpu.name, "cpu");
    assert_eq!(cpu.target.type_, "Utilization");
    assert!(
        cpu.target
            .average_utilization
            .is_some_and(|u| (1..=100).contains(&u))
    );
    // Utilization is against the request.
    let requests = container(&deployment)
        .resources
        .as_ref()
        .and_then(|r| r.requests.clone())
        .expect("requests");
    assert!(requests.contains_key("cpu"));
}

/// A quantity (`500m`, `256Mi`, `1Gi`, `2`) as a number of units (cores, bytes).
fn quantity(q: &str) -> f64 {
    let (number, factor) = [
        ("Ki", 1024f64),
        ("Mi", 1024f64.powi(2)),
        ("Gi", 1024f64.powi(3)),
        ("m", 1e-3),
    ]
    .into_iter()
    .find_map(|(suffix, f)| q.strip_suffix(suffix).map(|n| (n, f)))
    .unwrap_or((q, 1.0));
    number.parse::<f64>().expect("a quantity") * factor
}

#[test]
fn the_requests_hold_the_benchmarked_memory_and_a_share_of_a_push() {
    let docs = documents();
    let deployment: Deployment = one(&docs, "Deployment");
    let resources = container(&deployment).resources.clone().expect("resources");
    let requests = resources.requests.expect("requests");
    let limits = resources.limits.expect("limits");
    // The largest "axon RSS with 2000 proxies" of BENCHMARKS.md: one replica holds every
    // proxy of that mesh after losing the two others.
    let benchmarks = std::fs::read_to_string(root().join("BENCHMARKS.md")).expect("BENCHMARKS.md");
    let rss_mib = benchmarks
        .lines()
        .filter(|l| l.starts_with("| axon RSS with 2000 proxies |"))
        .filter_map(|l| {
            l.split('|')
                .nth(2)?
                .split_whitespace()
                .next()?
                .parse::<f64>()
                .ok()
        })
        .fold(0f64, f64::max);
    assert!(rss_mib > 100.0, "the figure is in BENCHMARKS.md");
    let memory = quantity(&requests["memory"].0);
    assert!(
        memory >= rss_mib * 1024.0 * 1024.0,
        "{memory} < {rss_mib} MiB"
    );
    assert!(memory <= quantity(&limits["memory"].0));
    let cpu = quantity(&requests["cpu"].0);
    assert!((0.25..=2.0).contains(&cpu), "{cpu} cores");
    assert!(
        !limits.contains_key("cpu"),
        "no CPU limit: a push is a burst"
    );
}

#[test]
fn the_pre_stop_and_the_drain_fit_in_the_grace_period() {
    let docs = documents();
    let deployment: Deployment = one(&docs, "Deployment");
    let pod = deployment
        .spec
        .as_ref()
        .and_then(|s| s.template.spec.as_ref())
        .expect("pod");
    let sleep = container(&deployment)
        .lifecycle
        .as_ref()
        .and_then(|l| l.pre_stop.as_ref())
        .and_then(|p| p.sleep.as_ref())
        .expect("a preStop sleep (the image has no shell)")
        .seconds;
    assert!(sleep >= 1, "long enough for the endpoint removal to spread");
    let config_map: ConfigMap = one(&docs, "ConfigMap");
    let text = &config_map.data.expect("data")["actor-limits.toml"];
    let limits = axon::limits::Limits::parse(text, "ConfigMap axon-limits").expect("limits");
    let needed =
        std::time::Duration::from_secs(sleep as u64) + limits.drain_duration + limits.close_grace;
    let grace = pod
        .termination_grace_period_seconds
        .expect("a grace period");
    assert!(
        needed < std::time::Duration::from_secs(grace as u64),
        "preStop {sleep} s + drain_duration + close_grace = {needed:?} must end before the {grace} s grace period"
    );
}

#[test]
fn the_peer_service_is_headless_and_axon_may_read_its_endpoint_slices() {
    let docs = documents();
    let deployment: Deployment = one(&docs, "Deployment");
    let peers: Service = named(&docs, "Service", "axon-peers");
    assert_eq!(peers.metadata.namespace.as_deref(), Some("axon-system"));
    let spec = peers.spec.expect("spec");
    assert_eq!(spec.cluster_ip.as_deref(), Some("None"), "headless");
    let selector = spec.selector.expect("selector");
    let labels = pod_labels(&deployment);
    assert!(!selector.is_empty() && selector.iter().all(|(k, v)| labels.get(k) == Some(v)));
    let ports: Vec<(i32, Option<IntOrString>)> = spec
        .ports
        .iter()
        .flatten()
        .map(|p| (p.port, p.target_port.clone()))
        .collect();
    assert_eq!(
        ports,
        [(15014, Some(IntOrString::Int(15014)))],
        "the monitoring port"
    );

    // The Role: get, list, watch on EndpointSlices in axon's namespace, bound to its account.
    let role: Role = named(&docs, "Role", "axon-peers");
    let rules = role.rules.expect("rules");
    assert_eq!(rules.len(), 1);
    assert_eq!(
        rules[0].api_groups.as_deref(),
        Some(&["discovery.k8s.io".to_string()][..])
    );
    assert_eq!(
        rules[0].resources.as_deref(),
        Some(&["endpointslices".to_string()][..])
    );
    let verbs: BTreeSet<&str> = rules[0].verbs.iter().map(String::as_str).collect();
    assert_eq!(verbs, BTreeSet::from(["get", "list", "watch"]));
    let binding: RoleBinding = named(&docs, "RoleBinding", "axon-peers");
    assert_eq!(binding.role_ref.kind, "Role");
    assert_eq!(
        Some(binding.role_ref.name.as_str()),
        role.metadata.name.as_deref()
    );
    let account: ServiceAccount = one(&docs, "ServiceAccount");
    let subjects = binding.subjects.expect("subjects");
    assert_eq!(subjects.len(), 1);
    assert_eq!(
        Some(subjects[0].name.as_str()),
        account.metadata.name.as_deref()
    );
    assert_eq!(subjects[0].namespace.as_deref(), Some("axon-system"));

    // axon is told the peer Service's name, and its own pod's name (to leave itself out).
    let c = container(&deployment);
    let args = c.args.clone().expect("args");
    assert_eq!(arg(&args, "--peer-service"), Some("axon-peers"), "{args:?}");
    let env = c.env.clone().expect("env");
    let field = |name: &str| {
        env.iter()
            .find(|e| e.name == name)
            .and_then(|e| e.value_from.as_ref())
            .and_then(|v| v.field_ref.as_ref())
            .map(|f| f.field_path.clone())
    };
    assert_eq!(field("POD_NAME").as_deref(), Some("metadata.name"));
    assert_eq!(field("POD_IP").as_deref(), Some("status.podIP"));
}

#[test]
fn the_validating_webhook_is_istiods_and_axon_keeps_its_ca_bundle() {
    use k8s_openapi::api::admissionregistration::v1::ValidatingWebhookConfiguration;
    let docs = documents();
    let config: ValidatingWebhookConfiguration = one(&docs, "ValidatingWebhookConfiguration");
    let name = config.metadata.name.clone().expect("a name");
    let webhooks = config.webhooks.expect("webhooks");
    assert_eq!(webhooks.len(), 1);
    let webhook = &webhooks[0];
    assert_eq!(webhook.name, "rev.validation.istio.io");
    // istiod's chart: fail open until the webhook serves (axon turns it to Fail), no caBundle
    // (axon writes its CA's root).
    assert_eq!(webhook.failure_policy.as_deref(), Some("Ignore"));
    assert_eq!(webhook.client_config.ca_bundle, None);
    assert_eq!(webhook.side_effects, "None");
    assert_eq!(webhook.admission_review_versions, ["v1"]);
    let rules = webhook.rules.as_ref().expect("rules");
    let groups: BTreeSet<&str> = rules
        .iter()
        .flat_map(|r| r.api_groups.iter().flatten().map(String::as_str))
        .collect();
    assert!(groups.contains("networking.istio.io") && groups.contains("security.istio.io"));
    assert!(rules.iter().all(|r| {
        r.operations
            .as_ref()
            .is_some_and(|o| o == &["CREATE", "UPDATE"])
    }));
    // It reaches axon's webhook port through the Service.
    let service_ref = webhook.client_config.service.as_ref().expect("a Service");
    assert_eq!(service_ref.path.as_deref(), Some("/validate"));
    let service: Service = named(&docs, "Service", &service_ref.name);
    let port = service
        .spec
        .and_then(|s| s.ports)
        .into_iter()
        .flatten()
        .find(|p| Some(p.port) == service_ref.port)
        .expect("the Service has the webhook's port");
    let deployment: Deployment = one(&docs, "Deployment");
    let c = &deployment.spec.unwrap().template.spec.unwrap().containers[0];
    let args = c.args.clone().expect("args");
    let target = match port.target_port {
        Some(IntOrString::Int(p)) => p,
        other => panic!("a numeric target port: {other:?}"),
    };
    assert_eq!(
        arg(&args, "--webhook-addr"),
        Some(format!("0.0.0.0:{target}").as_str())
    );
    assert_eq!(arg(&args, "--webhook-config-name"), Some(name.as_str()));
    // axon may keep it current.
    let role: ClusterRole = named(&docs, "ClusterRole", "axon-reader");
    let rules = role.rules.expect("rules");
    assert!(rules.iter().any(|r| {
        r.resources
            .iter()
            .flatten()
            .any(|x| x == "validatingwebhookconfigurations")
            && ["get", "list", "watch", "update"]
                .iter()
                .all(|v| r.verbs.iter().any(|x| x == v))
    }));
}
