//! The wiring: [`start`] takes [`Settings`] (what `axon serve`'s flags say, already read and
//! checked by the CLI), binds every listener, starts the actors, the registries and the
//! servers, and returns their [`Handles`]: the bound addresses and the actors' addresses.
//! [`Handles::serve_until`] serves until a shutdown future resolves, then drains; [`run`] is
//! `axon serve`: a runtime, an actix System, `start`, and SIGTERM as the shutdown.
//!
//! Tests start axon in process with `start` (ports `:0`, addresses from the `Handles`), or
//! as a process with `--listening-file` (the bound addresses as JSON, written once every
//! listener is bound).

mod ca;
mod fd_limit;
pub mod fleet;
mod listeners;
pub mod mesh_config;
pub mod token_auth;

use std::future::Future;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use actix::prelude::*;
use anyhow::Context as _;

use crate::actors::connection::{ConnectionStarter, DebugAnswers, Peers};
use crate::actors::debouncer::{DebounceState, Debouncer};
use crate::actors::directory::ConnectionDirectory;
use crate::actors::distribution::DistributionTracker;
use crate::actors::fleet::{Fleet, StopBalancing};
use crate::actors::push_queue::PushQueue;
use crate::actors::snapshot_builder::{SetDraining, SnapshotBuilder};
use crate::http::debug::{self, Debug};
use crate::http::fleet::PeerSide;
use crate::http::monitoring::{self, Monitoring};
use crate::http::peer_client::HttpPeers;
use crate::http::webhook::{self, WebhookLimits};
use crate::limits::Limits;
use crate::registry::cluster::gateway_deployment::DeploymentSettings;
use crate::registry::cluster::namespaces::NamespaceSelector;
use crate::registry::files::watch::WatchRules;
use crate::registry::files::{FileRegistry, FileSettings};
use crate::registry::kubernetes::{
    GatewayDeployer, ISTIO_SOURCE, IstioRegistry, SERVICES_SOURCE, ServiceRegistry,
};
use crate::registry::outbox::Outbox;
use axon_config::config_set::{FILES, SourceId};
use axon_metrics::Metrics;
use axon_transport::server::{ConnSettings, Drain};
use axon_transport::tls::{TlsReloader, TlsSettings};
use axon_transport::{AdsLimits, AdsService};

pub use listeners::Listeners;
pub use mesh_config::MeshSettings;
pub use token_auth::TokenAuthMode;

/// Namespace given to configs that do not name one.
pub const DEFAULT_NAMESPACE: &str = "default";

/// What axon serves and how: `axon serve`'s flags, with the files they name already read
/// (the limits file, the mesh config).
pub struct Settings {
    /// The config directory (`--config-dir`).
    pub config_dir: Option<PathBuf>,
    /// Read Kubernetes (`--kubernetes`).
    pub kubernetes: bool,
    pub cluster_domain: String,
    pub namespace_selector: Option<NamespaceSelector>,
    /// The plaintext xDS address; `None` is `--xds-addr off`.
    pub xds_addr: Option<SocketAddr>,
    /// The TLS xDS address and where its certificates come from.
    pub xds_tls: Option<(SocketAddr, TlsSettings)>,
    /// The webhook's address and where its certificate comes from (`--webhook-addr`).
    pub webhook: Option<(SocketAddr, TlsSettings)>,
    /// The ValidatingWebhookConfiguration whose caBundle axon keeps current.
    pub webhook_config_name: Option<String>,
    /// The CA's directory (`--ca-dir`): the CA runs on the TLS port.
    pub ca_dir: Option<PathBuf>,
    pub token_auth: Option<TokenAuthMode>,
    pub token_audience: Vec<String>,
    pub monitoring_addr: SocketAddr,
    pub debug_addr: SocketAddr,
    pub debug_token_file: Option<PathBuf>,
    pub limits: Limits,
    pub mesh: MeshSettings,
    pub plaintext_secrets: bool,
    pub peers: Vec<String>,
    pub peer_service: Option<String>,
    pub replica_name: Option<String>,
    /// Where to write the bound addresses as JSON once every listener is bound.
    pub listening_file: Option<PathBuf>,
    /// With --kubernetes: deploy managed Gateways of class `istio` with these settings
    /// (`--gateway-deployment`).
    pub gateway_deployment: Option<DeploymentSettings>,
}

