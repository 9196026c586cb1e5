//! The objects istiod's deployment controller creates for a managed Gateway
//! (`pilot/pkg/config/kube/gatewaycommon/deploymentcontroller.go` `configureIstioGateway`,
//! `render`, `extractServicePorts`, and the `kube-gateway.yaml` template of istio-discovery):
//! a ServiceAccount, a Deployment of `istio-proxy` routers and a Service, each named
//! `NAME-istio` (the annotation `gateway.istio.io/name-override` renames them,
//! `gateway.istio.io/service-account` the ServiceAccount), owned by the Gateway; and, when an
//! overlay patches them, a HorizontalPodAutoscaler and a PodDisruptionBudget of the same name.
//!
//! Pure: a Gateway and [`DeploymentSettings`] in, k8s-openapi objects out ([`render`]; with
//! istiod's overlays, [`render_with`]: the `data` of the class-defaults ConfigMap, the oldest
//! in istiod's namespace labelled [`CLASS_DEFAULTS_LABEL`], then of the ConfigMap the Gateway's
//! `infrastructure.parametersRef` names ([`parameters_ref`]), each a strategic merge patch
//! per kind, [`super::overlay`]). The `GatewayDeployer` in `registry::kubernetes` reads the
//! ConfigMaps and applies the objects. Only Gateways of class `istio` that istiod manages
//! (`IsManaged`: no address, or one of type IPAddress) get any.
//! Not rendered (istiod's optional parts): resources, the log-level and proxy-image
//! annotations, native sidecars, ambient and east-west variants.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::apps::v1::{Deployment, DeploymentSpec};
use k8s_openapi::api::autoscaling::v2::HorizontalPodAutoscaler;
use k8s_openapi::api::core::v1::{
    Capabilities, ConfigMapVolumeSource, Container, ContainerPort, DownwardAPIVolumeFile,
    DownwardAPIVolumeSource, EmptyDirVolumeSource, EnvVar, EnvVarSource, HTTPGetAction,
    ObjectFieldSelector, PodSecurityContext, PodSpec, PodTemplateSpec, Probe,
    ProjectedVolumeSource, ResourceFieldSelector, SecurityContext, Service, ServiceAccount,
    ServiceAccountTokenProjection, ServicePort, ServiceSpec, Sysctl, Volume, VolumeMount,
    VolumeProjection,
};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta, OwnerReference};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use axon_config::gateway_api::GatewaySpec;

mod overlays;
pub use overlays::{RenderError, parameters_ref, render_with};

/// The class whose Gateways axon deploys (istiod's built-in `istio` class).
pub const CLASS: &str = "istio";
/// The label naming the Gateway (the Deployment's selector and the Service's).
pub const GATEWAY_NAME_LABEL: &str = "gateway.networking.k8s.io/gateway-name";
/// The label naming the class.
pub const GATEWAY_CLASS_LABEL: &str = "gateway.networking.k8s.io/gateway-class-name";
/// The label `apply` adds to what the controller manages, and its value.
pub const MANAGED_LABEL: &str = "gateway.istio.io/managed";
pub const MANAGED_VALUE: &str = "istio.io-gateway-controller";
/// The ambient label istiod sets to `none` unless the Gateway sets it.
const DATAPLANE_MODE_LABEL: &str = "istio.io/dataplane-mode";
/// The field manager of the server-side applies.
pub const FIELD_MANAGER: &str = "istio.io/gateway-controller";
/// The label of the ConfigMap, in istiod's namespace, whose `data` are the overlays of every
/// Gateway of the class it names (the oldest such ConfigMap).
pub const CLASS_DEFAULTS_LABEL: &str = "gateway.istio.io/defaults-for-class";

/// Annotations that control the controller and are not copied to what it creates.
const CONTROL_ANNOTATIONS: [&str; 4] = [
    "kubectl.kubernetes.io/last-applied-configuration",
    "gateway.istio.io/name-override",
    "gateway.istio.io/service-account",
    "gateway.istio.io/controller-version",
];

