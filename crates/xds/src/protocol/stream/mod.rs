//! The per-stream ADS protocol as a pure state machine: what each request means (ACK, NACK,
//! stale, a new subscription, AlwaysRespond), what a push sends, what an endpoint-only push
//! carries, for state-of-the-world and Delta streams alike.
//!
//! [`StreamState`] takes a request ([`StreamState::on_request`]), the first context
//! ([`StreamState::on_context`]) or a push ([`StreamState::on_push`]) and returns an
//! [`Output`]: the responses to queue, in order, and the [`Event`]s the caller reports
//! (metrics, logs, the DistributionTracker). It does no I/O; the ConnectionActor is its
//! shell. Whether a request is answered and what of a generated set is sent is decided by
//! the subscriptions (istio's `pkg/xds/server.go` `ShouldRespond`: `protocol/subscription/`
//! for SotW, `protocol/delta.rs` for Delta), held as one enum (`Subscriptions`); the
//! stream generates and hands them the set. The other models are go-control-plane's
//! `pkg/server/sotw`, `delta` and `stream`.

mod debug;
mod delta;
#[cfg(test)]
mod secret_tests;
mod sotw;
mod status;
mod subscriptions;
#[cfg(test)]
mod tests;

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::{Duration, Instant};

pub use status::{ConnectionStatus, TypeStatus};
pub use subscriptions::Protocol;

use super::names::NameSets;
use super::subscription::Decision;
use crate::resource::{Request, ResourceType, Response};
use axon_config::config::{ConfigKey, ConfigKind};
use axon_model::proxy::Proxy;
use axon_model::push_context::{PushContext, changed_clusters};
use axon_model::push_request::PushRequest;
use axon_model::sidecar_scope::{SidecarScope, needs_push};
use subscriptions::Subscriptions;

/// Config kinds that never change a load assignment, istiod's `skippedEdsConfigs`: EDS reads
/// services, endpoints, DestinationRules and the proxy's locality, never routes, gateways,
/// Sidecars (they change which clusters a proxy has, and so CDS), Secrets,
/// RequestAuthentications or the JWKS fetched for them. A push of only these does not
/// generate EDS at all, unless EDS must follow a CDS response.
const EDS_UNREAD: [ConfigKind; 7] = [
    ConfigKind::VirtualService,
    ConfigKind::Gateway,
    ConfigKind::Sidecar,
    ConfigKind::Secret,
    ConfigKind::WorkloadGroup,
    ConfigKind::RequestAuthentication,
    ConfigKind::Jwks,
];

/// Why the server ends a stream.
#[derive(Debug, Clone, PartialEq)]
pub enum CloseReason {
    InvalidArgument(String),
    ResourceExhausted(String),
    /// The client did not do its part in time (no first request).
    DeadlineExceeded(String),
    /// The TLS port: the client proved no identity.
    Unauthenticated(String),
    /// The TLS port: the client's identity may not be the proxy it claims.
    PermissionDenied(String),
    /// Something axon needs to admit the stream is out of reach (the API server that
    /// reviews tokens): the client should retry.
    Unavailable(String),
}

/// Something the shell reports; the state machine has already acted on it.
#[derive(Debug, Clone, PartialEq)]
pub enum Event {
    /// A response of `type_url` with `resources` entries was generated in `took`.
    Sent {
        type_url: ResourceType,
        resources: usize,
        took: Duration,
    },
    /// The proxy rejected what it was sent.
    Nack {
        type_url: ResourceType,
        error: String,
    },
    /// A request answered a nonce that is not the last sent: ignored.
    Stale(ResourceType),
    /// A type axon does not serve was requested (reported once per stream): answered empty.
    UnknownType(String),
    /// A push that affects the proxy, for a change that started at `start`
    /// (`pilot_proxy_convergence_time`).
    Pushed { start: Instant },
    /// A push that affects the proxy: it carries changes to `keys` (all of the request's for
    /// an endpoint-only push) at `version`.
    Affected {
        keys: Vec<ConfigKey>,
        version: u64,
        start: Instant,
    },
    /// Every type was ACKed since the push of `version` that was reported [`Event::Affected`].
    Acked { version: u64 },
    /// Every subscribed type was ACKed for the first time.
    Synced,
    /// Secrets the proxy asked for and was sent nothing for: missing, or of another
    /// namespace (`pilot_sds_certificate_errors_total`, a warning).
    SecretProblems(Vec<crate::generate::sds::SdsProblem>),
}

