//! The command line: `axon serve` wires the actors and servers; `axon validate` checks a
//! config directory exactly as `serve` would load it.

mod fd_limit;
mod fleet;
mod mesh_config;
pub mod token_auth;
mod validate;

pub use validate::validate;

use std::io::IsTerminal;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use actix::prelude::*;
use anyhow::Context as _;
use clap::{Parser, Subcommand, ValueEnum};

use crate::actors::connection::{ConnectionStarter, Peers};
use crate::actors::debouncer::{DebounceState, Debouncer};
use crate::actors::directory::ConnectionDirectory;
use crate::actors::distribution::DistributionTracker;
use crate::actors::fleet::StopBalancing;
use crate::actors::push_queue::PushQueue;
use crate::actors::snapshot_builder::{SetDraining, SnapshotBuilder};
use crate::http::debug::{self, Debug};
use crate::http::fleet::PeerSide;
use crate::http::monitoring::{self, Monitoring};
use crate::http::peer_client::HttpPeers;
use crate::limits::Limits;
use crate::registry::files::watch::WatchRules;
use crate::registry::files::{FileRegistry, FileSettings};
use crate::registry::kubernetes::namespaces::NamespaceSelector;
use crate::registry::kubernetes::{ISTIO_SOURCE, IstioRegistry, SERVICES_SOURCE, ServiceRegistry};
use crate::registry::outbox::Outbox;
use axon_config::config_set::{FILES, SourceId};
use axon_metrics::Metrics;
use axon_transport::server::{ConnSettings, Drain};
use axon_transport::tls::{TlsFiles, TlsReloader};
use axon_transport::{self, AdsLimits, AdsService};

/// Namespace given to configs that do not name one.
const DEFAULT_NAMESPACE: &str = "default";

#[derive(Parser, Debug)]
#[command(
    name = "axon",
    version,
    about = "An actor-model xDS control plane: istiod's pilot job, serving Envoy over ADS"
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
    /// Log format.
    #[arg(long, global = true, value_enum, default_value_t = LogFormat::Text)]
    pub log_format: LogFormat,
    /// Log filter (tracing's EnvFilter syntax); RUST_LOG is used when absent.
    #[arg(long, global = true)]
    pub log_level: Option<String>,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum LogFormat {
    Text,
    Json,
}

// Parsed once at startup: the size of `Serve` does not matter.
#[allow(clippy::large_enum_variant)]
#[derive(Subcommand, Debug)]
pub enum Command {
    /// Serve Envoy over ADS from a directory of Istio YAML, Kubernetes, or both.
    Serve(ServeArgs),
    /// Check a file, or every file of a directory, as `serve` would; exit 1 on any error.
    Validate {
        /// A file or a directory of Istio YAML.
        path: PathBuf,
        /// Also fail (exit 1) on fields that axon accepts and does not apply.
        #[arg(long)]
        strict: bool,
    },
}