/// What the rendered objects depend on besides the Gateway.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeploymentSettings {
    /// The `istio-proxy` container's image.
    pub proxy_image: String,
    /// axon's address for proxies, `host:port` (`PROXY_CONFIG.discoveryAddress`, `CA_ADDR`).
    pub discovery_address: String,
    /// `ISTIO_META_CLUSTER_ID`.
    pub cluster_id: String,
    /// `ISTIO_META_MESH_ID`.
    pub mesh_id: String,
    pub trust_domain: String,
    /// The cluster domain (`--domain $(POD_NAMESPACE).svc.DOMAIN`).
    pub domain_suffix: String,
}

/// A Gateway as the renderer reads it.
#[derive(Debug, Clone, Copy)]
pub struct GatewayObject<'a> {
    pub namespace: &'a str,
    pub name: &'a str,
    pub uid: &'a str,
    pub labels: &'a BTreeMap<String, String>,
    pub annotations: &'a BTreeMap<String, String>,
    pub spec: &'a GatewaySpec,
}

/// The objects of one managed Gateway.
#[derive(Debug, Clone, PartialEq)]
pub struct Rendered {
    pub service_account: ServiceAccount,
    pub deployment: Deployment,
    pub service: Service,
    /// Only when an overlay patches it (`horizontalPodAutoscaler`).
    pub horizontal_pod_autoscaler: Option<HorizontalPodAutoscaler>,
    /// Only when an overlay patches it (`podDisruptionBudget`).
    pub pod_disruption_budget: Option<PodDisruptionBudget>,
}

/// istiod's `IsManaged`: no address, or exactly one of type IPAddress.
pub fn is_managed(spec: &GatewaySpec) -> bool {
    spec.addresses.is_empty()
        || (spec.addresses.len() == 1 && spec.addresses[0].address_type == "IPAddress")
}

/// The name of the Deployment and Service (`GetDefaultName`, or the name override).
pub fn deployment_name(gw: &GatewayObject<'_>) -> String {
    gw.annotations
        .get("gateway.istio.io/name-override")
        .cloned()
        .unwrap_or_else(|| format!("{}-{}", gw.name, gw.spec.gateway_class_name))
}

/// The objects of `gw` without overlays (no HorizontalPodAutoscaler nor
/// PodDisruptionBudget), or `None` when it is not of class `istio` or not managed.
pub fn render(gw: &GatewayObject<'_>, settings: &DeploymentSettings) -> Option<Rendered> {
    let mut r = template(gw, settings)?;
    r.horizontal_pod_autoscaler = None;
    r.pod_disruption_budget = None;
    Some(r)
}