/// What [`start`] started: the bound addresses and the actors' addresses, and what
/// [`Handles::serve_until`] needs to serve and drain.
pub struct Handles {
    pub xds_addr: Option<SocketAddr>,
    pub xds_tls_addr: Option<SocketAddr>,
    /// The validating webhook's address (`--webhook-addr`).
    pub webhook_addr: Option<SocketAddr>,
    pub monitoring_addr: SocketAddr,
    pub debug_addr: SocketAddr,
    /// This replica's name.
    pub replica: String,
    pub metrics: Metrics,
    pub builder: Addr<SnapshotBuilder>,
    pub debouncer: Addr<Debouncer>,
    pub push_queue: Addr<PushQueue>,
    pub directory: Addr<ConnectionDirectory>,
    pub distribution: Addr<DistributionTracker>,
    pub fleet: Addr<Fleet>,
    /// Resolves when an older replica has this replica's name: serving stops with its reason.
    name_taken: tokio::sync::oneshot::Receiver<String>,
    /// The FileRegistry, with `--config-dir`.
    pub files: Option<Addr<FileRegistry>>,
    drain: Drain,
    drain_duration: Duration,
    close_grace: Duration,
    /// The connection threads and the FileRegistry's, stopped when serving ends.
    threads: Vec<Arbiter>,
    monitoring_server: tokio::task::JoinHandle<std::io::Result<()>>,
    debug_server: tokio::task::JoinHandle<std::io::Result<()>>,
}

/// `axon serve`: starts axon in a new runtime and actix System and serves until SIGTERM or
/// Ctrl-C, then drains.
pub fn run(settings: Settings) -> anyhow::Result<()> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the tokio runtime")?;
    actix_rt::System::with_tokio_rt(|| runtime).block_on(async move {
        let handles = start(settings).await?;
        let result = handles.serve_until(shutdown_signal()).await;
        System::current().stop();
        result
    })
}

/// Binds every listener, starts the actors, registries and servers; call it inside an actix
/// System. Everything that can fail at start-up fails here, before any actor or thread is
/// started: a listener that does not bind, TLS files that do not read, a Kubernetes API
/// server that does not answer.
pub async fn start(mut settings: Settings) -> anyhow::Result<Handles> {
    let fd_limit = fd_limit::raise();
    let limits = &mut settings.limits;
    limits.max_connections = fd_limit::max_connections(limits.max_connections, fd_limit);
    // The flag a Kubernetes client's failure is reported under.
    let flag = if settings.kubernetes {
        "--kubernetes"
    } else {
        "--token-auth kubernetes"
    };
    let client = match settings.kubernetes || settings.token_auth.is_some() {
        true => Some(kubernetes_client(flag).await?),
        false => None,
    };
    // In Kubernetes the CA's material is kept in istiod's Secrets, mirrored into --ca-dir
    // before the CA opens it.
    let kept = ca::restore(client.as_ref(), &settings).await?;
    let listeners = Listeners::bind(&settings).await?;
    if let Some(kept) = kept {
        kept.keep().await?;
    }
    let kube_client = client.clone().filter(|_| settings.kubernetes);
    let token_client = client.filter(|_| settings.token_auth.is_some());
    wire(settings, listeners, kube_client, token_client).await
}

/// A Kubernetes client whose API server answered.
async fn kubernetes_client(flag: &str) -> anyhow::Result<kube::Client> {
    let client = crate::registry::kubernetes::client()
        .await
        .context(flag.to_string())?;
    let probe = tokio::time::timeout(Duration::from_secs(10), client.list_api_groups()).await;
    match probe {
        Ok(Ok(_)) => Ok(client),
        Ok(Err(e)) => Err(anyhow::anyhow!(
            "{flag}: the API server did not answer: {e}"
        )),
        Err(_) => Err(anyhow::anyhow!(
            "{flag}: the API server did not answer within 10s"
        )),
    }
}