#[derive(clap::Args, Debug)]
pub struct ServeArgs {
    /// Directory of Istio YAML (VirtualService, DestinationRule, Gateway, ServiceEntry, ...).
    /// Optional with --kubernetes; where both define a config or a host, the directory wins.
    #[arg(long)]
    pub config_dir: Option<PathBuf>,
    /// Read Services, EndpointSlices, Pods and networking.istio.io config from Kubernetes
    /// (the in-cluster config, or KUBECONFIG / ~/.kube/config outside a cluster).
    #[arg(long)]
    pub kubernetes: bool,
    /// The cluster domain of Kubernetes Service hostnames (NAME.NAMESPACE.svc.DOMAIN).
    #[arg(long, default_value = axon_config::host::DEFAULT_CLUSTER_DOMAIN)]
    pub cluster_domain: String,
    /// Read only namespaces whose labels match (`key=value[,key=value]`), like istiod's
    /// discoverySelectors; objects of other namespaces are dropped.
    #[arg(long)]
    pub namespace_selector: Option<NamespaceSelector>,
    /// Address of the plaintext ADS gRPC server (anonymous, as istiod's 15010), or `off`.
    #[arg(long, default_value = "0.0.0.0:15010")]
    pub xds_addr: XdsAddr,
    /// Address of the ADS server over TLS (the manifests use 0.0.0.0:15012): streams must
    /// prove an identity that may be the proxy they claim. Needs --tls-cert and --tls-key.
    #[arg(long)]
    pub xds_tls_addr: Option<SocketAddr>,
    /// axon's serving certificate (PEM, the chain) for --xds-tls-addr; re-read when it changes.
    #[arg(long)]
    pub tls_cert: Option<PathBuf>,
    /// The private key of --tls-cert (PEM).
    #[arg(long)]
    pub tls_key: Option<PathBuf>,
    /// The CA bundle (PEM) that proxies' client certificates chain to.
    #[arg(long)]
    pub client_ca: Option<PathBuf>,
    /// Check bearer tokens on --xds-tls-addr: `kubernetes` reviews a stream's
    /// `authorization: Bearer TOKEN` with the API server's TokenReview, so that a proxy
    /// without a client certificate proves its service account as pilot-agent does.
    #[arg(long, value_enum)]
    pub token_auth: Option<token_auth::TokenAuthMode>,
    /// The audiences a bearer token must be for (comma-separated).
    #[arg(long, default_value = "istio-ca", value_delimiter = ',')]
    pub token_audience: Vec<String>,
    /// The trust domain of the SPIFFE identities accepted on --xds-tls-addr (default: the
    /// mesh config's `trustDomain`, else cluster.local).
    #[arg(long)]
    pub trust_domain: Option<String>,
    /// Address of /metrics, /healthz and /ready (nothing per proxy).
    #[arg(long, default_value = "0.0.0.0:15014")]
    pub monitoring_addr: SocketAddr,
    /// Address of the debug endpoints (/debug/*, /version); localhost unless you expose it.
    /// It answers only requests whose Host is a loopback name or this address.
    #[arg(long, default_value = "127.0.0.1:9876")]
    pub debug_addr: SocketAddr,
    /// A file holding a token the debug endpoints then require (`Authorization: Bearer`).
    #[arg(long)]
    pub debug_token_file: Option<PathBuf>,
    /// The actor-limits TOML file (defaults apply without it).
    #[arg(long)]
    pub limits: Option<PathBuf>,
    /// istiod's MeshConfig YAML (the `mesh` key of the `istio` ConfigMap), read at start-up.
    #[arg(long)]
    pub mesh_config: Option<PathBuf>,
    /// The mesh's root namespace: its selector-less Sidecar applies to every namespace
    /// (default: the mesh config's `rootNamespace`, else istio-system).
    #[arg(long)]
    pub root_namespace: Option<String>,
    /// `exportTo` of configs that set none (comma-separated: `*`, `.`, `~` or namespaces;
    /// default: the mesh config's per-kind defaults, else `*`).
    #[arg(long, value_delimiter = ',')]
    pub default_export_to: Option<Vec<String>>,
    /// Serve TLS Secrets (`kubernetes://` SDS names) to proxies on the plaintext xDS port,
    /// whose namespace is their own claim; `false` serves them only to proxies whose identity
    /// the TLS port verified, as istiod.
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set)]
    pub plaintext_secrets: bool,
    /// The other replicas' monitoring addresses (`HOST:PORT,...`; this replica's own may be
    /// among them): their stream counts drive the rebalance, and `?fleet=true` on the debug
    /// endpoints asks them.
    #[arg(long, value_delimiter = ',', conflicts_with = "peer_service")]
    pub peers: Vec<String>,
    /// With --kubernetes: the headless Service (in axon's own namespace) whose EndpointSlices
    /// are the replicas; its port named `http-monitoring` is their monitoring port.
    #[arg(long, requires = "kubernetes")]
    pub peer_service: Option<String>,
    /// This replica's name in the fleet view and `/debug/connections` (default: `POD_NAME`,
    /// else the host name).
    #[arg(long)]
    pub replica_name: Option<String>,
}

