//! A stream's config as Envoy's admin `ConfigDump`: what axon would send its proxy now
//! (generated for the current context with the names the proxy subscribed, nothing sent),
//! in the dynamic sections Envoy's own `/config_dump` has, so that the two compare field by
//! field. istiod's `connectionConfigDump` (`pilot/pkg/xds/debug.go`) is the model: bootstrap
//! and scoped routes empty, endpoints only when asked (`include_eds`, as Envoy's own
//! `?include_eds`), private keys and other secret values redacted as Envoy redacts them
//! (`"[redacted]"`). With a type filter (`?types=cds,lds`) the configs are the resources
//! themselves, as istiod answers it.

use envoy_types::pb::envoy::admin::v3::{
    BootstrapConfigDump, ClustersConfigDump, ConfigDump, EndpointsConfigDump, ListenersConfigDump,
    RoutesConfigDump, ScopedRoutesConfigDump, SecretsConfigDump, clusters_config_dump,
    endpoints_config_dump, listeners_config_dump, routes_config_dump, secrets_config_dump,
};
use envoy_types::pb::envoy::config::cluster::v3::Cluster;
use envoy_types::pb::envoy::config::core::v3::DataSource;
use envoy_types::pb::envoy::config::core::v3::data_source::Specifier;
use envoy_types::pb::envoy::config::endpoint::v3::ClusterLoadAssignment;
use envoy_types::pb::envoy::extensions::transport_sockets::tls::v3::{Secret, secret};
use envoy_types::pb::google::protobuf::Any;
use envoy_types::util::pack_any;
use prost::Message;

use crate::resource::{Resource, ResourceType};

/// What a dump holds.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct DumpFilter {
    /// Only these types, each resource a config of its own (istiod's `?types=`); all
    /// sections if empty.
    pub types: Vec<ResourceType>,
    /// The endpoints section too (Envoy's and istiod's `?include_eds`).
    pub include_eds: bool,
    /// Only the items of this repeated field of the sections, as Envoy's
    /// `/config_dump?resource=dynamic_active_clusters` (applied to the JSON,
    /// [`super::json::select_resource`]).
    pub resource: Option<String>,
}

impl DumpFilter {
    /// Reads istiod's short type names (`cds`, `eds`, `lds`, `rds`, `sds`, any case) or full
    /// type URLs, comma-separated; an unknown one is named in the error.
    pub fn parse_types(list: &str) -> Result<Vec<ResourceType>, String> {
        list.split(',')
            .map(str::trim)
            .filter(|t| !t.is_empty())
            .map(|t| {
                ResourceType::PUSH_ORDER
                    .into_iter()
                    .find(|r| r.short().eq_ignore_ascii_case(t) || r.as_str() == t)
                    .ok_or_else(|| {
                        format!("unknown type {t:?}: one of cds, eds, lds, rds, sds or a type URL")
                    })
            })
            .collect()
    }
}

/// The generated resources of one type and the version they are at.
pub struct Generated {
    pub type_url: ResourceType,
    pub version: String,
    pub resources: Vec<Resource>,
}