async fn wire(
    settings: Settings,
    listeners: Listeners,
    kube_client: Option<kube::Client>,
    token_client: Option<kube::Client>,
) -> anyhow::Result<Handles> {
    let limits = &settings.limits;
    let metrics = Metrics::new();
    metrics
        .xds_max_connections
        .set(i64::try_from(limits.max_connections).unwrap_or(i64::MAX));
    // /ready waits for every registry's first update: the Kubernetes ones send it once
    // they have their initial lists, the FileRegistry once the directory was read cleanly.
    let mut ready_after: Vec<SourceId> = Vec::new();
    if settings.config_dir.is_some() {
        ready_after.push(FILES);
    }
    if settings.kubernetes {
        ready_after.extend([SERVICES_SOURCE, ISTIO_SOURCE]);
    }
    let cap = limits.mailbox_capacity;

    let push_queue = PushQueue::new(
        limits.push_concurrency,
        cap,
        limits.push_timeout,
        metrics.clone(),
    )
    .start();
    let MeshSettings { mesh, trust_domain } = settings.mesh;
    let mesh = axon_config::mesh::MeshConfig {
        plaintext_secrets: settings.plaintext_secrets,
        ..mesh
    };
    // The Debouncer is made before the SnapshotBuilder it flushes to, so that the JWKS
    // resolver's outbox can send to it and the builder can tell the resolver what to fetch.
    let debouncer_ctx = Context::<Debouncer>::new();
    let debouncer_addr = debouncer_ctx.address();
    let jwks_resolver = crate::registry::jwks::start(
        crate::registry::jwks::Schedule {
            refresh_interval: limits.jwks_refresh_interval,
            on_failure: limits.jwks_refresh_interval_on_failure,
            max_timeout: limits.jwks_max_fetch_timeout,
            max_sources: limits.max_jwks_sources,
        },
        limits.max_jwks_bytes,
        Outbox::new(
            crate::registry::jwks::SOURCE,
            debouncer_addr.recipient(),
            metrics.clone(),
        ),
    );
    let replica = fleet::replica_name(
        settings.replica_name.as_deref(),
        listeners.monitoring.local_addr()?.port(),
    );
    let mut builder = SnapshotBuilder::new(
        mesh,
        push_queue.clone().recipient(),
        metrics.clone(),
        &ready_after,
        cap,
    )
    .with_jwks_resolver(jwks_resolver);
    // The Gateway API statuses, written by the holder of the status Lease.
    if let Some(client) = &kube_client {
        let (writer, desired) = tokio::sync::watch::channel(Default::default());
        builder = builder.with_gateway_status(writer);
        let namespace = client.default_namespace().to_string();
        tokio::spawn(crate::registry::kubernetes::gateway_status::run(
            client.clone(),
            namespace,
            replica.to_string(),
            desired,
            crate::registry::kubernetes::gateway_status::Timing::default(),
        ));
    }
    let builder: Addr<SnapshotBuilder> = builder.start();
    let debouncer = debouncer_ctx.run(Debouncer::new(
        DebounceState::new(
            limits.debounce_after,
            limits.debounce_max,
            limits.enable_eds_debounce,
        )
        .with_lone(limits.debounce_lone),
        builder.clone().recipient(),
        cap,
        metrics.clone(),
    ));
    let distribution = DistributionTracker::new(metrics.clone()).start();
    let directory = ConnectionDirectory::default().start();
    let arbiters: Vec<Arbiter> = (0..limits.connection_threads())
        .map(|_| Arbiter::new())
        .collect();

    let xds_addr = listeners.xds.as_ref().map(|l| l.local_addr()).transpose()?;
    let xds_tls_addr = listeners
        .xds_tls
        .as_ref()
        .map(|(l, _)| l.local_addr())
        .transpose()?;
    let webhook_addr = listeners
        .webhook
        .as_ref()
        .map(|(l, _)| l.local_addr())
        .transpose()?;
    let monitoring_addr = listeners.monitoring.local_addr()?;
    let debug_addr = listeners.debug.local_addr()?;
    let debug_token = listeners.debug_token.clone();

    let starter = ConnectionStarter::new(
        Peers {
            push_queue: push_queue.clone(),
            directory: directory.clone(),
            distribution: distribution.clone(),
            metrics: metrics.clone(),
            debug: DebugAnswers {
                replica: replica.as_str().into(),
                timeout: limits.debug_query_timeout,
            },
        },
        limits.write_timeout,
        arbiters.iter().map(Arbiter::handle).collect(),
    );
    let ads = AdsService::new(
        std::sync::Arc::new(starter),
        AdsLimits {
            max_streams: limits.max_streams,
            queue_capacity: limits.stream_queue_capacity,
            max_requests_per_second: limits.max_requests_per_second,
            max_stream_wait: limits.max_stream_wait,
            first_request_timeout: limits.first_request_timeout,
            message_timeout: limits.message_timeout,
            max_message_size: limits.max_message_size,
            max_request_buffer_bytes: limits.max_request_buffer_bytes,
            max_connection_request_buffer_bytes: limits.connection_request_buffer_bytes(),
            max_pending_request_buffer_bytes: limits.pending_request_buffer_bytes(),
            max_pending_streams: limits.max_pending_streams,
            pending_stream_grace: limits.pending_stream_grace,
            max_connections: limits.max_connections,
        },
        metrics.clone(),
    );
    let drain = Drain::default();
    let mut ads = ads.with_trust_domain(&trust_domain);
    if let Some(ca) = &listeners.ca {
        ads = ads.with_ca(ca.clone(), limits.max_csr_bytes);
    }
    if let Some(client) = token_client {
        ads = ads.with_token_auth(token_auth::kubernetes(
            client,
            &trust_domain,
            &settings.token_audience,
            limits,
            &metrics,
        ));
    }
    let peer_source = match (&settings.peer_service, &kube_client) {
        (Some(service), Some(client)) => fleet::PeerSource::Service {
            client: client.clone(),
            namespace: client.default_namespace().to_string(),
            service: service.clone(),
        },
        _ if !settings.peers.is_empty() => fleet::PeerSource::Static(settings.peers.clone()),
        _ => fleet::PeerSource::None,
    };
    let fleet_configured = peer_source.configured();
    if fleet_configured && debug_token.is_none() {
        tracing::warn!(
            monitoring_addr = %monitoring_addr,
            "peers are configured without --debug-token-file: /fleet/syncz and /fleet/distribution on the monitoring address answer anyone who reaches it with this replica's proxy ids"
        );
    }
    let peer_client = HttpPeers {
        token: debug_token.clone(),
        max_bytes: limits.max_peer_answer_bytes,
    };
    let (fleet_actor, name_taken) = fleet::start(
        &replica,
        peer_source,
        monitoring_addr.port(),
        &ads,
        peer_client.clone(),
        limits,
        &metrics,
    );
    if let Some(xds) = listeners.xds {
        serve_xds(xds, &arbiters, &ads, limits, &drain, None)?;
    }
    if let Some((xds_tls, tls)) = listeners.xds_tls {
        serve_xds(xds_tls, &arbiters, &ads, limits, &drain, Some(tls))?;
    }
    let outbox = |source| Outbox::new(source, debouncer.clone().recipient(), metrics.clone());
    // The FileRegistry reads and parses on a thread of its own: a slow parse never delays
    // the pipeline actors, a push or a new Envoy's first answer.
    let file_thread = settings.config_dir.as_ref().map(|_| Arbiter::new());
    let file_registry =
        settings
            .config_dir
            .clone()
            .zip(file_thread.as_ref())
            .map(|(dir, thread)| {
                let out = outbox(FILES);
                let metrics = metrics.clone();
                let file_settings = FileSettings {
                    cluster: crate::registry::cluster::Settings {
                        cluster_domain: settings.cluster_domain.clone(),
                        namespace_selector: settings.namespace_selector.clone(),
                    },
                    rescan_interval: limits.file_rescan_interval,
                    rules: WatchRules {
                        settle: limits.file_settle,
                        max_file_bytes: limits.max_file_bytes,
                        max_files: limits.max_files,
                        max_yaml_depth: limits.max_yaml_depth,
                    },
                };
                FileRegistry::start_in_arbiter(&thread.handle(), move |_| {
                    FileRegistry::new(dir, DEFAULT_NAMESPACE, out, metrics, file_settings)
                })
            });
    let monitoring_server = tokio::spawn(
        axum::serve(
            listeners.monitoring,
            monitoring::router(Monitoring {
                metrics: metrics.clone(),
                builder: builder.clone(),
                files: file_registry.clone().map(Addr::recipient),
                peers: PeerSide {
                    fleet: fleet_actor.clone(),
                    directory: directory.clone(),
                    distribution: distribution.clone(),
                    per_proxy: fleet_configured,
                    token: debug_token.clone(),
                },
            }),
        )
        .into_future(),
    );
    if let (Some(client), Some(ca)) = (&kube_client, &listeners.ca) {
        ca::publish_root(
            client.clone(),
            settings.namespace_selector.clone(),
            ca.clone(),
            settings.webhook_config_name.clone(),
        );
    }
    let mut kubernetes = Vec::new();
    if let Some(client) = kube_client {
        let kube_settings = crate::registry::kubernetes::Settings {
            cluster_domain: settings.cluster_domain.clone(),
            namespace_selector: settings.namespace_selector.clone(),
        };
        let services = ServiceRegistry::new(
            client.clone(),
            kube_settings.clone(),
            outbox(SERVICES_SOURCE),
            cap,
        )
        .start();
        if let Some(deployment) = settings.gateway_deployment.clone() {
            let selector = settings.namespace_selector.clone();
            let election = crate::registry::kubernetes::lease::Election::new(
                &client,
                client.default_namespace(),
                crate::registry::kubernetes::GATEWAY_DEPLOYMENT_LEASE,
                &replica,
                crate::registry::kubernetes::lease::Timing::default(),
            );
            tokio::spawn(
                GatewayDeployer::new(client.clone(), deployment, selector, election).run(),
            );
        }
        let istio = IstioRegistry::new(client, kube_settings, outbox(ISTIO_SOURCE), cap).start();
        kubernetes.push(services.recipient());
        kubernetes.push(istio.recipient());
    }
    if let Some((listener, tls)) = listeners.webhook {
        let limits = WebhookLimits {
            max_request_bytes: limits.max_webhook_request_bytes,
            request_timeout: limits.webhook_request_timeout,
            max_connections: limits.max_webhook_connections,
        };
        tokio::spawn(webhook::serve(listener, tls, limits, metrics.clone()));
    }
    let debug_server = tokio::spawn(
        axum::serve(
            listeners.debug,
            debug::router(Debug {
                addr: debug_addr,
                token: debug_token,
                directory: directory.clone(),
                builder: builder.clone(),
                registry: file_registry.clone().map(Addr::recipient),
                kubernetes,
                debouncer: debouncer.clone(),
                distribution: distribution.clone(),
                replica: replica.clone(),
                fleet: fleet_actor.clone(),
                peers: std::sync::Arc::new(peer_client),
                peer_timeout: limits.peer_poll_interval.max(Duration::from_secs(2)),
            }),
        )
        .into_future(),
    );
    tracing::info!(
        xds_addr = %xds_addr.map_or("off".to_string(), |a| a.to_string()),
        xds_tls_addr = %xds_tls_addr.map_or("off".to_string(), |a| a.to_string()),
        webhook_addr = %webhook_addr.map_or("off".to_string(), |a| a.to_string()),
        %monitoring_addr,
        %debug_addr,
        config_dir = ?settings.config_dir,
        kubernetes = settings.kubernetes,
        %replica,
        max_connections = limits.max_connections,
        "axon listening"
    );
    let handles = Handles {
        xds_addr,
        xds_tls_addr,
        webhook_addr,
        monitoring_addr,
        debug_addr,
        replica,
        metrics,
        builder,
        debouncer,
        push_queue,
        directory,
        distribution,
        fleet: fleet_actor,
        name_taken,
        files: file_registry,
        drain,
        drain_duration: limits.drain_duration,
        close_grace: limits.close_grace,
        threads: arbiters.into_iter().chain(file_thread).collect(),
        monitoring_server,
        debug_server,
    };
    if let Some(path) = &settings.listening_file {
        handles
            .write_listening_file(path)
            .with_context(|| format!("--listening-file {}", path.display()))?;
    }
    Ok(handles)
}