/// Runs the command line. A start-up error is one line on stderr naming what failed (the
/// flag, its value and the reason), and exit status 2; no panic, no backtrace.
pub fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    init_tracing(cli.log_format, cli.log_level.as_deref());
    let result = match cli.command {
        Command::Serve(args) => serve(args).map(|()| std::process::ExitCode::SUCCESS),
        Command::Validate { path, strict } => {
            validate(&path, strict, &mut std::io::stdout()).map(|ok| {
                if ok {
                    std::process::ExitCode::SUCCESS
                } else {
                    std::process::ExitCode::from(1)
                }
            })
        }
    };
    result.unwrap_or_else(|e| {
        eprintln!("axon: {}", one_line(&e));
        std::process::ExitCode::from(2)
    })
}

/// An error and its causes on one line, each cause once (many errors repeat their source
/// in their own message).
fn one_line(e: &anyhow::Error) -> String {
    let mut out = String::new();
    for cause in e.chain() {
        let text = cause.to_string().replace('\n', " ");
        if out.contains(&text) {
            continue;
        }
        if !out.is_empty() {
            out.push_str(": ");
        }
        out.push_str(&text);
    }
    out
}

fn init_tracing(format: LogFormat, level: Option<&str>) {
    use tracing_subscriber::EnvFilter;
    let filter = match level {
        Some(l) => EnvFilter::new(l),
        None => EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info")),
    };
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal());
    match format {
        LogFormat::Text => builder.init(),
        LogFormat::Json => builder.json().init(),
    }
}

