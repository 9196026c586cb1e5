//! The listeners, bound (and the TLS files and the debug token read) before anything is
//! started, so that a port in use or a file that does not read fails the start-up alone.

use std::net::SocketAddr;
use std::sync::Arc;

use anyhow::Context as _;

use super::Settings;
use axon_transport::tls::TlsReloader;

/// Every listener of a [`Settings`], bound.
pub struct Listeners {
    pub xds: Option<tokio::net::TcpListener>,
    pub xds_tls: Option<(tokio::net::TcpListener, Arc<TlsReloader>)>,
    pub monitoring: tokio::net::TcpListener,
    pub debug: tokio::net::TcpListener,
    pub debug_token: Option<Arc<str>>,
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
        let xds_tls = match &settings.xds_tls {
            Some((addr, files)) => {
                let tls = TlsReloader::load(files.clone()).context("--xds-tls-addr")?;
                let listener =
                    xds_listener(*addr).with_context(|| format!("--xds-tls-addr {addr}"))?;
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
            monitoring,
            debug,
            debug_token,
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