/// The dump of what `generate` gives for each type (`None`: not subscribed).
pub fn config_dump(
    filter: &DumpFilter,
    mut generate: impl FnMut(ResourceType) -> Option<Generated>,
) -> ConfigDump {
    if !filter.types.is_empty() {
        let configs = filter
            .types
            .iter()
            .filter_map(|&t| generate(t))
            .flat_map(|g| g.resources)
            .map(|r| dumped_any(&r))
            .collect();
        return ConfigDump { configs };
    }
    let mut section = |t: ResourceType| {
        generate(t).unwrap_or(Generated {
            type_url: t,
            version: String::new(),
            resources: Vec::new(),
        })
    };
    let clusters = section(ResourceType::Cluster);
    let with_eds =
        filter.include_eds || filter.resource.as_deref() == Some("dynamic_endpoint_configs");
    let endpoints = with_eds.then(|| section(ResourceType::Endpoint));
    let listeners = section(ResourceType::Listener);
    let routes = section(ResourceType::Route);
    let secrets = section(ResourceType::Secret);
    let mut configs = vec![
        pack_any(BootstrapConfigDump::default()),
        pack_any(ClustersConfigDump {
            version_info: clusters.version.clone(),
            dynamic_active_clusters: clusters
                .resources
                .iter()
                .map(|r| clusters_config_dump::DynamicCluster {
                    version_info: clusters.version.clone(),
                    cluster: Some(r.to_any()),
                    ..Default::default()
                })
                .collect(),
            ..Default::default()
        }),
    ];
    if let Some(endpoints) = endpoints {
        // As Envoy's: every cluster's assignment, those sent inline in a cluster too.
        let mut assignments: Vec<(String, Any)> = inline_assignments(&clusters.resources)
            .map(|cla| (clusters.version.clone(), pack_any(cla)))
            .collect();
        assignments.extend(
            endpoints
                .resources
                .iter()
                .map(|r| (endpoints.version.clone(), r.to_any())),
        );
        configs.push(pack_any(EndpointsConfigDump {
            dynamic_endpoint_configs: assignments
                .into_iter()
                .map(
                    |(version_info, any)| endpoints_config_dump::DynamicEndpointConfig {
                        version_info,
                        endpoint_config: Some(any),
                        ..Default::default()
                    },
                )
                .collect(),
            ..Default::default()
        }));
    }
    configs.push(pack_any(ListenersConfigDump {
        version_info: listeners.version.clone(),
        dynamic_listeners: listeners
            .resources
            .iter()
            .map(|r| listeners_config_dump::DynamicListener {
                name: r.name.clone(),
                active_state: Some(listeners_config_dump::DynamicListenerState {
                    version_info: listeners.version.clone(),
                    listener: Some(r.to_any()),
                    ..Default::default()
                }),
                ..Default::default()
            })
            .collect(),
        ..Default::default()
    }));
    configs.push(pack_any(ScopedRoutesConfigDump::default()));
    configs.push(pack_any(RoutesConfigDump {
        dynamic_route_configs: routes
            .resources
            .iter()
            .map(|r| routes_config_dump::DynamicRouteConfig {
                version_info: routes.version.clone(),
                route_config: Some(r.to_any()),
                ..Default::default()
            })
            .collect(),
        ..Default::default()
    }));
    configs.push(pack_any(SecretsConfigDump {
        dynamic_active_secrets: secrets
            .resources
            .iter()
            .map(|r| secrets_config_dump::DynamicSecret {
                name: r.name.clone(),
                version_info: secrets.version.clone(),
                secret: Some(dumped_any(r)),
                ..Default::default()
            })
            .collect(),
        ..Default::default()
    }));
    ConfigDump { configs }
}

/// The load assignments of the clusters that are not EDS: those they carry inline (static
/// and DNS clusters), or an empty one (Envoy's dump lists an assignment for every cluster),
/// named by their cluster as Envoy names them.
fn inline_assignments(clusters: &[Resource]) -> impl Iterator<Item = ClusterLoadAssignment> + '_ {
    clusters.iter().filter_map(|r| {
        let cluster = Cluster::decode(r.value.as_ref()).ok()?;
        if cluster.eds_cluster_config.is_some() {
            return None;
        }
        let mut cla = cluster.load_assignment.unwrap_or_default();
        if cla.cluster_name.is_empty() {
            cla.cluster_name = cluster.name;
        }
        Some(cla)
    })
}

/// A resource as a dump shows it: a Secret redacted, anything else as it is sent.
fn dumped_any(r: &Resource) -> Any {
    if ResourceType::parse(&r.type_url) != Some(ResourceType::Secret) {
        return r.to_any();
    }
    match Secret::decode(r.value.as_ref()) {
        Ok(secret) => pack_any(redact(secret)),
        // Never shown undecoded: its bytes may hold a key.
        Err(_) => pack_any(Secret {
            name: r.name.clone(),
            ..Default::default()
        }),
    }
}

/// The text Envoy puts in place of a sensitive value.
pub const REDACTED: &str = "[redacted]";

/// `secret` with its sensitive values (Envoy's `udpa.annotations.sensitive` fields: a
/// certificate's private key, password and PKCS#12, a generic secret, session ticket keys)
/// replaced by [`REDACTED`], of the same kind of data source, as Envoy's config dump does.
pub fn redact(mut secret: Secret) -> Secret {
    match &mut secret.r#type {
        Some(secret::Type::TlsCertificate(t)) => {
            redact_source(&mut t.private_key);
            redact_source(&mut t.password);
            redact_source(&mut t.pkcs12);
        }
        Some(secret::Type::GenericSecret(g)) => {
            redact_source(&mut g.secret);
            for source in g.secrets.values_mut() {
                redact_data(source);
            }
        }
        Some(secret::Type::SessionTicketKeys(k)) => k.keys.iter_mut().for_each(redact_data),
        _ => {}
    }
    secret
}

fn redact_source(source: &mut Option<DataSource>) {
    if let Some(source) = source {
        redact_data(source);
    }
}

fn redact_data(source: &mut DataSource) {
    source.specifier = match source.specifier.take() {
        Some(Specifier::InlineBytes(_)) => Some(Specifier::InlineBytes(REDACTED.into())),
        Some(Specifier::InlineString(_)) => Some(Specifier::InlineString(REDACTED.into())),
        Some(Specifier::Filename(_)) => Some(Specifier::Filename(REDACTED.into())),
        Some(Specifier::EnvironmentVariable(_)) => {
            Some(Specifier::EnvironmentVariable(REDACTED.into()))
        }
        None => None,
    };
}