/// Every object of the template, the HorizontalPodAutoscaler and PodDisruptionBudget included.
fn template(gw: &GatewayObject<'_>, settings: &DeploymentSettings) -> Option<Rendered> {
    if gw.spec.gateway_class_name != CLASS || !is_managed(gw.spec) {
        return None;
    }
    let name = deployment_name(gw);
    let service_account = gw
        .annotations
        .get("gateway.istio.io/service-account")
        .cloned()
        .unwrap_or_else(|| name.clone());
    let infra = gw.spec.infrastructure.as_ref();
    // istiod's extractInfrastructureMetadata: the infrastructure's when it sets any, else
    // the Gateway's own (an empty `infrastructure.labels: {}` counts as unset here, where
    // istiod takes it as set).
    let infra_labels = match infra.filter(|i| !i.labels.is_empty()) {
        Some(i) => i.labels.clone(),
        None => gw.labels.clone(),
    };
    let source_annotations = match infra.filter(|i| !i.annotations.is_empty()) {
        Some(i) => &i.annotations,
        None => gw.annotations,
    };
    let annotations: BTreeMap<String, String> = source_annotations
        .iter()
        .filter(|(k, _)| !CONTROL_ANNOTATIONS.contains(&k.as_str()))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    let mut labels = infra_labels;
    // istiod's setLabelOverrides (ambient waypoints on, its default): a gateway is kept out of
    // ambient capture unless its labels say otherwise.
    if !gw.labels.contains_key(DATAPLANE_MODE_LABEL) && !labels.contains_key(DATAPLANE_MODE_LABEL) {
        labels.insert(DATAPLANE_MODE_LABEL.into(), "none".into());
    }
    labels.insert(GATEWAY_NAME_LABEL.into(), gw.name.into());
    labels.insert(GATEWAY_CLASS_LABEL.into(), CLASS.into());
    labels.insert(MANAGED_LABEL.into(), MANAGED_VALUE.into());
    let meta = |name: &str| ObjectMeta {
        name: Some(name.to_string()),
        namespace: Some(gw.namespace.to_string()),
        labels: Some(labels.clone()),
        annotations: Some(annotations.clone()),
        owner_references: Some(vec![OwnerReference {
            api_version: "gateway.networking.k8s.io/v1".into(),
            kind: "Gateway".into(),
            name: gw.name.into(),
            uid: gw.uid.into(),
            ..Default::default()
        }]),
        ..Default::default()
    };
    let selector = BTreeMap::from([(GATEWAY_NAME_LABEL.to_string(), gw.name.to_string())]);
    let mut pod_labels = BTreeMap::from([
        ("sidecar.istio.io/inject".to_string(), "false".to_string()),
        ("service.istio.io/canonical-name".to_string(), name.clone()),
        (
            "service.istio.io/canonical-revision".to_string(),
            "latest".to_string(),
        ),
    ]);
    pod_labels.extend(labels.clone());
    let mut pod_annotations = annotations.clone();
    pod_annotations.insert("istio.io/rev".into(), "default".into());
    pod_annotations.insert("prometheus.io/path".into(), "/stats/prometheus".into());
    pod_annotations.insert("prometheus.io/port".into(), "15020".into());
    pod_annotations.insert("prometheus.io/scrape".into(), "true".into());
    let deployment = Deployment {
        metadata: meta(&name),
        spec: Some(DeploymentSpec {
            selector: LabelSelector {
                match_labels: Some(selector.clone()),
                ..Default::default()
            },
            template: PodTemplateSpec {
                metadata: Some(ObjectMeta {
                    labels: Some(pod_labels),
                    annotations: Some(pod_annotations),
                    ..Default::default()
                }),
                spec: Some(pod_spec(gw.namespace, &name, &service_account, settings)),
            },
            ..Default::default()
        }),
        ..Default::default()
    };
    let service_type = gw
        .annotations
        .get("networking.istio.io/service-type")
        .cloned()
        .unwrap_or_else(|| "LoadBalancer".to_string());
    let load_balancer_ip = (service_type == "LoadBalancer")
        .then(|| gw.spec.addresses.first().map(|a| a.value.clone()))
        .flatten();
    let service = Service {
        metadata: meta(&name),
        spec: Some(ServiceSpec {
            ip_family_policy: Some("PreferDualStack".into()),
            ports: Some(service_ports(gw.spec)),
            selector: Some(selector),
            load_balancer_ip,
            type_: Some(service_type),
            ..Default::default()
        }),
        ..Default::default()
    };
    Some(Rendered {
        service_account: ServiceAccount {
            // istiod's `apply` labels each object managed, this one too.
            metadata: meta(&service_account),
            ..Default::default()
        },
        deployment,
        service,
        horizontal_pod_autoscaler: Some(overlays::horizontal_pod_autoscaler(meta(&name), &name)),
        pod_disruption_budget: Some(overlays::pod_disruption_budget(meta(&name), gw.name)),
    })
}

/// istiod's `extractServicePorts`: `status-port` 15021, then one port per distinct listener
/// port, named after its listener (`.` → `-`, at most 63 characters, unique), TCP, with the
/// lower-cased protocol as appProtocol.
pub fn service_ports(spec: &GatewaySpec) -> Vec<ServicePort> {
    let port = |name: String, number: u32, app: String| ServicePort {
        name: Some(name),
        port: i32::try_from(number).unwrap_or(i32::MAX),
        protocol: Some("TCP".into()),
        app_protocol: Some(app),
        ..Default::default()
    };
    let mut out = vec![port("status-port".into(), 15021, "tcp".into())];
    let mut numbers = BTreeSet::new();
    let mut used = BTreeSet::from(["status-port".to_string()]);
    for (i, l) in spec.listeners.iter().enumerate() {
        if !numbers.insert(l.port) {
            continue;
        }
        let mut name = truncate(&l.name.replace('.', "-"), 63);
        if name.is_empty() {
            name = format!("{}-{i}", l.protocol.to_lowercase());
        }
        let name = unique_port_name(&name, l.port, &mut used);
        out.push(port(name, l.port, l.protocol.to_lowercase()));
    }
    out
}