impl Handles {
    /// The bound addresses as JSON: `xds_addr`, `xds_tls_addr`, `webhook_addr` (`null` when
    /// off), `monitoring_addr`, `debug_addr`, `replica`.
    pub fn listening(&self) -> serde_json::Value {
        serde_json::json!({
            "xds_addr": self.xds_addr.map(|a| a.to_string()),
            "xds_tls_addr": self.xds_tls_addr.map(|a| a.to_string()),
            "webhook_addr": self.webhook_addr.map(|a| a.to_string()),
            "monitoring_addr": self.monitoring_addr.to_string(),
            "debug_addr": self.debug_addr.to_string(),
            "replica": self.replica,
        })
    }

    /// Writes [`Self::listening`] to `path` whole: to a file beside it, then renamed, so that
    /// a reader never sees a part of it.
    fn write_listening_file(&self, path: &std::path::Path) -> std::io::Result<()> {
        let mut tmp = path.as_os_str().to_owned();
        tmp.push(".tmp");
        let tmp = PathBuf::from(tmp);
        std::fs::write(&tmp, self.listening().to_string())?;
        std::fs::rename(&tmp, path)
    }

    /// Serves until a server fails or `shutdown` resolves; then stops the rebalancing and
    /// drains the xDS connections (`/ready` turns 503, no new connection is accepted, the
    /// open ones are closed evenly over `drain_duration`), and stops the connection threads.
    pub async fn serve_until(self, shutdown: impl Future<Output = ()>) -> anyhow::Result<()> {
        let result = tokio::select! {
            r = self.monitoring_server => r.context("monitoring server task").and_then(|r| r.context("monitoring server")),
            r = self.debug_server => r.context("debug server task").and_then(|r| r.context("debug server")),
            Ok(reason) = self.name_taken => Err(anyhow::anyhow!("{reason}")),
            _ = shutdown => {
                let _ = self.fleet.send(StopBalancing).await;
                drain_connections(&self.drain, &self.builder, self.drain_duration, self.close_grace).await;
                Ok(())
            }
        };
        for thread in &self.threads {
            thread.stop();
        }
        result
    }
}

