//! The SnapshotBuilder: owns the current `Arc<PushContext>` and builds the next one.
//!
//! Receives [`Flush`] from the Debouncer; merges the sources' config sets; builds an immutable
//! `PushContext` that reuses every index the request did not touch; sends [`Push`] to the
//! PushQueue. Answers [`GetReady`] (`/ready`) from the sources of the contexts it built
//! ([`Readiness`]), [`GetPushStatus`] (`/debug/push_status`) and
//! [`GetVirtualServiceProblems`] (`/debug/configz`).

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Instant;

use actix::prelude::*;

use super::messages::{Flush, Push};
use axon_config::config_set::{
    FILES, KUBERNETES_ISTIO, KUBERNETES_SERVICES, SourceId, merge_sources,
};
use axon_config::mesh::MeshConfig;
use axon_metrics::Metrics;
use axon_model::push_context::PushContext;

/// Whether axon is ready (`/ready`): `Ok`, or why not.
#[derive(Message)]
#[rtype(result = "Result<(), String>")]
pub struct GetReady;

/// The `/ready` rule: ready once a context was built that holds the configs of every
/// registry that must finish its initial lists first (the Kubernetes ones). A registry sends
/// its first update only once it has them, so its source appears in a flush only then.
#[derive(Debug, Default)]
pub struct Readiness {
    expected: BTreeSet<SourceId>,
    /// The sources of the last built context, if any was built.
    built: Option<BTreeSet<SourceId>>,
    draining: bool,
}

impl Readiness {
    pub fn new(expected: &[SourceId]) -> Self {
        Readiness {
            expected: expected.iter().copied().collect(),
            built: None,
            draining: false,
        }
    }

    /// A context was built from the configs of `sources`.
    pub fn built(&mut self, sources: impl IntoIterator<Item = SourceId>) {
        self.built = Some(sources.into_iter().collect());
    }

    /// `Ok` when ready, else why not.
    pub fn check(&self) -> Result<(), String> {
        if self.draining {
            return Err(
                "not ready: draining (SIGTERM); the xDS connections are being closed\n".into(),
            );
        }
        let built = self.built.as_ref();
        let missing: Vec<&str> = self
            .expected
            .iter()
            .filter(|s| built.is_none_or(|b| !b.contains(*s)))
            .copied()
            .collect();
        match (built, missing.is_empty()) {
            (Some(_), true) => Ok(()),
            (None, true) => Err("not ready: no config snapshot built yet\n".to_string()),
            (_, false) => Err(format!(
                "not ready: waiting for {}\n",
                missing
                    .iter()
                    .map(|s| match *s {
                        FILES => "the first clean read of the config directory (files)",
                        KUBERNETES_SERVICES =>
                            "the initial Kubernetes lists of services (kubernetes)",
                        KUBERNETES_ISTIO => {
                            "the initial Kubernetes lists of Istio config (kubernetes-istio)"
                        }
                        other => other,
                    })
                    .collect::<Vec<_>>()
                    .join(", ")
            )),
        }
    }
}

/// axon is draining (SIGTERM): `/ready` answers 503 from now on.
#[derive(Message)]
#[rtype(result = "()")]
pub struct SetDraining;

/// The state of the last built context (`/debug/push_status`).
#[derive(Message)]
#[rtype(result = "serde_json::Value")]
pub struct GetPushStatus;

/// The VirtualService problems of the current context (`/debug/configz`): for each, the
/// VirtualServices it concerns and what happened.
#[derive(Message)]
#[rtype(result = "serde_json::Value")]
pub struct GetVirtualServiceProblems;

/// The Gateway API objects' status and problems in the current context
/// (`/debug/configz`, under `gateway_api`): `{"status": {KEY: STATUS}, "problems": {KEY: [..]}}`.
#[derive(Message)]
#[rtype(result = "serde_json::Value")]
pub struct GetGatewayApiStatus;

impl Handler<GetGatewayApiStatus> for SnapshotBuilder {
    type Result = MessageResult<GetGatewayApiStatus>;

    fn handle(&mut self, _: GetGatewayApiStatus, _: &mut Context<Self>) -> Self::Result {
        let Some(ctx) = &self.current else {
            return MessageResult(serde_json::json!({"status": {}, "problems": {}}));
        };
        let index = &ctx.gateway_api;
        MessageResult(serde_json::json!({
            "status": index.status.iter().map(|(k, v)| (k.to_string(), v.clone())).collect::<serde_json::Map<_, _>>(),
            "problems": index.problems.iter().map(|(k, v)| (k.to_string(), serde_json::json!(v))).collect::<serde_json::Map<_, _>>(),
        }))
    }
}

