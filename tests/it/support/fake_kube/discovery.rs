//! Discovery of the fake API server: `GET /apis` (APIGroupList) and `GET /apis/G/V`
//! (APIResourceList) for the CRD groups it serves: the Istio groups, each at one version,
//! and the Gateway API's `gateway.networking.k8s.io` at v1 (the eight kinds axon reads),
//! v1beta1 (ReferenceGrant) and v1alpha2 (TLSRoute, TCPRoute, and UDPRoute, which axon does
//! not read: served at v1alpha2 only). The objects of
//! the older versions are not served (their collections are v1's only).

use serde_json::{Value, json};

use super::COLLECTIONS;

/// The Istio API groups served (with Istio's CRDs), each at one version.
const ISTIO_GROUPS: [(&str, &str); 4] = [
    ("networking.istio.io", "v1"),
    ("security.istio.io", "v1"),
    ("telemetry.istio.io", "v1"),
    ("extensions.istio.io", "v1alpha1"),
];

pub const GATEWAY_API_GROUP: &str = "gateway.networking.k8s.io";

/// The Gateway API's served versions, preferred first, with the kinds each serves besides
/// its collections of [`COLLECTIONS`]: `(kind, plural)`.
const GATEWAY_API_VERSIONS: [(&str, &[(&str, &str)]); 3] = [
    ("v1", &[]),
    ("v1beta1", &[("ReferenceGrant", "referencegrants")]),
    (
        "v1alpha2",
        &[("TLSRoute", "tlsroutes"), ("TCPRoute", "tcproutes")],
    ),
];

/// The cluster-scoped kinds served.
pub const CLUSTER_SCOPED: [&str; 2] = ["ValidatingWebhookConfiguration", "GatewayClass"];

/// Which CRD groups the server serves.
#[derive(Debug, Clone, Copy)]
pub struct Served {
    pub istio: bool,
    pub gateway_api: bool,
}

impl Served {
    /// Whether the collection at `path` (`/apis/G/V/PLURAL`) is of a served group.
    pub fn serves_path(self, path: &str) -> bool {
        if path.contains(".istio.io") {
            return self.istio;
        }
        if path.contains(&format!("/{GATEWAY_API_GROUP}/")) {
            return self.gateway_api;
        }
        true
    }

    /// The answer to `GET /apis/GROUP/VERSION`, when that group version is served.
    pub fn resources(self, group_version: &str) -> Option<Value> {
        let istio = self.istio
            && ISTIO_GROUPS
                .iter()
                .any(|(g, v)| format!("{g}/{v}") == group_version);
        let gateway_api = self.gateway_api
            && GATEWAY_API_VERSIONS
                .iter()
                .any(|(v, _)| format!("{GATEWAY_API_GROUP}/{v}") == group_version);
        (istio || gateway_api).then(|| resource_list(group_version))
    }

    /// The answer to `GET /apis`.
    pub fn api_groups(self) -> Value {
        let mut groups = vec![json!({
            "name": "discovery.k8s.io",
            "versions": [{"groupVersion": "discovery.k8s.io/v1", "version": "v1"}],
            "preferredVersion": {"groupVersion": "discovery.k8s.io/v1", "version": "v1"},
        })];
        if self.istio {
            for (group, version) in ISTIO_GROUPS {
                groups.push(group_json(group, &[version]));
            }
        }
        if self.gateway_api {
            let versions: Vec<&str> = GATEWAY_API_VERSIONS.iter().map(|(v, _)| *v).collect();
            groups.push(group_json(GATEWAY_API_GROUP, &versions));
        }
        json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": groups})
    }
}

fn group_json(group: &str, versions: &[&str]) -> Value {
    let version = |v: &str| json!({"groupVersion": format!("{group}/{v}"), "version": v});
    json!({
        "name": group,
        "versions": versions.iter().map(|v| version(v)).collect::<Vec<_>>(),
        "preferredVersion": version(versions[0]),
    })
}

fn resource_json(kind: &str, plural: &str) -> Value {
    json!({
        "name": plural,
        "singularName": kind.to_ascii_lowercase(),
        "namespaced": !CLUSTER_SCOPED.contains(&kind),
        "kind": kind,
        "verbs": ["get", "list", "watch", "create", "update", "patch", "delete"],
    })
}

fn resource_list(group_version: &str) -> Value {
    let mut resources: Vec<Value> = COLLECTIONS
        .iter()
        .filter(|(_, v, _)| *v == group_version)
        .map(|(p, _, kind)| resource_json(kind, p.rsplit('/').next().unwrap_or_default()))
        .collect();
    for (version, kinds) in GATEWAY_API_VERSIONS {
        if group_version == format!("{GATEWAY_API_GROUP}/{version}") {
            resources.extend(kinds.iter().map(|(k, p)| resource_json(k, p)));
        }
    }
    json!({
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": group_version,
        "resources": resources,
    })
}