/// At shutdown: `/ready` turns 503, no new connection is accepted, and the open ones are
/// closed (GOAWAY, their streams ended with UNAVAILABLE) evenly over `over`; returns once
/// none is left, or `over` plus `grace` later, or at a second signal.
async fn drain_connections(
    drain: &Drain,
    builder: &Addr<SnapshotBuilder>,
    over: Duration,
    grace: Duration,
) {
    let started = std::time::Instant::now();
    let open = drain.live();
    tracing::info!(connections = open, drain_duration = ?over, "SIGTERM: draining xDS connections");
    let _ = builder.send(SetDraining).await;
    drain.start(over);
    tokio::select! {
        _ = drain.drained() => tracing::info!(
            connections = open,
            took_ms = started.elapsed().as_millis() as u64,
            "drained; exiting"
        ),
        _ = tokio::time::sleep(over + grace) => tracing::warn!(
            left = drain.live(),
            "drain_duration and close_grace passed with connections still open; exiting"
        ),
        _ = shutdown_signal() => tracing::warn!(left = drain.live(), "second signal: exiting now"),
    }
}

/// SIGTERM or Ctrl-C.
pub async fn shutdown_signal() {
    #[cfg(unix)]
    {
        let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
            .expect("installing the SIGTERM handler");
        tokio::select! {
            _ = tokio::signal::ctrl_c() => {}
            _ = term.recv() => {}
        }
    }
    #[cfg(not(unix))]
    let _ = tokio::signal::ctrl_c().await;
}

