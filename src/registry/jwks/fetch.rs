//! One bounded GET of a JWKS (or an OpenID discovery document), as istiod's resolver fetches
//! them (`getRemoteContentWithRetry`): http or https (the system's roots), within a time bound
//! for everything (resolve, connect, TLS, headers, body), the body read up to a size bound, a
//! status other than 200 a failure. Like istiod's dial guard, an address that resolves to a
//! link-local or cloud metadata IP is not connected to. Redirects are not followed.

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use http_body_util::{BodyExt, Empty, Limited};
use hyper::body::Bytes;
use hyper_util::rt::TokioIo;
use thiserror::Error;
use tokio::io::{AsyncRead, AsyncWrite};

#[derive(Debug, Error)]
pub enum FetchError {
    #[error("{0:?} is not an http or https URL")]
    Url(String),
    #[error("resolving {host}: {source}")]
    Resolve {
        host: String,
        source: std::io::Error,
    },
    #[error("{0} resolves to a blocked address (link-local or cloud metadata)")]
    Blocked(String),
    #[error("connecting to {addr}: {source}")]
    Connect {
        addr: SocketAddr,
        source: std::io::Error,
    },
    #[error("TLS: {0}")]
    Tls(std::io::Error),
    #[error("HTTP: {0}")]
    Http(#[from] hyper::Error),
    #[error("status {0}")]
    Status(u16),
    #[error("body larger than {0} bytes or unreadable")]
    Body(usize),
    #[error("body is not UTF-8")]
    Utf8,
    #[error("no answer within {0:?}")]
    Timeout(Duration),
    #[error("not a JWKS: {0}")]
    NotJwks(String),
    #[error("OpenID discovery document: {0}")]
    Discovery(String),
}

/// The client every fetch goes through: the TLS roots, the size bound.
#[derive(Clone)]
pub struct Fetcher {
    tls: tokio_rustls::TlsConnector,
    max_bytes: usize,
}

impl Fetcher {
    pub fn new(max_bytes: usize) -> Fetcher {
        let mut roots = rustls::RootCertStore::empty();
        let native = rustls_native_certs::load_native_certs();
        for cert in native.certs {
            // A root the system holds and rustls cannot read is left out.
            let _ = roots.add(cert);
        }
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let config = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .expect("ring supports the default protocol versions")
            .with_root_certificates(roots)
            .with_no_client_auth();
        Fetcher {
            tls: tokio_rustls::TlsConnector::from(Arc::new(config)),
            max_bytes,
        }
    }

    /// The body of `url`, within `timeout`.
    pub async fn get(&self, url: &str, timeout: Duration) -> Result<String, FetchError> {
        tokio::time::timeout(timeout, self.get_unbounded(url))
            .await
            .map_err(|_| FetchError::Timeout(timeout))?
    }

    async fn get_unbounded(&self, url: &str) -> Result<String, FetchError> {
        let uri: http::Uri = url.parse().map_err(|_| FetchError::Url(url.to_string()))?;
        let https = match uri.scheme_str() {
            Some("https") => true,
            Some("http") => false,
            _ => return Err(FetchError::Url(url.to_string())),
        };
        let host = uri
            .host()
            .ok_or_else(|| FetchError::Url(url.to_string()))?
            .trim_start_matches('[')
            .trim_end_matches(']')
            .to_string();
        let port = uri.port_u16().unwrap_or(if https { 443 } else { 80 });
        let addrs: Vec<SocketAddr> = tokio::net::lookup_host((host.as_str(), port))
            .await
            .map_err(|source| FetchError::Resolve {
                host: host.clone(),
                source,
            })?
            .filter(|a| !blocked(a.ip()))
            .collect();
        let Some(addr) = addrs.first().copied() else {
            return Err(FetchError::Blocked(host));
        };
        let tcp = tokio::net::TcpStream::connect(addr)
            .await
            .map_err(|source| FetchError::Connect { addr, source })?;
        let authority = uri
            .authority()
            .map(|a| a.as_str().to_string())
            .unwrap_or_else(|| host.clone());
        let path = uri
            .path_and_query()
            .map_or("/".to_string(), |p| p.as_str().to_string());
        if https {
            let name = rustls::pki_types::ServerName::try_from(host.clone())
                .map_err(|_| FetchError::Url(url.to_string()))?;
            let tls = self.tls.connect(name, tcp).await.map_err(FetchError::Tls)?;
            self.request(tls, &authority, &path).await
        } else {
            self.request(tcp, &authority, &path).await
        }
    }