/// What a request or a push makes the stream do.
#[derive(Debug, Default)]
pub struct Output {
    /// In the order they must be written.
    pub responses: Vec<Response>,
    pub events: Vec<Event>,
    /// A debug request (istioctl's `istio.io/debug/*`) the shell answers: it needs the other
    /// streams' state ([`StreamState::debug_response`] frames the answer).
    pub debug: Option<crate::debug::DebugQuery>,
}

/// An endpoint-only push: the watched clusters whose endpoints changed, and the context and
/// scope the stream had before it (a SotW EDS version is updated for those clusters alone).
struct EdsOnly {
    clusters: BTreeSet<String>,
    old_ctx: Arc<PushContext>,
    old_scope: Arc<SidecarScope>,
}

/// The protocol state of one ADS stream.
pub struct StreamState {
    subscriptions: Subscriptions,
    names: Arc<NameSets>,
    proxy: Option<Arc<Proxy>>,
    ctx: Option<Arc<PushContext>>,
    /// What the proxy sees in `ctx`, and the configs it depends on.
    scope: Option<Arc<SidecarScope>>,
    /// Types requested before the first context existed, answered when it arrives.
    waiting: BTreeSet<ResourceType>,
    unknown_types: BTreeSet<String>,
    nonce: u64,
    synced: bool,
    /// The version of the last affecting push whose ACK is awaited.
    awaiting_ack: Option<u64>,
    /// During an endpoint-only push, the clusters whose endpoints changed: the EDS response
    /// then carries only those.
    eds_only: Option<EdsOnly>,
    /// The transport verified the proxy's identity (the TLS port).
    verified: bool,
    /// The node's `ISTIO_VERSION` and `CLUSTER_ID`, which syncz reports.
    istio_version: Option<String>,
    cluster_id: Option<String>,
    /// The clock that times each response's generation ([`Event::Sent`]'s `took`), given by
    /// the caller: this crate reads no clock. Without one, `took` is zero.
    clock: Option<fn() -> Instant>,
}

impl StreamState {
    /// A new stream, Delta or state of the world; `names` is shared by every stream.
    pub fn new(protocol: Protocol, names: Arc<NameSets>) -> StreamState {
        StreamState {
            subscriptions: Subscriptions::new(protocol),
            names,
            proxy: None,
            ctx: None,
            scope: None,
            waiting: BTreeSet::new(),
            unknown_types: BTreeSet::new(),
            nonce: 0,
            synced: false,
            awaiting_ack: None,
            eds_only: None,
            verified: false,
            istio_version: None,
            cluster_id: None,
            clock: None,
        }
    }

    /// Times each response's generation with `clock` (the ConnectionActor's `Instant::now`).
    pub fn clock(mut self, clock: fn() -> Instant) -> StreamState {
        self.clock = Some(clock);
        self
    }

    /// A stream whose proxy's identity the transport verified (the TLS port): its proxy is
    /// [`Proxy::verified`].
    pub fn verified(mut self, verified: bool) -> StreamState {
        self.verified = verified;
        self
    }

    pub fn protocol(&self) -> Protocol {
        self.subscriptions.protocol()
    }

    pub fn is_delta(&self) -> bool {
        self.protocol() == Protocol::Delta
    }

    /// The proxy, once the first request named it.
    pub fn proxy(&self) -> Option<&Arc<Proxy>> {
        self.proxy.as_ref()
    }

    /// The version of the context last seen.
    pub fn context_version(&self) -> Option<u64> {
        self.ctx.as_ref().map(|c| c.version)
    }

    pub fn is_synced(&self) -> bool {
        self.synced
    }

    /// The first request of a stream names the proxy: a node whose id is Istio's
    /// `TYPE~IP~POD.NAMESPACE~DOMAIN`. Anything else ends the stream.
    pub fn connect(&mut self, req: &Request) -> Result<Arc<Proxy>, CloseReason> {
        let node = req.node().cloned().ok_or_else(|| {
            CloseReason::InvalidArgument("the first request on a stream must carry a node".into())
        })?;
        let verified = self.verified;
        self.istio_version = node.istio_version.clone();
        self.cluster_id = node.cluster_id.clone();
        let proxy = Proxy::from_node(node)
            .map(|p| Arc::new(Proxy { verified, ..p }))
            .map_err(|e| CloseReason::InvalidArgument(e.to_string()))?;
        self.proxy = Some(proxy.clone());
        Ok(proxy)
    }