/// How many workloads each RequestAuthentication and AuthorizationPolicy of the current
/// context applies to (`/debug/configz`), by `kind/namespace/name`.
#[derive(Message)]
#[rtype(result = "serde_json::Value")]
pub struct GetRequestAuthnSelection;

impl Handler<GetRequestAuthnSelection> for SnapshotBuilder {
    type Result = MessageResult<GetRequestAuthnSelection>;

    fn handle(&mut self, _: GetRequestAuthnSelection, _: &mut Context<Self>) -> Self::Result {
        let counts = self
            .current
            .as_ref()
            .map(|ctx| {
                let mut all = ctx.request_authn_selected();
                all.extend(ctx.authz_selected());
                all
            })
            .unwrap_or_default();
        MessageResult(serde_json::Value::Object(
            counts
                .into_iter()
                .map(|(k, n)| (k.to_string(), serde_json::Value::from(n)))
                .collect(),
        ))
    }
}

pub struct SnapshotBuilder {
    current: Option<Arc<PushContext>>,
    last: serde_json::Value,
    mesh: Arc<MeshConfig>,
    push_queue: Recipient<Push>,
    metrics: Metrics,
    /// Which sources each built context holds (the `/ready` probe).
    ready: Readiness,
    mailbox_capacity: usize,
    /// Where the JWKS sources of each built context's RequestAuthentications go (the JWKS
    /// resolver); none: not sent.
    jwks_wanted: Option<tokio::sync::watch::Sender<JwksWanted>>,
    /// Where each built context's Gateway API statuses go (the Kubernetes status writer);
    /// none: not sent.
    gateway_status: Option<tokio::sync::watch::Sender<GatewayApiStatuses>>,
}

/// The Gateway API objects' statuses of a built context, by object (what the Kubernetes
/// status writer writes).
pub type GatewayApiStatuses =
    Arc<std::collections::BTreeMap<axon_config::config::ConfigKey, serde_json::Value>>;

/// The JWKS sources a context's rules read, with their fetch timeouts in nanoseconds.
pub type JwksWanted = std::collections::BTreeMap<axon_config::istio::JwksSource, i128>;

impl SnapshotBuilder {
    pub fn new(
        mesh: MeshConfig,
        push_queue: Recipient<Push>,
        metrics: Metrics,
        ready_after: &[SourceId],
        mailbox_capacity: usize,
    ) -> Self {
        SnapshotBuilder {
            current: None,
            last: serde_json::json!({"version": null, "status": "no context built yet"}),
            mesh: Arc::new(mesh),
            push_queue,
            metrics,
            ready: Readiness::new(ready_after),
            jwks_wanted: None,
            gateway_status: None,
            mailbox_capacity,
        }
    }

    /// Sends each built context's Gateway API statuses to `writer` (the Kubernetes status
    /// writer, `registry::kubernetes::gateway_status`) when they changed.
    pub fn with_gateway_status(
        mut self,
        writer: tokio::sync::watch::Sender<GatewayApiStatuses>,
    ) -> Self {
        self.gateway_status = Some(writer);
        self
    }

    /// Sends each built context's JWKS sources to `resolver` when its RequestAuthentications
    /// changed.
    pub fn with_jwks_resolver(mut self, resolver: tokio::sync::watch::Sender<JwksWanted>) -> Self {
        self.jwks_wanted = Some(resolver);
        self
    }
}

impl Actor for SnapshotBuilder {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Context<Self>) {
        ctx.set_mailbox_capacity(self.mailbox_capacity);
    }
}

impl Handler<GetPushStatus> for SnapshotBuilder {
    type Result = MessageResult<GetPushStatus>;

    fn handle(&mut self, _: GetPushStatus, _: &mut Context<Self>) -> Self::Result {
        MessageResult(self.last.clone())
    }
}

impl Handler<GetVirtualServiceProblems> for SnapshotBuilder {
    type Result = MessageResult<GetVirtualServiceProblems>;

    fn handle(&mut self, _: GetVirtualServiceProblems, _: &mut Context<Self>) -> Self::Result {
        let problems = self
            .current
            .iter()
            .flat_map(|ctx| &ctx.virtual_services.problems);
        MessageResult(serde_json::Value::Array(
            problems
                .map(|p| {
                    serde_json::json!({
                        "virtual_services": p.configs.iter().map(ToString::to_string).collect::<Vec<_>>(),
                        "problem": p.message,
                    })
                })
                .collect(),
        ))
    }
}

impl Handler<SetDraining> for SnapshotBuilder {
    type Result = ();

    fn handle(&mut self, _: SetDraining, _: &mut Context<Self>) {
        self.ready.draining = true;
    }
}

impl Handler<GetReady> for SnapshotBuilder {
    type Result = MessageResult<GetReady>;

