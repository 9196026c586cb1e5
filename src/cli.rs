//! The command line: flags and errors. `axon serve` reads its flags into
//! [`app::Settings`] and hands them to [`app::run`] (the wiring); `axon validate` checks a
//! config directory exactly as `serve` would load it.

mod impact;
mod validate;

pub use impact::impact;
pub use validate::validate;

use std::io::IsTerminal;
use std::net::SocketAddr;
use std::path::PathBuf;

use anyhow::Context as _;
use clap::{Parser, Subcommand, ValueEnum};

use crate::app::{self, Settings, TokenAuthMode};
use crate::limits::Limits;
use crate::registry::cluster::gateway_deployment::DeploymentSettings;
use crate::registry::cluster::namespaces::NamespaceSelector;
use axon_transport::tls::{ServingCert, TlsSettings};

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
    /// A change's blast radius before it merges: per changed config between OLD and NEW, the
    /// proxies a push would reach and the types each would be sent, as the server decides
    /// it. Exit 0 if nothing would be sent, 1 if something would, 2 on an error.
    Impact {
        /// The config directory (or file) as it is.
        old: PathBuf,
        /// The config directory (or file) as the change makes it.
        new: PathBuf,
        /// The proxies: a running axon's debug address (`http://127.0.0.1:9876`: its
        /// connected proxies' nodes, `/debug/nodes`) or a file of Envoy `Node` objects, one
        /// JSON object a line.
        #[arg(long)]
        proxies: String,
        /// The debug token (`--debug-token-file` of the axon asked).
        #[arg(long)]
        token_file: Option<PathBuf>,
        /// One JSON document (for a CI comment) instead of text.
        #[arg(long)]
        json: bool,
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
    /// prove an identity that may be the proxy they claim. With --ca-dir it also serves
    /// istiod's CA (CreateCertificate). Needs --tls-cert and --tls-key, or --ca-dir.
    #[arg(long)]
    pub xds_tls_addr: Option<SocketAddr>,
    /// axon's serving certificate (PEM, the chain) for --xds-tls-addr; re-read when it changes.
    /// Without it (and --tls-key), axon's CA (--ca-dir) issues one for --xds-dns-names,
    /// renewed at half its life (limits key `workload_cert_ttl`).
    #[arg(long, requires = "tls_key")]
    pub tls_cert: Option<PathBuf>,
    /// The private key of --tls-cert (PEM).
    #[arg(long, requires = "tls_cert")]
    pub tls_key: Option<PathBuf>,
    /// The CA bundle (PEM) that proxies' client certificates chain to (besides axon's CA
    /// root, with --ca-dir).
    #[arg(long)]
    pub client_ca: Option<PathBuf>,
    /// Run the mesh's CA on --xds-tls-addr (istiod's CreateCertificate), signing from this
    /// directory in istiod's plug-in layout (ca-cert.pem, ca-key.pem (PKCS#8),
    /// root-cert.pem, cert-chain.pem); without those files axon makes a self-signed root
    /// (ECDSA P-256, limits key `self_signed_root_ttl`) and writes it there, so a restart
    /// keeps it. Changed files are picked up without a restart. With --kubernetes, an empty
    /// directory is filled from the Secret cacerts, else istio-ca-secret, of axon's namespace
    /// (a self-signed root made then is kept in a new istio-ca-secret), and the root is
    /// written into the ConfigMap istio-ca-root-cert of every namespace axon reads. No
    /// default: without --ca-dir axon runs no CA and --xds-tls-addr needs --tls-cert and
    /// --tls-key.
    #[arg(long, requires = "xds_tls_addr")]
    pub ca_dir: Option<PathBuf>,
    /// DNS names of axon's own certificate when its CA issues it (repeatable or
    /// comma-separated), besides istiod's: istiod.NS.svc, istiod-remote.NS.svc and
    /// istio-pilot.NS.svc, NS being POD_NAMESPACE, else istio-system.
    #[arg(long, value_delimiter = ',')]
    pub xds_dns_names: Vec<String>,
    /// Address of the validating admission webhook (HTTPS, POST /validate; istiod's is
    /// 0.0.0.0:15017): AdmissionReviews of Istio objects checked as `axon validate` checks
    /// them. Its certificate: --webhook-cert and --webhook-key, else issued by axon's CA
    /// (--ca-dir) for the --xds-dns-names names. Off by default.
    #[arg(long)]
    pub webhook_addr: Option<SocketAddr>,
    /// The webhook's serving certificate (PEM, the chain); re-read when it changes.
    #[arg(long, requires = "webhook_key")]
    pub webhook_cert: Option<PathBuf>,
    /// The private key of --webhook-cert (PEM).
    #[arg(long, requires = "webhook_cert")]
    pub webhook_key: Option<PathBuf>,
    /// With --kubernetes: the ValidatingWebhookConfiguration whose webhooks' caBundle axon
    /// keeps set to its CA's root (and whose failurePolicy it turns from Ignore to Fail once
    /// it serves), as istiod's webhook controller does. Needs --webhook-addr and --ca-dir.
    #[arg(long, requires = "webhook_addr")]
    pub webhook_config_name: Option<String>,
    /// Check bearer tokens on --xds-tls-addr: `kubernetes` reviews a stream's
    /// `authorization: Bearer TOKEN` with the API server's TokenReview, so that a proxy
    /// without a client certificate proves its service account as pilot-agent does.
    #[arg(long, value_enum)]
    pub token_auth: Option<TokenAuthMode>,
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
    /// else the host name and the monitoring port). Two replicas of one name refuse: the
    /// younger exits with an error.
    #[arg(long)]
    pub replica_name: Option<String>,
    /// Once every listener is bound, write the bound addresses to this file as JSON
    /// (`xds_addr`, `xds_tls_addr`, `webhook_addr`, `monitoring_addr`, `debug_addr`, `replica`): for scripts
    /// and tests that pass port 0.
    #[arg(long)]
    pub listening_file: Option<PathBuf>,
    /// With --kubernetes: deploy each managed Gateway of class `istio` (no address, or one IP
    /// address) as istiod's deployment controller does: a ServiceAccount, a Deployment of
    /// `istio-proxy` routers and a Service `NAME-istio`, server-side applied.
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set)]
    pub gateway_deployment: bool,
    /// The image of the deployed Gateways' `istio-proxy` container.
    #[arg(long, default_value = "docker.io/istio/proxyv2:1.28.0")]
    pub gateway_proxy_image: String,
    /// Where the deployed Gateways' proxies reach axon (`host:port`, their
    /// `PROXY_CONFIG.discoveryAddress` and `CA_ADDR`); default `istiod.NS.svc:15012`, NS being
    /// POD_NAMESPACE, else istio-system (a name axon's own certificate holds).
    #[arg(long)]
    pub gateway_discovery_address: Option<String>,
}

