//! One filter chain of a sidecar's outbound listener (istiod's `filterChainOpts`): what it
//! matches (SNI hosts, destination CIDRs, the sniffed HTTP ALPNs over `raw_buffer`), what it
//! carries (network filters, or an HTTP connection manager over RDS), and when two chains
//! match alike (istiod's `conflictsWith`).

use envoy_types::pb::envoy::config::core::v3::CidrRange;
use envoy_types::pb::envoy::config::listener::v3::{Filter, FilterChainMatch};
use envoy_types::pb::google::protobuf::UInt32Value;

use super::super::cidr_range;
use super::super::sidecar_l4::ChainOpts;
use super::{PLAINTEXT_HTTP_ALPNS, RAW_BUFFER};

/// What a chain does: a network filter stack, or an HTTP connection manager whose routes
/// come over RDS under the given name.
#[derive(Debug, Clone)]
pub(super) enum Body {
    Tcp(Vec<Filter>),
    Http(String),
}

/// One filter chain (istiod's `filterChainOpts`).
#[derive(Debug, Clone)]
pub(super) struct Chain {
    pub(super) sni_hosts: Vec<String>,
    pub(super) cidrs: Vec<String>,
    /// Matches the sniffed plaintext HTTP ALPNs over `raw_buffer`.
    pub(super) sniffed_http: bool,
    pub(super) body: Body,
}

impl Chain {
    /// A TCP or TLS chain: its route's destination subnets, else the listener's CIDRs.
    pub(super) fn tcp(opts: ChainOpts, cidrs: &[String]) -> Chain {
        Chain {
            sni_hosts: opts.sni_hosts,
            cidrs: if opts.destination_subnets.is_empty() {
                cidrs.to_vec()
            } else {
                opts.destination_subnets
            },
            sniffed_http: false,
            body: Body::Tcp(opts.filters),
        }
    }

    pub(super) fn http(rds: String, sniffed: bool) -> Chain {
        Chain {
            sni_hosts: Vec::new(),
            cidrs: Vec::new(),
            sniffed_http: sniffed,
            body: Body::Http(rds),
        }
    }

    /// istiod's `isMatchAll`.
    pub(super) fn match_all(&self) -> bool {
        (self.sni_hosts.is_empty() || self.sni_hosts.iter().any(|h| h == "*"))
            && !self.sniffed_http
            && self.cidrs.is_empty()
    }

    /// istiod's `conflictsWith`: the same match (SNI hosts in any order, `*` ignored; CIDRs
    /// by their masked prefix); as Envoy also refuses two chains matching one server name,
    /// chains sharing an SNI host (`sidecar_l4::ChainOpts::conflicts_with`).
    pub(super) fn conflicts_with(&self, other: &Chain) -> bool {
        if self.sniffed_http != other.sniffed_http {
            return false;
        }
        let cidrs = |c: &Chain| {
            c.cidrs
                .iter()
                .filter_map(|c| cidr_range(c))
                .filter(|(a, _)| a != "0.0.0.0")
                .collect::<std::collections::BTreeSet<_>>()
        };
        if cidrs(self) != cidrs(other) {
            return false;
        }
        let sni = |c: &Chain| ChainOpts {
            sni_hosts: c.sni_hosts.clone(),
            destination_subnets: Vec::new(),
            filters: Vec::new(),
        };
        sni(self).conflicts_with(&sni(other))
    }

    pub(super) fn filter_chain_match(&self) -> FilterChainMatch {
        let mut server_names: Vec<String> = if self.sni_hosts.iter().any(|h| h == "*") {
            Vec::new()
        } else {
            self.sni_hosts.clone()
        };
        server_names.sort();
        let mut cidrs = self.cidrs.clone();
        cidrs.sort();
        FilterChainMatch {
            server_names,
            prefix_ranges: cidrs
                .iter()
                .filter_map(|c| cidr_range(c))
                .filter(|(a, _)| a != "0.0.0.0")
                .map(|(address_prefix, len)| CidrRange {
                    address_prefix,
                    prefix_len: Some(UInt32Value { value: len }),
                })
                .collect(),
            application_protocols: if self.sniffed_http {
                PLAINTEXT_HTTP_ALPNS.iter().map(|s| s.to_string()).collect()
            } else {
                Vec::new()
            },
            transport_protocol: if self.sniffed_http {
                RAW_BUFFER.to_string()
            } else {
                String::new()
            },
            ..Default::default()
        }
    }
}