    fn handle(&mut self, _: GetReady, _: &mut Context<Self>) -> Self::Result {
        MessageResult(self.ready.check())
    }
}

impl Handler<Flush> for SnapshotBuilder {
    type Result = ();

    fn handle(&mut self, msg: Flush, _: &mut Context<Self>) {
        let started = Instant::now();
        let configs = merge_sources(&msg.sources);
        let ctx = Arc::new(PushContext::build(
            self.current.as_deref(),
            &configs,
            &msg.request,
            &self.mesh,
        ));
        self.metrics.services.set(ctx.services.by_host.len() as i64);
        // Services sharing an outbound listener, logged once per rebuilt service index.
        if self
            .current
            .as_ref()
            .is_none_or(|old| !Arc::ptr_eq(&old.services, &ctx.services))
        {
            self.metrics
                .outbound_listener_conflicts
                .set(ctx.services.listener_conflicts.len() as i64);
            for conflict in &ctx.services.listener_conflicts {
                tracing::warn!(conflict = %conflict, "outbound listener conflict");
            }
        }
        // Namespace- or mesh-wide PeerAuthentications an older one of their namespace
        // overrides (istiod keeps the oldest), logged once per rebuilt index.
        if self
            .current
            .as_ref()
            .is_none_or(|old| !Arc::ptr_eq(&old.peer_authn, &ctx.peer_authn))
        {
            for ignored in &ctx.peer_authn.ignored {
                tracing::warn!(
                    policy = %ignored,
                    "PeerAuthentication not applied: its namespace already has an older one \
                     without a selector (the oldest wins, as in istiod)"
                );
            }
        }
        // CUSTOM AuthorizationPolicies whose provider the mesh config does not define: what
        // they select is denied (as istiod), logged once per rebuilt index.
        if self
            .current
            .as_ref()
            .is_none_or(|old| !Arc::ptr_eq(&old.authz, &ctx.authz))
        {
            for (policy, provider) in ctx.authz.custom_providers() {
                if !ctx.mesh.ext_authz.iter().any(|p| p.name == provider) {
                    tracing::warn!(
                        %policy,
                        %provider,
                        "CUSTOM AuthorizationPolicy: no such envoyExtAuthzHttp/envoyExtAuthzGrpc \
                         in the mesh config's extensionProviders; the requests it selects are denied"
                    );
                }
            }
        }
        // The JWKS the RequestAuthentications read, to the resolver once per rebuilt index.
        if let Some(resolver) = &self.jwks_wanted
            && self
                .current
                .as_ref()
                .is_none_or(|old| !Arc::ptr_eq(&old.request_authn, &ctx.request_authn))
        {
            let wanted = ctx.request_authn.jwks_sources();
            resolver.send_if_modified(|current| {
                let modified = *current != wanted;
                *current = wanted;
                modified
            });
        }
        // What of the Gateway API objects is not served (a listener, a backend, a parent),
        // logged once per rebuilt index.
        if self
            .current
            .as_ref()
            .is_none_or(|old| !Arc::ptr_eq(&old.gateway_api, &ctx.gateway_api))
        {
            for (key, problems) in &ctx.gateway_api.problems {
                for problem in problems {
                    tracing::warn!(config = %key, problem = %problem, "Gateway API object not served in full");
                }
            }
        }
        // The Gateway API statuses, to the Kubernetes status writer when they changed.
        if let Some(writer) = &self.gateway_status {
            let wanted = &ctx.gateway_api.status;
            writer.send_if_modified(|current| {
                let modified = current.as_ref() != wanted;
                if modified {
                    *current = Arc::new(wanted.clone());
                }
                modified
            });
        }
        // What the VirtualService merge dropped, logged once per rebuilt index.
        let vs_rebuilt = self
            .current
            .as_ref()
            .is_none_or(|old| !Arc::ptr_eq(&old.virtual_services, &ctx.virtual_services));
        self.metrics
            .vservice_dup_domain
            .set(ctx.virtual_services.duplicate_hosts.len() as i64);
        if vs_rebuilt {
            for problem in &ctx.virtual_services.problems {
                tracing::warn!(problem = %problem, "VirtualService not applied in full");
            }
        }
        // Telemetries that name providers the mesh config does not define (istiod ignores
        // them), or collectors that are not services: logged once per rebuilt index.
        let telemetry_rebuilt = self.current.as_ref().is_none_or(|old| {
            !Arc::ptr_eq(&old.telemetry, &ctx.telemetry)
                || !Arc::ptr_eq(&old.mesh, &ctx.mesh)
                || !Arc::ptr_eq(&old.services, &ctx.services)
        });
        let telemetry_problems = telemetry_problems(&ctx);
        if telemetry_rebuilt {
            for problem in &telemetry_problems {
                tracing::warn!(problem = %problem, "Telemetry not applied in full");
            }
        }
        // Terminating Gateway servers without their Secret (no filter chain is served for
        // them), logged once per rebuilt Gateway or Secret index.
        let credentials_rebuilt = self.current.as_ref().is_none_or(|old| {
            !Arc::ptr_eq(&old.gateways, &ctx.gateways) || !Arc::ptr_eq(&old.secrets, &ctx.secrets)
        });
        if credentials_rebuilt {
            for missing in axon_model::gateway::missing_credentials(&ctx) {
                self.metrics.sds_certificate_errors.inc();
                tracing::warn!(
                    gateway = %missing.gateway,
                    server = %missing.server,
                    secret = %missing.credential,
                    reason = %missing.reason,
                    "Gateway server not served: its credential is missing or invalid"
                );
            }
        }
        if msg.request.full {
            // As istiod's: an endpoint-only request swaps the endpoint index of the previous
            // context and rebuilds nothing else, so it is not a PushContext init.
            self.metrics
                .pushcontext_init
                .observe(started.elapsed().as_secs_f64());
        } else {
            self.metrics.endpoint_swaps.inc();
        }
        for (reason, n) in &msg.request.reasons {
            self.metrics
                .push_triggers
                .with_label_values(&[reason.as_str()])
                .inc_by(u64::from(*n));
        }
        tracing::info!(
            version = ctx.version,
            configs = configs.len(),
            services = ctx.services.by_host.len(),
            changed = msg.request.configs_updated.len(),
            full = msg.request.full,
            took_ms = started.elapsed().as_secs_f64() * 1e3,
            "push context built"
        );
        self.last = serde_json::json!({
            "version": ctx.version,
            "built_at_unix_ms": std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_millis()),
            "took_ms": started.elapsed().as_secs_f64() * 1e3,
            "configs": configs.len(),
            "services": ctx.services.by_host.len(),
            "endpoint_sets": ctx.endpoints.by_service_port.len(),
            "virtual_service_bindings": ctx.virtual_services.by_gateway.values().map(Vec::len).sum::<usize>(),
            "virtual_service_problems": ctx.virtual_services.problems.iter().map(ToString::to_string).collect::<Vec<_>>(),
            "telemetry_problems": telemetry_problems,
            "telemetries": ctx.telemetry.len(),
            "destination_rule_hosts": ctx.destination_rules.by_host.len(),
            "gateways": ctx.gateways.all.len(),
            "sidecar_namespaces": ctx.sidecars.by_namespace.len(),
            "request": {
                "full": msg.request.full,
                "forced": msg.request.forced,
                "configs_updated": msg.request.configs_updated.iter().map(ToString::to_string).collect::<Vec<_>>(),
                "reasons": msg.request.reasons.iter().map(|(r, n)| (r.as_str(), *n)).collect::<std::collections::BTreeMap<_, _>>(),
            },
        });
        self.current = Some(ctx.clone());
        self.ready.built(msg.sources.keys().copied());
        let request = Arc::new(ctx.effective_request(&msg.request));
        let push = Push { ctx, request };
        super::mailbox::tell(&self.metrics, "push_queue", &self.push_queue, push);
        self.metrics.handled("snapshot_builder", started);
    }
}