    /// A request of a connected stream ([`StreamState::connect`] first).
    pub fn on_request(&mut self, req: Request) -> Output {
        let mut out = Output::default();
        match req {
            Request::Sotw(r) => self.on_sotw_request(r, &mut out),
            Request::Delta(r) => self.on_delta_request(r, &mut out),
        }
        self.check_synced(&mut out);
        out
    }

    /// The context current when the stream joined the push queue: answers what was asked
    /// before it existed.
    pub fn on_context(&mut self, ctx: Arc<PushContext>) -> Output {
        let mut out = Output::default();
        self.set_context(ctx);
        self.answer_waiting(&mut out);
        out
    }

    /// A push of a new context: proxy-level pruning for a full push (nothing at all for a
    /// proxy whose scope depends on no changed config), the EDS fast path for an
    /// endpoint-only one (only the watched clusters whose endpoints changed).
    pub fn on_push(&mut self, ctx: Arc<PushContext>, request: &PushRequest) -> Output {
        let mut out = Output::default();
        let version = ctx.version;
        let (old_ctx, old_scope) = self.set_context(ctx.clone());
        self.answer_waiting(&mut out);
        let types: &[ResourceType] = if request.full {
            let needed = self
                .scope
                .as_ref()
                .is_some_and(|new| needs_push(old_scope.as_deref(), new, request));
            if needed {
                &ResourceType::PUSH_ORDER
            } else if self.watches_changed_secret(request) {
                // A Secret changed: SDS only, and only to a proxy that watches it.
                &[ResourceType::Secret]
            } else {
                &[]
            }
        } else {
            let names = self.subscribed(ResourceType::Endpoint);
            let eds_only = match (old_ctx, &old_scope, names) {
                (Some(old_ctx), Some(old_scope), Some(names)) => Some(EdsOnly {
                    clusters: changed_clusters(&old_ctx, &ctx, names),
                    old_ctx,
                    old_scope: old_scope.clone(),
                }),
                _ => None,
            };
            let changed = match (&eds_only, names) {
                (Some(eds), _) => !eds.clusters.is_empty(),
                (None, names) => names.is_some(),
            };
            self.eds_only = eds_only;
            if changed {
                &[ResourceType::Endpoint]
            } else {
                &[]
            }
        };
        if !types.is_empty() {
            out.events.push(Event::Pushed {
                start: request.start,
            });
            self.report_affected(request, version, old_scope.as_deref(), &mut out);
        }
        // SotW: a type whose generated set is the one the proxy has is not sent again (not
        // on a forced push, nor EDS right after a CDS response: Envoy warms the clusters it
        // gets with the EDS that follows). EDS is not even generated when the changed kinds
        // cannot change it.
        let mut sent_cds = false;
        let eds_unchanged = !request.forced && request.only_kinds(&EDS_UNREAD);
        for &type_url in types {
            if type_url == ResourceType::Endpoint && eds_unchanged && !sent_cds {
                continue;
            }
            if self.subscriptions.needs(type_url, version) {
                let skip = !(request.forced || type_url == ResourceType::Endpoint && sent_cds);
                let before = out.responses.len();
                self.respond_push(type_url, skip, &mut out);
                sent_cds |= type_url == ResourceType::Cluster && out.responses.len() > before;
            }
        }
        self.eds_only = None;
        // Nothing sent at all: the proxy is at this version already.
        self.check_synced(&mut out);
        out
    }

    fn next_nonce(&mut self, version: u64) -> String {
        next_nonce(&mut self.nonce, version)
    }

    /// Records an unknown type, reported the first time it is seen on this stream.
    fn unknown_type(&mut self, type_url: &str, out: &mut Output) {
        if self.unknown_types.insert(type_url.to_string()) {
            out.events.push(Event::UnknownType(type_url.to_string()));
        }
    }

    fn on_decision(&mut self, type_url: ResourceType, decision: Decision, out: &mut Output) {
        match decision {
            Decision::Respond => self.respond(type_url, out),
            Decision::Ack => {}
            Decision::Nack(error) => out.events.push(Event::Nack { type_url, error }),
            Decision::Stale => out.events.push(Event::Stale(type_url)),
        }
    }

    /// Moves to a new context; returns the previous context and scope.
    fn set_context(
        &mut self,
        ctx: Arc<PushContext>,
    ) -> (Option<Arc<PushContext>>, Option<Arc<SidecarScope>>) {
        let old = self.ctx.as_deref().zip(self.scope.as_ref());
        let scope = self
            .proxy
            .as_ref()
            .map(|p| SidecarScope::next(old, &ctx, p));
        (
            self.ctx.replace(ctx),
            std::mem::replace(&mut self.scope, scope),
        )
    }