/// Serves ADS on every connection arbiter: each accepts from the shared listener and runs
/// the HTTP/2 connections it accepts on its own thread, where their streams' ConnectionActors
/// are started too (`AdsService`), so that a response or a request does not wake another
/// thread. The accept loops end when `drain` starts.
fn serve_xds(
    listener: tokio::net::TcpListener,
    arbiters: &[Arbiter],
    ads: &AdsService,
    limits: &Limits,
    drain: &Drain,
    tls: Option<std::sync::Arc<TlsReloader>>,
) -> anyhow::Result<()> {
    let listener = listener.into_std()?;
    let settings = ConnSettings {
        keepalive_interval: limits.keepalive_interval,
        keepalive_timeout: limits.keepalive_timeout,
        max_connection_age: Some(limits.max_connection_age).filter(|age| !age.is_zero()),
        close_grace: limits.close_grace,
        idle_timeout: limits.idle_connection_timeout,
        max_streams_per_connection: limits.max_streams_per_connection,
        receive_window: limits.http2_receive_window,
    };
    for arbiter in arbiters {
        let listener = listener.try_clone()?;
        let (ads, drain, tls) = (ads.clone(), drain.clone(), tls.clone());
        arbiter.spawn(async move {
            match tokio::net::TcpListener::from_std(listener) {
                Ok(l) => axon_transport::server::serve(l, ads, settings, drain, tls).await,
                Err(e) => tracing::error!(error = %e, "cannot serve xDS on this thread"),
            }
        });
    }
    Ok(())
}