/// Runs the command line. A start-up error is one line on stderr naming what failed (the
/// flag, its value and the reason), and exit status 2; no panic, no backtrace.
pub fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    init_tracing(cli.log_format, cli.log_level.as_deref());
    let result = match cli.command {
        Command::Serve(args) => serve(args).map(|()| std::process::ExitCode::SUCCESS),
        Command::Impact {
            old,
            new,
            proxies,
            token_file,
            json,
        } => impact(
            &old,
            &new,
            &proxies,
            token_file.as_deref(),
            json,
            &mut std::io::stdout(),
        )
        .map(|changes| std::process::ExitCode::from(u8::from(changes))),
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

/// `axon serve`: the flags read and checked into [`Settings`], then [`app::run`].
pub fn serve(args: ServeArgs) -> anyhow::Result<()> {
    app::run(settings(args)?)
}

/// The [`Settings`] the flags give: the files they name read (the limits file, the mesh
/// config), and the combinations of flags that cannot serve refused.
pub fn settings(args: ServeArgs) -> anyhow::Result<Settings> {
    let limits = match &args.limits {
        Some(path) => Limits::load(path).with_context(|| format!("--limits {}", path.display()))?,
        None => Limits::default(),
    };
    let mesh = app::mesh_config::load(
        args.mesh_config.as_deref(),
        args.root_namespace.as_deref(),
        args.default_export_to.as_deref(),
        args.trust_domain.as_deref(),
    )?;
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
    let xds_tls = match args.xds_tls_addr {
        Some(addr) => {
            let serving = match (args.tls_cert, args.tls_key, &args.ca_dir) {
                (Some(cert), Some(key), _) => ServingCert::Files { cert, key },
                (None, None, Some(_)) => ServingCert::Ca {
                    dns_names: dns_names(&args.xds_dns_names),
                    ttl: limits.workload_cert_ttl,
                },
                _ => anyhow::bail!(
                    "--xds-tls-addr {addr}: needs --tls-cert and --tls-key, or --ca-dir for axon's CA to issue its certificate"
                ),
            };
            let settings = TlsSettings {
                serving,
                client_ca: args.client_ca,
                http1: false,
            };
            Some((addr, settings))
        }
        None => None,
    };
    let webhook = match args.webhook_addr {
        Some(addr) => {
            let serving = match (args.webhook_cert, args.webhook_key, &args.ca_dir) {
                (Some(cert), Some(key), _) => ServingCert::Files { cert, key },
                (None, None, Some(_)) => ServingCert::Ca {
                    dns_names: dns_names(&args.xds_dns_names),
                    ttl: limits.workload_cert_ttl,
                },
                _ => anyhow::bail!(
                    "--webhook-addr {addr}: needs --webhook-cert and --webhook-key, or --ca-dir for axon's CA to issue its certificate"
                ),
            };
            let settings = TlsSettings {
                serving,
                client_ca: None,
                http1: true,
            };
            Some((addr, settings))
        }
        None => None,
    };
    anyhow::ensure!(
        args.webhook_config_name.is_none() || (args.kubernetes && args.ca_dir.is_some()),
        "--webhook-config-name: the caBundle axon writes is its CA's root; give --kubernetes and --ca-dir too"
    );
    let gateway_deployment = (args.kubernetes && args.gateway_deployment).then(|| {
        DeploymentSettings {
            proxy_image: args.gateway_proxy_image.clone(),
            discovery_address: args
                .gateway_discovery_address
                .clone()
                .unwrap_or_else(|| format!("istiod.{}.svc:15012", own_namespace())),
            // istiod's defaults: the cluster `Kubernetes`, the mesh named after the trust domain.
            cluster_id: "Kubernetes".to_string(),
            mesh_id: mesh.trust_domain.clone(),
            trust_domain: mesh.trust_domain.clone(),
            domain_suffix: args.cluster_domain.clone(),
        }
    });
    Ok(Settings {
        config_dir: args.config_dir,
        kubernetes: args.kubernetes,
        cluster_domain: args.cluster_domain,
        namespace_selector: args.namespace_selector,
        xds_addr: args.xds_addr.0,
        xds_tls,
        webhook,
        webhook_config_name: args.webhook_config_name,
        ca_dir: args.ca_dir,
        token_auth: args.token_auth,
        token_audience: args.token_audience,
        monitoring_addr: args.monitoring_addr,
        debug_addr: args.debug_addr,
        debug_token_file: args.debug_token_file,
        limits,
        mesh,
        plaintext_secrets: args.plaintext_secrets,
        peers: args.peers,
        peer_service: args.peer_service,
        replica_name: args.replica_name,
        listening_file: args.listening_file,
        gateway_deployment,
    })
}

/// axon's namespace: POD_NAMESPACE, else istio-system.
fn own_namespace() -> String {
    std::env::var("POD_NAMESPACE")
        .ok()
        .filter(|ns| !ns.is_empty())
        .unwrap_or_else(|| "istio-system".to_string())
}

/// axon's DNS names when its CA issues its certificate: istiod's (`getDNSNames`:
/// `istiod`, `istiod-remote`, `istio-pilot` `.NS.svc`, NS its own namespace) and `extra`,
/// sorted and once each.
fn dns_names(extra: &[String]) -> Vec<String> {
    let namespace = own_namespace();
    let mut names: std::collections::BTreeSet<String> = ["istiod", "istiod-remote", "istio-pilot"]
        .iter()
        .map(|host| format!("{host}.{namespace}.svc"))
        .collect();
    names.extend(
        extra
            .iter()
            .map(|n| n.trim().to_string())
            .filter(|n| !n.is_empty()),
    );
    names.into_iter().collect()
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

#[cfg(test)]
mod tests {
    use super::*;

    fn serve(args: &[&str]) -> Settings {
        let argv = ["axon", "serve"].iter().chain(args).copied();
        let Command::Serve(args) = Cli::try_parse_from(argv).unwrap().command else {
            panic!("not serve");
        };
        settings(args).unwrap()
    }

    #[test]
    fn gateway_deployment_is_on_with_kubernetes_unless_turned_off() {
        let on = serve(&["--kubernetes", "--trust-domain", "example.org"])
            .gateway_deployment
            .expect("on by default");
        assert_eq!(on.proxy_image, "docker.io/istio/proxyv2:1.28.0");
        assert!(on.discovery_address.starts_with("istiod."), "{on:?}");
        assert!(on.discovery_address.ends_with(".svc:15012"), "{on:?}");
        assert_eq!(on.trust_domain, "example.org");
        assert_eq!(on.mesh_id, "example.org");
        assert_eq!(on.cluster_id, "Kubernetes");
        assert_eq!(on.domain_suffix, "cluster.local");
        let set = serve(&[
            "--kubernetes",
            "--gateway-proxy-image",
            "img:1",
            "--gateway-discovery-address",
            "axon.axon-system.svc:15012",
        ])
        .gateway_deployment
        .unwrap();
        assert_eq!(set.proxy_image, "img:1");
        assert_eq!(set.discovery_address, "axon.axon-system.svc:15012");
        let off = serve(&["--kubernetes", "--gateway-deployment", "false"]);
        assert!(off.gateway_deployment.is_none());
        let dir = std::env::temp_dir();
        let files_only = serve(&["--config-dir", dir.to_str().unwrap()]);
        assert!(files_only.gateway_deployment.is_none());
    }
}
