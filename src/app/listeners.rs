//! The listeners, bound (and the CA's directory opened, the TLS files and the debug token
//! read) before anything is started, so that a port in use or a file that does not read
//! fails the start-up alone.

use std::net::SocketAddr;
use std::sync::Arc;

use anyhow::Context as _;

use super::Settings;
use axon_ca::{CaStore, CaTtls};
use axon_transport::tls::TlsReloader;

/// Every listener of a [`Settings`], bound.
pub struct Listeners {
    pub xds: Option<tokio::net::TcpListener>,
    pub xds_tls: Option<(tokio::net::TcpListener, Arc<TlsReloader>)>,
    /// The validating webhook (`--webhook-addr`) and its certificate.
    pub webhook: Option<(tokio::net::TcpListener, Arc<TlsReloader>)>,
    pub monitoring: tokio::net::TcpListener,
    pub debug: tokio::net::TcpListener,
    pub debug_token: Option<Arc<str>>,
    /// The CA (`--ca-dir`).
    pub ca: Option<Arc<CaStore>>,
}

impl Listeners {
    pub async fn bind(settings: &Settings) -> anyhow::Result<Listeners> {
        anyhow::ensure!(
            settings.xds_addr.is_some() || settings.xds_tls.is_some(),
            "--xds-addr off: no xDS port left; give --xds-tls-addr too"
        );
        let xds = match settings.xds_addr {
            Some(addr) => Some(xds_listener(addr).with_context(|| format!("--xds-addr {addr}"))?),
            None => None,
        };
        let ca = match &settings.ca_dir {
            Some(dir) => {
                let limits = &settings.limits;
                let ttls = CaTtls {
                    default: limits.workload_cert_ttl,
                    max: limits.max_workload_cert_ttl,
                    root: limits.self_signed_root_ttl,
                };
                let store = CaStore::open(dir, &settings.mesh.trust_domain, ttls)
                    .with_context(|| format!("--ca-dir {}", dir.display()))?;
                Some(Arc::new(store))
            }
            None => None,
        };
        let xds_tls = match &settings.xds_tls {
            Some((addr, tls)) => {
                let tls = TlsReloader::load(tls.clone(), ca.clone()).context("--xds-tls-addr")?;
                let listener =
                    xds_listener(*addr).with_context(|| format!("--xds-tls-addr {addr}"))?;
                Some((listener, Arc::new(tls)))
            }
            None => None,
        };
        let webhook = match &settings.webhook {
            Some((addr, tls)) => {
                let tls = TlsReloader::load(tls.clone(), ca.clone()).context("--webhook-addr")?;
                let listener = tokio::net::TcpListener::bind(addr)
                    .await
                    .with_context(|| format!("--webhook-addr {addr}"))?;
                Some((listener, Arc::new(tls)))
            }
            None => None,
        };
        let monitoring = tokio::net::TcpListener::bind(settings.monitoring_addr)
            .await
            .with_context(|| format!("--monitoring-addr {}", settings.monitoring_addr))?;
        let debug = tokio::net::TcpListener::bind(settings.debug_addr)
            .await
            .with_context(|| format!("--debug-addr {}", settings.debug_addr))?;
        let debug_token = match &settings.debug_token_file {
            Some(path) => {
                let token = std::fs::read_to_string(path)
                    .with_context(|| format!("--debug-token-file {}", path.display()))?;
                let token = token.trim();
                anyhow::ensure!(
                    !token.is_empty(),
                    "--debug-token-file {}: the file is empty",
                    path.display()
                );
                Some(Arc::<str>::from(token))
            }
            None => None,
        };
        Ok(Listeners {
            xds,
            xds_tls,
            webhook,
            monitoring,
            debug,
            debug_token,
            ca,
        })
    }
}

/// The xDS listener, with a backlog for a fleet reconnecting at once (a restart of axon):
/// tokio's default of 1,024 pending connections drops the SYNs of a 2,000-proxy storm.
fn xds_listener(addr: SocketAddr) -> std::io::Result<tokio::net::TcpListener> {
    let socket = if addr.is_ipv4() {
        tokio::net::TcpSocket::new_v4()?
    } else {
        tokio::net::TcpSocket::new_v6()?
    };
    socket.set_reuseaddr(true)?;
    socket.bind(addr)?;
    socket.listen(4096)
}
