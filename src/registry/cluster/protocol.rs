//! A Service port's protocol, as istiod reads it (`kube.ConvertProtocol`).
//!
//! `appProtocol`, when set, is read; otherwise the port name: its prefix before the first
//! `-` (or the whole of it) names the protocol: `http`, `http-web`, `grpc-api`, `tcp-db`.
//! A UDP port is UDP. A port whose protocol neither names is sniffed (empty: istiod's
//! `Unsupported`), but for the well-known TCP ports (SMTP, DNS, MySQL, MongoDB).

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

/// Ports that are TCP when nothing names their protocol (istiod's `wellKnownPorts`: SMTP,
/// DNS, MySQL, MongoDB).
const WELL_KNOWN_TCP_PORTS: [u32; 4] = [25, 53, 3306, 27017];

/// The protocol of Service port `number` from its `protocol` (TCP, UDP, SCTP), `appProtocol`
/// and name; empty when none is known: the port is sniffed (istiod's `Unsupported`).
pub fn port_protocol(
    number: u32,
    l4: Option<&str>,
    app_protocol: Option<&str>,
    name: Option<&str>,
) -> String {
    if l4.is_some_and(|p| p.eq_ignore_ascii_case("udp")) {
        return "UDP".to_string();
    }
    // `appProtocol`, when set, is read instead of the name.
    let name = match app_protocol {
        Some("kubernetes.io/h2c") => return "HTTP2".to_string(),
        Some("kubernetes.io/ws") => return "HTTP".to_string(),
        Some("kubernetes.io/wss") => return "HTTPS".to_string(),
        Some(app) => app,
        None => name.unwrap_or_default(),
    };
    // `grpc-web` is a protocol of its own, not `grpc` with a suffix.
    if name.len() >= 8 && name[..8].eq_ignore_ascii_case("grpc-web") {
        return "GRPC-WEB".to_string();
    }
    let prefix = name.split_once('-').map_or(name, |(p, _)| p);
    match istio_protocol(prefix) {
        Some(p) => p.to_string(),
        None if WELL_KNOWN_TCP_PORTS.contains(&number) => "TCP".to_string(),
        None => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn app_protocol_then_name_prefix() {
        let p = |l4, app, name| port_protocol(8080, l4, app, name);
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
        assert_eq!(p(None, Some("grpc"), Some("http")), "GRPC");
        assert_eq!(p(None, Some("kubernetes.io/h2c"), Some("web")), "HTTP2");
        assert_eq!(p(None, Some("kubernetes.io/wss"), Some("web")), "HTTPS");
        assert_eq!(p(Some("UDP"), None, Some("dns")), "UDP");
        assert_eq!(p(Some("TCP"), None, Some("udp-x")), "UDP");
        // Nothing known: sniffed, as istiod's `Unsupported` (an unknown appProtocol too:
        // the name is not read then).
        assert_eq!(p(None, None, Some("web")), "");
        assert_eq!(p(None, None, None), "");
        assert_eq!(p(None, Some("unknown"), Some("http")), "");
        // ...but for the well-known TCP ports.
        assert_eq!(port_protocol(3306, None, None, Some("db")), "TCP");
        assert_eq!(port_protocol(27017, None, None, None), "TCP");
    }
}
