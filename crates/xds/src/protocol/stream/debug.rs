//! A stream's debug requests (istioctl's `istio.io/debug/*` types): recognized before any
//! subscription is touched, handed to the shell as a [`DebugQuery`], and framed once the
//! shell has the answer. They start no watch, as in istiod (`processRequest`: "don't let xDS
//! piggyback debug requests start watchers").

use std::sync::Arc;

use envoy_types::pb::envoy::admin::v3::ConfigDump;

use super::{Output, StreamState};
use crate::debug::dump::{self, DumpFilter, Generated};
use crate::debug::{DebugQuery, DebugType, json};
use crate::resource::{DeltaResponse, Resource, ResourceSet, Response, XdsResponse};

impl StreamState {
    /// A debug request: `true` if `type_url` is a debug type (then `out.debug` holds it).
    pub(super) fn on_debug_request(
        &mut self,
        type_url: &str,
        names: Vec<String>,
        out: &mut Output,
    ) -> bool {
        let Some(kind) = DebugType::parse(type_url) else {
            return false;
        };
        out.debug = Some(DebugQuery {
            kind,
            type_url: type_url.to_string(),
            names,
        });
        true
    }

    /// The answer to a debug query, with `resources` (gathered by the shell) and, for syncz,
    /// the replica's `control_plane` identifier (istiod sends it on syncz answers only), in
    /// the stream's protocol, with a nonce of its own.
    pub fn debug_response(
        &mut self,
        query: &DebugQuery,
        resources: Vec<Resource>,
        control_plane: Option<String>,
    ) -> Response {
        let version = self.context_version().unwrap_or(0);
        let nonce = self.next_nonce(version);
        if self.is_delta() {
            Response::Delta(DeltaResponse {
                type_url: query.type_url.clone(),
                system_version_info: version.to_string(),
                nonce,
                resources: resources.into_iter().map(|r| (r, String::new())).collect(),
                removed: Vec::new(),
                control_plane,
                whole: None,
            })
        } else {
            Response::Sotw(XdsResponse {
                type_url: query.type_url.clone(),
                version_info: version.to_string(),
                nonce,
                resources: Arc::new(ResourceSet::from(resources)),
                control_plane,
            })
        }
    }
}

impl StreamState {
    /// What axon would send the proxy now, as Envoy's admin `ConfigDump`: every type it
    /// subscribed generated for the current context with its names (nothing is sent);
    /// `None` before the first context.
    pub fn config_dump(&self, filter: &DumpFilter) -> Option<ConfigDump> {
        let (ctx, proxy, scope) = (
            self.ctx.as_ref()?,
            self.proxy.as_ref()?,
            self.scope.as_ref()?,
        );
        let versions: Vec<(String, Option<String>)> = self
            .subscriptions
            .status()
            .into_iter()
            .map(|t| (t.type_url, t.version_sent))
            .collect();
        Some(dump::config_dump(filter, |type_url| {
            let names = self.subscribed(type_url)?;
            let version = versions
                .iter()
                .find(|(url, _)| url == type_url.as_str())
                .and_then(|(_, v)| v.clone())
                .unwrap_or_else(|| ctx.version.to_string());
            Some(Generated {
                type_url,
                version,
                resources: crate::generate(type_url, ctx, proxy, scope, names),
            })
        }))
    }

    /// The config dump as the resources of an `istio.io/debug/config_dump` answer: each
    /// section (or, with a type filter, each resource) unnamed, as istiod's
    /// `AnyToUnnamedResources`.
    pub fn config_dump_resources(&self, filter: &DumpFilter) -> Vec<Resource> {
        self.config_dump(filter)
            .map(|d| {
                d.configs
                    .into_iter()
                    .map(|any| Resource::from_encoded("", any.type_url, any.value.into()))
                    .collect()
            })
            .unwrap_or_default()
    }

    /// The config dump in proto3 JSON, as Envoy's `/config_dump` prints its own (with
    /// `filter.resource`, the items of that field, as Envoy's `?resource=`); `None` before
    /// the first context.
    pub fn config_dump_json(&self, filter: &DumpFilter) -> Option<json::Result<serde_json::Value>> {
        let dump = self.config_dump(filter)?;
        Some(match &filter.resource {
            Some(field) => json::select_resource(&dump, field),
            None => json::to_json(&dump),
        })
    }
}

impl StreamState {
    /// The namespace this stream's debug requests are restricted to, `None` if it may read
    /// every proxy ([`crate::debug::caller_namespace`], with the mesh's root namespace as
    /// the system namespace). A stream with no proxy yet sees nothing.
    pub fn debug_caller_namespace(&self) -> Option<String> {
        let Some(proxy) = self.proxy.as_ref() else {
            return Some(String::new());
        };
        let system = self
            .ctx
            .as_ref()
            .map_or(crate::debug::SYSTEM_NAMESPACE, |c| {
                c.mesh.root_namespace.as_str()
            });
        crate::debug::caller_namespace(proxy, system)
    }
}

impl StreamState {
    /// What the stream's node says, read back from its proxy (`/debug/nodes`, for `axon
    /// impact`): `None` before the first request.
    pub fn node_info(&self) -> Option<axon_model::proxy::NodeInfo> {
        let p = self.proxy.as_ref()?;
        let interception = if p.interception_none {
            Some("NONE".to_string())
        } else if p.tproxy {
            Some("TPROXY".to_string())
        } else {
            None
        };
        Some(axon_model::proxy::NodeInfo {
            id: p.id.clone(),
            namespace: Some(p.namespace.clone()),
            labels: p.labels.clone(),
            generator: p.generator.clone(),
            interception_mode: interception,
            idle_timeout: p.idle_timeout.map(|ns| format!("{}ms", ns / 1_000_000)),
            locality: (p.locality != Default::default()).then(|| p.locality.clone()),
            network: (!p.network.is_empty()).then(|| p.network.clone()),
            client_certs: p.client_certs.clone(),
            istio_version: self.istio_version.clone(),
            cluster_id: self.cluster_id.clone(),
            num_trusted_proxies: (p.num_trusted_proxies > 0).then_some(p.num_trusted_proxies),
            ..Default::default()
        })
    }
}