    async fn request<S>(&self, io: S, authority: &str, path: &str) -> Result<String, FetchError>
    where
        S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    {
        let (mut sender, conn) =
            hyper::client::conn::http1::handshake::<_, Empty<Bytes>>(TokioIo::new(io)).await?;
        let driver = tokio::spawn(async move {
            let _ = conn.await;
        });
        let request = hyper::Request::get(path)
            .header(hyper::header::HOST, authority)
            .header(hyper::header::ACCEPT, "application/json")
            .header(hyper::header::CONNECTION, "close")
            .body(Empty::new())
            .map_err(|_| FetchError::Url(path.to_string()))?;
        let result = async {
            let response = sender.send_request(request).await?;
            if response.status() != hyper::StatusCode::OK {
                return Err(FetchError::Status(response.status().as_u16()));
            }
            let body = Limited::new(response.into_body(), self.max_bytes)
                .collect()
                .await
                .map_err(|_| FetchError::Body(self.max_bytes))?
                .to_bytes();
            String::from_utf8(body.to_vec()).map_err(|_| FetchError::Utf8)
        }
        .await;
        driver.abort();
        result
    }
}

/// istiod's `jwksBlockedIP`: link-local addresses (cloud instance metadata among them) and
/// the well-known metadata addresses outside that range.
fn blocked(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => v4.is_link_local() || v4.octets() == [100, 100, 100, 200],
        IpAddr::V6(v6) => {
            (v6.segments()[0] & 0xffc0) == 0xfe80
                || v6 == std::net::Ipv6Addr::new(0xfd00, 0xec2, 0, 0, 0, 0, 0, 0x254)
                || v6
                    .to_ipv4_mapped()
                    .is_some_and(|v4| blocked(IpAddr::V4(v4)))
        }
    }
}

/// istiod's `validateJWKSFormat`: a JSON object with a `keys` array, so that an arbitrary
/// answer is never inlined into a proxy's config.
pub fn check_jwks(body: &str) -> Result<(), FetchError> {
    let value: serde_json::Value =
        serde_json::from_str(body).map_err(|e| FetchError::NotJwks(format!("not JSON: {e}")))?;
    match value.get("keys") {
        Some(serde_json::Value::Array(_)) => Ok(()),
        Some(_) => Err(FetchError::NotJwks("\"keys\" is not an array".to_string())),
        None => Err(FetchError::NotJwks("missing \"keys\" field".to_string())),
    }
}

/// The `jwks_uri` of an OpenID discovery document.
pub fn discovered_jwks_uri(body: &str) -> Result<String, FetchError> {
    let value: serde_json::Value =
        serde_json::from_str(body).map_err(|e| FetchError::Discovery(format!("not JSON: {e}")))?;
    match value.get("jwks_uri") {
        Some(serde_json::Value::String(uri)) if !uri.is_empty() => Ok(uri.clone()),
        other => Err(FetchError::Discovery(format!(
            "invalid jwks_uri {}",
            other.map_or("(none)".to_string(), |v| v.to_string())
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocked_addresses_as_istiod() {
        for ip in [
            "169.254.169.254",
            "100.100.100.200",
            "fe80::1",
            "fd00:ec2::254",
        ] {
            assert!(blocked(ip.parse().unwrap()), "{ip}");
        }
        for ip in ["127.0.0.1", "10.0.0.1", "::1"] {
            assert!(!blocked(ip.parse().unwrap()), "{ip}");
        }
    }

    #[test]
    fn jwks_and_discovery_documents() {
        assert!(check_jwks(r#"{"keys": []}"#).is_ok());
        assert!(check_jwks(r#"{"keys": 1}"#).is_err());
        assert!(check_jwks("<html>").is_err());
        assert_eq!(
            discovered_jwks_uri(r#"{"issuer": "i", "jwks_uri": "https://i/keys"}"#).unwrap(),
            "https://i/keys"
        );
        assert!(discovered_jwks_uri(r#"{"issuer": "i"}"#).is_err());
    }
}