fn truncate(s: &str, max: usize) -> String {
    s.chars().take(max).collect()
}

/// istiod's `uniquePortName`: `name`, else `name-PORT`, `name-PORTx`, … within 63 characters.
fn unique_port_name(name: &str, port: u32, used: &mut BTreeSet<String>) -> String {
    let name = truncate(name, 63);
    let mut candidate = name.clone();
    let mut suffix = format!("-{port}");
    while used.contains(&candidate) {
        let keep = 63usize.saturating_sub(suffix.len());
        candidate = format!("{}{suffix}", truncate(&name, keep));
        suffix.push('x');
    }
    used.insert(candidate.clone());
    candidate
}

fn env(name: &str, value: &str) -> EnvVar {
    EnvVar {
        name: name.into(),
        value: Some(value.into()),
        ..Default::default()
    }
}

fn env_field(name: &str, path: &str) -> EnvVar {
    EnvVar {
        name: name.into(),
        value_from: Some(EnvVarSource {
            field_ref: Some(ObjectFieldSelector {
                field_path: path.into(),
                ..Default::default()
            }),
            ..Default::default()
        }),
        ..Default::default()
    }
}

fn env_resource(name: &str, resource: &str) -> EnvVar {
    EnvVar {
        name: name.into(),
        value_from: Some(EnvVarSource {
            resource_field_ref: Some(ResourceFieldSelector {
                resource: resource.into(),
                divisor: Some(Quantity("1".into())),
                ..Default::default()
            }),
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// The template's probes of pilot-agent's `/healthz/ready` on the status port.
fn ready_probe(failures: i32, initial_delay: i32, period: i32) -> Probe {
    Probe {
        failure_threshold: Some(failures),
        http_get: Some(HTTPGetAction {
            path: Some("/healthz/ready".into()),
            port: IntOrString::Int(15021),
            scheme: Some("HTTP".into()),
            ..Default::default()
        }),
        initial_delay_seconds: Some(initial_delay),
        period_seconds: Some(period),
        success_threshold: Some(1),
        timeout_seconds: Some(1),
        ..Default::default()
    }
}

fn mount(name: &str, path: &str) -> VolumeMount {
    VolumeMount {
        name: name.into(),
        mount_path: path.into(),
        ..Default::default()
    }
}

fn empty_dir(name: &str, medium: Option<&str>) -> Volume {
    Volume {
        name: name.into(),
        empty_dir: Some(EmptyDirVolumeSource {
            medium: medium.map(str::to_string),
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// The router pod of the template (pilotCertProvider `istiod`, the sds token audience
/// `istio-ca`, the proxy's UID/GID 1337).
fn pod_spec(namespace: &str, name: &str, service_account: &str, s: &DeploymentSettings) -> PodSpec {
    let proxy_config = serde_json::json!({ "discoveryAddress": s.discovery_address }).to_string();
    let env = vec![
        env("PILOT_CERT_PROVIDER", "istiod"),
        env("CA_ADDR", &s.discovery_address),
        env_field("POD_NAME", "metadata.name"),
        env_field("POD_NAMESPACE", "metadata.namespace"),
        env_field("INSTANCE_IP", "status.podIP"),
        env_field("SERVICE_ACCOUNT", "spec.serviceAccountName"),
        env_field("HOST_IP", "status.hostIP"),
        env_resource("ISTIO_CPU_LIMIT", "limits.cpu"),
        env("PROXY_CONFIG", &proxy_config),
        env("ISTIO_META_POD_PORTS", "[]"),
        env("ISTIO_META_APP_CONTAINERS", ""),
        env_resource("GOMEMLIMIT", "limits.memory"),
        env("ISTIO_META_CLUSTER_ID", &s.cluster_id),
        env_field("ISTIO_META_NODE_NAME", "spec.nodeName"),
        env("ISTIO_META_INTERCEPTION_MODE", "REDIRECT"),
        env("ISTIO_META_WORKLOAD_NAME", name),
        env(
            "ISTIO_META_OWNER",
            &format!("kubernetes://apis/apps/v1/namespaces/{namespace}/deployments/{name}"),
        ),
        env("ISTIO_META_MESH_ID", &s.mesh_id),
        env("TRUST_DOMAIN", &s.trust_domain),
    ];
    let port = |number: i32, name: &str| ContainerPort {
        container_port: number,
        name: Some(name.into()),
        protocol: Some("TCP".into()),
        ..Default::default()
    };
    let container = Container {
        name: "istio-proxy".into(),
        image: Some(s.proxy_image.clone()),
        args: Some(
            [
                "proxy",
                "router",
                "--domain",
                &format!("$(POD_NAMESPACE).svc.{}", s.domain_suffix),
                "--proxyLogLevel",
                "warning",
                "--proxyComponentLogLevel",
                "misc:error",
                "--log_output_level",
                "default:info",
            ]
            .map(str::to_string)
            .to_vec(),
        ),
        ports: Some(vec![
            port(15020, "metrics"),
            port(15021, "status-port"),
            port(15090, "http-envoy-prom"),
        ]),
        env: Some(env),
        startup_probe: Some(ready_probe(30, 1, 1)),
        readiness_probe: Some(ready_probe(4, 0, 15)),
        security_context: Some(SecurityContext {
            capabilities: Some(Capabilities {
                drop: Some(vec!["ALL".into()]),
                ..Default::default()
            }),
            allow_privilege_escalation: Some(false),
            privileged: Some(false),
            read_only_root_filesystem: Some(true),
            run_as_user: Some(1337),
            run_as_group: Some(1337),
            run_as_non_root: Some(true),
            ..Default::default()
        }),
        volume_mounts: Some(vec![
            mount("workload-socket", "/var/run/secrets/workload-spiffe-uds"),
            mount("credential-socket", "/var/run/secrets/credential-uds"),
            mount(
                "workload-certs",
                "/var/run/secrets/workload-spiffe-credentials",
            ),
            mount("istiod-ca-cert", "/var/run/secrets/istio"),
            mount("istio-data", "/var/lib/istio/data"),
            mount("istio-envoy", "/etc/istio/proxy"),
            mount("istio-token", "/var/run/secrets/tokens"),
            mount("istio-podinfo", "/etc/istio/pod"),
        ]),
        ..Default::default()
    };
    let podinfo = |path: &str, field: &str| DownwardAPIVolumeFile {
        path: path.into(),
        field_ref: Some(ObjectFieldSelector {
            field_path: field.into(),
            ..Default::default()
        }),
        ..Default::default()
    };
    PodSpec {
        security_context: Some(PodSecurityContext {
            sysctls: Some(vec![Sysctl {
                name: "net.ipv4.ip_unprivileged_port_start".into(),
                value: "0".into(),
            }]),
            ..Default::default()
        }),
        service_account_name: Some(service_account.into()),
        containers: vec![container],
        volumes: Some(vec![
            empty_dir("workload-socket", None),
            empty_dir("credential-socket", None),
            empty_dir("workload-certs", None),
            empty_dir("istio-envoy", Some("Memory")),
            empty_dir("istio-data", None),
            Volume {
                name: "istio-podinfo".into(),
                downward_api: Some(DownwardAPIVolumeSource {
                    items: Some(vec![
                        podinfo("labels", "metadata.labels"),
                        podinfo("annotations", "metadata.annotations"),
                    ]),
                    ..Default::default()
                }),
                ..Default::default()
            },
            Volume {
                name: "istio-token".into(),
                projected: Some(ProjectedVolumeSource {
                    sources: Some(vec![VolumeProjection {
                        service_account_token: Some(ServiceAccountTokenProjection {
                            path: "istio-token".into(),
                            expiration_seconds: Some(43200),
                            audience: Some("istio-ca".into()),
                        }),
                        ..Default::default()
                    }]),
                    ..Default::default()
                }),
                ..Default::default()
            },
            Volume {
                name: "istiod-ca-cert".into(),
                config_map: Some(ConfigMapVolumeSource {
                    name: "istio-ca-root-cert".into(),
                    ..Default::default()
                }),
                ..Default::default()
            },
        ]),
        ..Default::default()
    }
}

#[cfg(test)]
#[path = "gateway_deployment_tests.rs"]
mod tests;