pub fn serve(args: ServeArgs) -> anyhow::Result<()> {
    let mut limits = match &args.limits {
        Some(path) => Limits::load(path).with_context(|| format!("--limits {}", path.display()))?,
        None => Limits::default(),
    };
    let mesh = mesh_config::load(
        args.mesh_config.as_deref(),
        args.root_namespace.as_deref(),
        args.default_export_to.as_deref(),
        args.trust_domain.as_deref(),
    )?;
    let fd_limit = fd_limit::raise();
    limits.max_connections = fd_limit::max_connections(limits.max_connections, fd_limit);
    anyhow::ensure!(
        args.config_dir.is_some() || args.kubernetes,
        "nothing to serve: give --config-dir DIR, --kubernetes, or both"
    );
    if let Some(dir) = &args.config_dir {
        anyhow::ensure!(
            dir.is_dir(),
            "--config-dir {}: not a directory",
            dir.display()
        );
    }
    anyhow::ensure!(
        args.token_auth.is_none() || args.xds_tls_addr.is_some(),
        "--token-auth: bearer tokens are checked on the TLS port only; give --xds-tls-addr too"
    );
    // The flag a Kubernetes client's failure is reported under.
    let flag = if args.kubernetes {
        "--kubernetes"
    } else {
        "--token-auth kubernetes"
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the tokio runtime")?;
    actix_rt::System::with_tokio_rt(|| runtime).block_on(async move {
        // Everything that can fail at start-up, before any actor or thread is started.
        let listeners = Listeners::bind(&args).await?;
        let client = match args.kubernetes || args.token_auth.is_some() {
            true => Some(kubernetes_client(flag).await?),
            false => None,
        };
        let kubernetes = client.clone().filter(|_| args.kubernetes);
        let token_client = client.filter(|_| args.token_auth.is_some());
        run(args, mesh, limits, listeners, kubernetes, token_client).await
    })
}

/// `--xds-addr`: an address, or `off`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct XdsAddr(pub Option<SocketAddr>);

impl std::str::FromStr for XdsAddr {
    type Err = String;

    fn from_str(value: &str) -> Result<XdsAddr, String> {
        if value == "off" {
            return Ok(XdsAddr(None));
        }
        value
            .parse()
            .map(|a| XdsAddr(Some(a)))
            .map_err(|e| format!("{e}: want HOST:PORT or off"))
    }
}

/// The listeners, bound (and the TLS files read) before anything is started.
struct Listeners {
    xds: Option<tokio::net::TcpListener>,
    xds_tls: Option<(tokio::net::TcpListener, std::sync::Arc<TlsReloader>)>,
    monitoring: tokio::net::TcpListener,
    debug: tokio::net::TcpListener,
    debug_token: Option<std::sync::Arc<str>>,
}

impl Listeners {
    async fn bind(args: &ServeArgs) -> anyhow::Result<Listeners> {
        anyhow::ensure!(
            args.xds_addr.0.is_some() || args.xds_tls_addr.is_some(),
            "--xds-addr off: no xDS port left; give --xds-tls-addr too"
        );
        let xds = match args.xds_addr.0 {
            Some(addr) => Some(xds_listener(addr).with_context(|| format!("--xds-addr {addr}"))?),
            None => None,
        };
        let xds_tls = match args.xds_tls_addr {
            Some(addr) => {
                let (Some(cert), Some(key)) = (&args.tls_cert, &args.tls_key) else {
                    anyhow::bail!("--xds-tls-addr {addr}: needs --tls-cert and --tls-key");
                };
                let tls = TlsReloader::load(TlsFiles {
                    cert: cert.clone(),
                    key: key.clone(),
                    client_ca: args.client_ca.clone(),
                })
                .context("--xds-tls-addr")?;
                let listener =
                    xds_listener(addr).with_context(|| format!("--xds-tls-addr {addr}"))?;
                Some((listener, std::sync::Arc::new(tls)))
            }
            None => None,
        };
        let monitoring = tokio::net::TcpListener::bind(args.monitoring_addr)
            .await
            .with_context(|| format!("--monitoring-addr {}", args.monitoring_addr))?;
        let debug = tokio::net::TcpListener::bind(args.debug_addr)
            .await
            .with_context(|| format!("--debug-addr {}", args.debug_addr))?;
        let debug_token = match &args.debug_token_file {
            Some(path) => {
                let token = std::fs::read_to_string(path)
                    .with_context(|| format!("--debug-token-file {}", path.display()))?;
                let token = token.trim();
                anyhow::ensure!(
                    !token.is_empty(),
                    "--debug-token-file {}: the file is empty",
                    path.display()
                );
                Some(std::sync::Arc::<str>::from(token))
            }
            None => None,
        };
        Ok(Listeners {
            xds,
            xds_tls,
            monitoring,
            debug,
            debug_token,
        })
    }
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

async fn run(
    args: ServeArgs,
    mesh: mesh_config::MeshSettings,
    limits: Limits,
    listeners: Listeners,
    kube_client: Option<kube::Client>,
    token_client: Option<kube::Client>,
) -> anyhow::Result<()> {
    let metrics = Metrics::new();
    // /ready waits for every registry's first update: the Kubernetes ones send it once
    // they have their initial lists, the FileRegistry once the directory was read cleanly.
    let mut ready_after: Vec<SourceId> = Vec::new();
    if args.config_dir.is_some() {
        ready_after.push(FILES);
    }
    if args.kubernetes {
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
    let mesh_config::MeshSettings { mesh, trust_domain } = mesh;
    let mesh = axon_config::mesh::MeshConfig {
        plaintext_secrets: args.plaintext_secrets,
        ..mesh
    };
    let builder: Addr<SnapshotBuilder> = SnapshotBuilder::new(
        mesh,
        push_queue.clone().recipient(),
        metrics.clone(),
        &ready_after,
        cap,
    )
    .start();
    let debouncer = Debouncer::new(
        DebounceState::new(
            limits.debounce_after,
            limits.debounce_max,
            limits.enable_eds_debounce,
        )
        .with_lone(limits.debounce_lone),
        builder.clone().recipient(),
        cap,
        metrics.clone(),
    )
    .start();
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
    let monitoring_addr = listeners.monitoring.local_addr()?;
    let debug_addr = listeners.debug.local_addr()?;
    let debug_token = listeners.debug_token.clone();

    let starter = ConnectionStarter::new(
        Peers {
            push_queue: push_queue.clone(),
            directory: directory.clone(),
            distribution: distribution.clone(),
            metrics: metrics.clone(),
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
    if let Some(client) = token_client {
        ads = ads.with_token_auth(token_auth::kubernetes(
            client,
            &trust_domain,
            &args.token_audience,
            &limits,
            &metrics,
        ));
    }
    let replica = fleet::replica_name(args.replica_name.as_deref());
    let peer_source = match (&args.peer_service, &kube_client) {
        (Some(service), Some(client)) => fleet::PeerSource::Service {
            client: client.clone(),
            namespace: client.default_namespace().to_string(),
            service: service.clone(),
        },
        _ if !args.peers.is_empty() => fleet::PeerSource::Static(args.peers.clone()),
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
    let fleet_actor = fleet::start(
        &replica,
        peer_source,
        monitoring_addr.port(),
        &ads,
        peer_client.clone(),
        &limits,
        &metrics,
    );
    if let Some(xds) = listeners.xds {
        serve_xds(xds, &arbiters, &ads, &limits, &drain, None)?;
    }
    if let Some((xds_tls, tls)) = listeners.xds_tls {
        serve_xds(xds_tls, &arbiters, &ads, &limits, &drain, Some(tls))?;
    }
    let outbox = |source| Outbox::new(source, debouncer.clone().recipient(), metrics.clone());
    // The FileRegistry reads and parses on a thread of its own: a slow parse never delays
    // the pipeline actors, a push or a new Envoy's first answer.
    let file_thread = args.config_dir.as_ref().map(|_| Arbiter::new());
    let file_registry = args
        .config_dir
        .clone()
        .zip(file_thread.as_ref())
        .map(|(dir, thread)| {
            let out = outbox(FILES);
            let metrics = metrics.clone();
            let settings = FileSettings {
                rescan_interval: limits.file_rescan_interval,
                rules: WatchRules {
                    settle: limits.file_settle,
                    max_file_bytes: limits.max_file_bytes,
                    max_files: limits.max_files,
                    max_yaml_depth: limits.max_yaml_depth,
                },
            };
            FileRegistry::start_in_arbiter(&thread.handle(), move |_| {
                FileRegistry::new(dir, DEFAULT_NAMESPACE, out, metrics, settings)
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
    let mut kubernetes = Vec::new();
    if let Some(client) = kube_client {
        let settings = crate::registry::kubernetes::Settings {
            cluster_domain: args.cluster_domain.clone(),
            namespace_selector: args.namespace_selector.clone(),
        };
        let services = ServiceRegistry::new(
            client.clone(),
            settings.clone(),
            outbox(SERVICES_SOURCE),
            cap,
        )
        .start();
        let istio = IstioRegistry::new(client, settings, outbox(ISTIO_SOURCE), cap).start();
        kubernetes.push(services.recipient());
        kubernetes.push(istio.recipient());
    }
    let debug_server = tokio::spawn(
        axum::serve(
            listeners.debug,
            debug::router(Debug {
                addr: debug_addr,
                token: debug_token,
                directory,
                builder: builder.clone(),
                registry: file_registry.map(Addr::recipient),
                kubernetes,
                debouncer,
                distribution,
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
        %monitoring_addr,
        %debug_addr,
        config_dir = ?args.config_dir,
        kubernetes = args.kubernetes,
        %replica,
        max_connections = limits.max_connections,
        "axon listening"
    );

    let result = tokio::select! {
        r = monitoring_server => r.context("monitoring server task").and_then(|r| r.context("monitoring server")),
        r = debug_server => r.context("debug server task").and_then(|r| r.context("debug server")),
        _ = shutdown_signal() => {
            let _ = fleet_actor.send(StopBalancing).await;
            drain_connections(&drain, &builder, limits.drain_duration, limits.close_grace).await;
            Ok(())
        }
    };
    for arbiter in arbiters.iter().chain(file_thread.iter()) {
        arbiter.stop();
    }
    System::current().stop();
    result
}

/// SIGTERM: `/ready` turns 503, no new connection is accepted, and the open ones are closed
/// (GOAWAY, their streams ended with UNAVAILABLE) evenly over `over`; returns once none is
/// left, or `over` plus `grace` later, or at a second signal.
async fn drain_connections(
    drain: &Drain,
    builder: &Addr<SnapshotBuilder>,
    over: std::time::Duration,
    grace: std::time::Duration,
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

async fn shutdown_signal() {
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

/// The xDS listener, with a backlog for a fleet reconnecting at once (a restart of axon):
/// tokio's default of 1,024 pending connections drops the SYNs of a 2,000-proxy storm.
fn xds_listener(addr: std::net::SocketAddr) -> std::io::Result<tokio::net::TcpListener> {
    let socket = if addr.is_ipv4() {
        tokio::net::TcpSocket::new_v4()?
    } else {
        tokio::net::TcpSocket::new_v6()?
    };
    socket.set_reuseaddr(true)?;
    socket.bind(addr)?;
    socket.listen(4096)
}