/// What of the context's Telemetries and telemetry providers cannot be applied.
fn telemetry_problems(ctx: &PushContext) -> Vec<String> {
    axon_model::telemetry::problems(&ctx.telemetry, &ctx.mesh.telemetry, |host| {
        ctx.service(host).is_some()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ready_needs_every_registry_in_a_built_snapshot() {
        let mut gate = Readiness::new(&["kubernetes", "kubernetes-istio"]);
        assert!(gate.check().is_err(), "nothing built");
        gate.built(["files"]);
        assert!(gate.check().is_err(), "two registries still listing");
        gate.built(["files", "kubernetes"]);
        assert!(gate.check().is_err(), "one registry still listing");
        gate.built(["files", "kubernetes", "kubernetes-istio"]);
        assert_eq!(gate.check(), Ok(()));
        let mut files = Readiness::new(&["files"]);
        assert_eq!(
            files.check().unwrap_err(),
            "not ready: waiting for the first clean read of the config directory (files)\n"
        );
        files.built(["files"]);
        assert_eq!(files.check(), Ok(()));

        let mut files_only = Readiness::new(&[]);
        assert!(files_only.check().is_err());
        files_only.built(["files"]);
        assert_eq!(files_only.check(), Ok(()));
        files_only.draining = true;
        assert!(files_only.check().unwrap_err().contains("draining"));
    }
}
