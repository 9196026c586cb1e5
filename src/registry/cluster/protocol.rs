//! A Service port's protocol, as istiod reads it (`kube.ConvertProtocol`).
//!
//! `appProtocol` wins when it names a protocol Istio knows; otherwise the port name's prefix
//! before the first `-` (or the whole name) does: `http`, `http-web`, `grpc-api`, `tcp-db`.
//! A UDP port is UDP. Anything else is TCP (istiod would sniff; axon cannot).

/// Istio's name for a protocol string, case-insensitive; `None` if it is not one.
fn istio_protocol(name: &str) -> Option<&'static str> {
    Some(match name.to_ascii_lowercase().as_str() {
        "http" | "kubernetes.io/ws" | "kubernetes.io/wss" => "HTTP",
        "http2" | "kubernetes.io/h2c" => "HTTP2",
        "grpc" => "GRPC",
        "grpc-web" => "GRPC-WEB",
        "https" => "HTTPS",
        "tls" => "TLS",
        "tcp" => "TCP",
        "mongo" => "MONGO",
        "redis" => "REDIS",
        "mysql" => "MYSQL",
        "udp" => "UDP",
        _ => return None,
    })
}

/// The protocol of a Service port from its `protocol` (TCP, UDP, SCTP), `appProtocol` and
/// name.
pub fn port_protocol(l4: Option<&str>, app_protocol: Option<&str>, name: Option<&str>) -> String {
    if l4.is_some_and(|p| p.eq_ignore_ascii_case("udp")) {
        return "UDP".to_string();
    }
    let from_app = app_protocol.and_then(istio_protocol);
    let from_name = || {
        let name = name?;
        // `grpc-web` is a protocol of its own, not `grpc` with a suffix.
        istio_protocol(name)
            .or_else(|| name.strip_prefix("grpc-web-").map(|_| "GRPC-WEB"))
            .or_else(|| name.split_once('-').and_then(|(p, _)| istio_protocol(p)))
    };
    from_app
        .or_else(from_name)
        .filter(|p| *p != "UDP")
        .unwrap_or("TCP")
        .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn app_protocol_then_name_prefix() {
        let p = |l4, app, name| port_protocol(l4, app, name);
        assert_eq!(p(None, None, Some("http")), "HTTP");
        assert_eq!(p(None, None, Some("http-web")), "HTTP");
        assert_eq!(p(None, None, Some("HTTP2-x")), "HTTP2");
        assert_eq!(p(None, None, Some("grpc-api")), "GRPC");
        assert_eq!(p(None, None, Some("grpc-web")), "GRPC-WEB");
        assert_eq!(p(None, None, Some("grpc-web-ui")), "GRPC-WEB");
        assert_eq!(p(None, None, Some("https-admin")), "HTTPS");
        assert_eq!(p(None, None, Some("mongo")), "MONGO");
        assert_eq!(p(None, None, Some("redis-cache")), "REDIS");
        assert_eq!(p(None, None, Some("mysql")), "MYSQL");
        assert_eq!(p(None, None, Some("tls-passthrough")), "TLS");
        assert_eq!(p(None, None, Some("web")), "TCP");
        assert_eq!(p(None, None, None), "TCP");
        assert_eq!(p(None, Some("grpc"), Some("http")), "GRPC");
        assert_eq!(p(None, Some("kubernetes.io/h2c"), Some("web")), "HTTP2");
        assert_eq!(p(None, Some("unknown"), Some("http")), "HTTP");
        assert_eq!(p(Some("UDP"), None, Some("dns")), "UDP");
        assert_eq!(p(Some("TCP"), None, Some("udp-x")), "TCP");
    }
}