    fn check_synced(&mut self, out: &mut Output) {
        if !self.subscriptions.is_acked() {
            return;
        }
        if let Some(version) = self.awaiting_ack.take() {
            out.events.push(Event::Acked { version });
        }
        if !self.synced {
            self.synced = true;
            out.events.push(Event::Synced);
        }
    }

    fn answer_waiting(&mut self, out: &mut Output) {
        for type_url in std::mem::take(&mut self.waiting) {
            self.respond(type_url, out);
        }
    }

    /// Generates one type for the current context and queues what the client lacks.
    fn respond(&mut self, type_url: ResourceType, out: &mut Output) {
        self.respond_push(type_url, false, out);
    }

    /// [`Self::respond`]; with `skip_unchanged`, a SotW type whose set did not change is not
    /// sent.
    fn respond_push(&mut self, type_url: ResourceType, skip_unchanged: bool, out: &mut Output) {
        if self.ctx.is_none() || self.scope.is_none() {
            self.waiting.insert(type_url);
            return;
        }
        let started = self.clock.map(|now| now());
        let response = match self.subscriptions {
            Subscriptions::Sotw(_) => self.sotw_response(type_url, skip_unchanged),
            Subscriptions::Delta(_) => self.delta_response(type_url),
        };
        let Some(response) = response else { return };
        if type_url == ResourceType::Secret {
            self.report_secret_problems(out);
        }
        out.events.push(Event::Sent {
            type_url,
            resources: response_count(&response),
            took: match (self.clock, started) {
                (Some(now), Some(started)) => now().saturating_duration_since(started),
                _ => Duration::ZERO,
            },
        });
        out.responses.push(response);
    }

    /// Tells which changed configs this push carries to the proxy: those its scope depends
    /// on (before or after), or all of them for an endpoint-only push.
    fn report_affected(
        &mut self,
        request: &PushRequest,
        version: u64,
        old_scope: Option<&SidecarScope>,
        out: &mut Output,
    ) {
        let keys: Vec<ConfigKey> = request
            .configs_updated
            .iter()
            .filter(|k| {
                !request.full
                    || self.scope.as_ref().is_some_and(|s| s.deps.contains(*k))
                    || self.watched_secrets().any(|w| w == **k)
                    || old_scope.is_some_and(|s| s.deps.contains(*k))
            })
            .cloned()
            .collect();
        if keys.is_empty() {
            return;
        }
        self.awaiting_ack = Some(version);
        out.events.push(Event::Affected {
            keys,
            version,
            start: request.start,
        });
    }

    /// The Secrets (and their `-cacert` twins) that the SDS names this stream watches read.
    fn watched_secrets(&self) -> impl Iterator<Item = ConfigKey> + '_ {
        let namespace = self.proxy.as_ref().map(|p| p.namespace.as_str());
        self.subscribed(ResourceType::Secret)
            .into_iter()
            .flatten()
            .filter_map(move |name| axon_model::secrets::SecretRef::parse(name, namespace?))
            .flat_map(|reference| reference.related())
    }

    /// Whether a changed config is a Secret this stream's SDS names read.
    fn watches_changed_secret(&self, request: &PushRequest) -> bool {
        request
            .configs_updated
            .iter()
            .any(|k| k.kind == ConfigKind::Secret)
            && self
                .watched_secrets()
                .any(|k| request.configs_updated.contains(&k))
    }

    /// Reports the SDS names this stream watches that it got nothing for.
    fn report_secret_problems(&self, out: &mut Output) {
        let (Some(ctx), Some(proxy), Some(names)) = (
            self.ctx.as_ref(),
            self.proxy.as_ref(),
            self.subscribed(ResourceType::Secret),
        ) else {
            return;
        };
        let problems = crate::generate::sds::problems(ctx, proxy, names);
        if !problems.is_empty() {
            out.events.push(Event::SecretProblems(problems));
        }
    }

    /// The names subscribed for a type, if it is subscribed at all.
    pub fn subscribed(&self, type_url: ResourceType) -> Option<&BTreeSet<String>> {
        self.subscriptions.subscribed(type_url)
    }
}

/// The next nonce of a stream whose last was the `counter`-th, for a response from the
/// context of `version`.
fn next_nonce(counter: &mut u64, version: u64) -> String {
    *counter += 1;
    format!("{version}-{counter}")
}

fn response_count(response: &Response) -> usize {
    match response {
        Response::Sotw(r) => r.resources.len(),
        Response::Delta(r) => r.resources.len() + r.removed.len(),
    }
}
