//! One simulated proxy's protocol state machine: what it subscribes (CDS wildcard → EDS for
//! the EDS clusters → LDS wildcard → RDS for the route names), what it ACKs, and what it
//! has, kept across its streams (`State`) so that a proxy that reconnects resumes as Envoy
//! does: SotW, a request per type it had naming the last ACKed `version_info` with an empty
//! nonce; Delta, `initial_resource_versions` per type.

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;
use std::sync::PoisonError;
use std::sync::atomic::Ordering;

use bytes::Bytes;
use prost::Message;

use super::{Ack, Shared};
use crate::wire::{self, CDS, LDS, TYPES};

/// Per-type protocol state.
#[derive(Default)]
struct TypeState {
    version: String,
    /// The last nonce of this stream (cleared on a new stream).
    nonce: String,
    /// Subscribed names (EDS, RDS); shared between proxies with the same list.
    names: Option<Arc<Vec<String>>>,
    acked: bool,
}

/// What one proxy has and subscribes, across its streams.
#[derive(Default)]
pub(super) struct State {
    types: [TypeState; 4],
    /// Delta: the subscribed EDS and RDS names.
    delta_eds: Option<Arc<Vec<String>>>,
    delta_rds: Option<Arc<Vec<String>>>,
    lds_requested: bool,
    /// Delta, when resuming (`State::resuming`): name → version of what the proxy has, per type.
    have: Option<Box<[HashMap<String, String>; 4]>>,
}

impl State {
    /// A state that keeps the Delta resource versions, to resume with them.
    pub(super) fn resuming() -> State {
        State {
            have: Some(Default::default()),
            ..Default::default()
        }
    }

    /// Whether the proxy has something to resume (a CDS response was ACKed).
    pub(super) fn has_any(&self) -> bool {
        self.types[0].acked
    }

    /// The first requests of a stream: a fresh wildcard CDS with the node, or, when the
    /// proxy has something, what Envoy sends on reconnecting: each subscribed type with
    /// what it has, the node on the first.
    pub(super) fn first_requests(&mut self, delta: bool, node: &[u8]) -> Vec<Bytes> {
        for t in &mut self.types {
            t.nonce.clear();
        }
        if !self.has_any() {
            return vec![if delta {
                wire::delta_request(CDS, "", &[], &[], Some(node))
            } else {
                wire::sotw_request(CDS, "", "", &[], Some(node))
            }];
        }
        let subscribed = |names: &Option<Arc<Vec<String>>>| names.clone().filter(|n| !n.is_empty());
        let (eds, rds) = if delta {
            (subscribed(&self.delta_eds), subscribed(&self.delta_rds))
        } else {
            (
                subscribed(&self.types[1].names),
                subscribed(&self.types[3].names),
            )
        };
        let lds = self.lds_requested.then(Arc::default);
        let wanted = [Some(Arc::default()), eds, lds, rds];
        let empty = HashMap::new();
        let mut out = Vec::new();
        for (ty, names) in wanted.iter().enumerate() {
            let Some(names) = names else { continue };
            let node = out.is_empty().then_some(node);
            out.push(if delta {
                let have = self.have.as_ref().map_or(&empty, |h| &h[ty]);
                wire::delta_resume_request(TYPES[ty], names, have, node)
            } else {
                wire::sotw_request(TYPES[ty], &self.types[ty].version, "", names, node)
            });
        }
        out
    }
}

/// One stream of one proxy.
pub(super) struct Proxy<'a> {
    pub j: usize,
    pub shared: &'a Shared,
    pub delta: bool,
    pub state: &'a mut State,
    /// A stream after the proxy's first: its bytes count as resume bytes.
    pub resumed: bool,
}

impl Proxy<'_> {
    /// Handles one response; returns the requests to send, in order.
    pub(super) fn on_message(&mut self, msg: Bytes) -> anyhow::Result<Vec<Bytes>> {
        let stat = &self.shared.proxies[self.j];
        stat.bytes.fetch_add(msg.len() as u64, Ordering::Relaxed);
        let (version, type_url, nonce) = if self.delta {
            let h = wire::DeltaHeader::decode(msg.clone())?;
            (h.system_version_info, h.type_url, h.nonce)
        } else {
            let h = wire::SotwHeader::decode(msg.clone())?;
            (h.version_info, h.type_url, h.nonce)
        };
        let Some(ty) = wire::type_index(&type_url) else {
            anyhow::bail!("unexpected type {type_url}");
        };
        stat.bytes_by_type[ty].fetch_add(msg.len() as u64, Ordering::Relaxed);
        if let Some(cap) = &stat.captured {
            let mut cap = cap.lock().unwrap_or_else(PoisonError::into_inner);
            if cap[ty].is_none() {
                cap[ty] = Some(msg.clone());
            }
        }
        if self.resumed {
            stat.resume_bytes
                .fetch_add(msg.len() as u64, Ordering::Relaxed);
            if !self.delta {
                let n = wire::SotwResources::decode(msg.clone())?.resources.len();
                stat.resume_resources.fetch_add(n as u64, Ordering::Relaxed);
            }
        }
        let mut out = Vec::new();
        if self.delta {
            self.on_delta(ty, &msg, &mut out)?;
            out.push(wire::delta_request(TYPES[ty], &nonce, &[], &[], None));
        } else {
            self.on_sotw(ty, &msg, &mut out)?;
            // Wildcard types (CDS, LDS) are ACKed with no names.
            let names = match ty {
                1 | 3 => self.state.types[ty].names.clone().unwrap_or_default(),
                _ => Arc::default(),
            };
            out.push(wire::sotw_request(
                TYPES[ty], &version, &nonce, &names, None,
            ));
        }
        drop(msg);
        let st = &mut self.state.types[ty];
        st.version = version;
        st.nonce = nonce;
        st.acked = true;
        // After the first EDS (clusters warmed), or a CDS without EDS clusters, ask for
        // listeners.
        let no_eds = !self.eds_needed();
        if (ty == 1 || (ty == 0 && no_eds)) && !self.state.lds_requested {
            self.state.lds_requested = true;
            out.push(if self.delta {
                wire::delta_request(LDS, "", &[], &[], None)
            } else {
                wire::sotw_request(LDS, "", "", &[], None)
            });
        }
        self.record(ty);
        Ok(out)
    }

    fn eds_needed(&self) -> bool {
        let s = &self.state;
        s.types[1].names.as_ref().is_some_and(|n| !n.is_empty())
            || s.delta_eds.as_ref().is_some_and(|n| !n.is_empty())
    }

    fn record(&mut self, ty: usize) {
        let shared = self.shared;
        let stat = &shared.proxies[self.j];
        let v = &self.state.types[ty].version;
        let version = if self.delta {
            v.parse::<u64>().unwrap_or(0)
        } else {
            u64::from_str_radix(v, 16).unwrap_or(0)
        };
        stat.acks
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(Ack {
                at_us: shared.now_us(),
                version,
                ty: ty as u8,
            });
        shared.total_acks.fetch_add(1, Ordering::Relaxed);
        let s = &self.state;
        let eds_needed = self.eds_needed();
        let rds_needed = s.types[3].names.as_ref().is_some_and(|n| !n.is_empty())
            || s.delta_rds.as_ref().is_some_and(|n| !n.is_empty());
        let synced = s.types[0].acked
            && (s.types[1].acked || !eds_needed)
            && s.types[2].acked
            && (s.types[3].acked || !rds_needed);
        if synced && stat.synced_us.load(Ordering::Relaxed) == 0 {
            stat.synced_us
                .store(shared.now_us().max(1), Ordering::Relaxed);
            stat.sync_bytes
                .store(stat.bytes.load(Ordering::Relaxed), Ordering::Relaxed);
            shared.synced.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// SotW: on CDS, (re)subscribe EDS if the EDS names changed; on LDS, RDS likewise.
    /// `types[1].names` / `types[3].names` keep the referenced names (the wildcard types
    /// themselves are ACKed with no names).
    fn on_sotw(&mut self, ty: usize, msg: &Bytes, out: &mut Vec<Bytes>) -> anyhow::Result<()> {
        let (target, names) = match ty {
            0 => {
                let r = wire::SotwResources::decode(msg.clone())?;
                let mut names: Vec<String> = r
                    .resources
                    .iter()
                    .filter_map(|a| wire::eds_name(&a.value))
                    .collect();
                names.sort();
                (1, names)
            }
            2 => {
                let r = wire::SotwResources::decode(msg.clone())?;
                let mut names = Vec::new();
                for a in &r.resources {
                    wire::route_names(&a.value, &mut names);
                }
                names.sort();
                names.dedup();
                (3, names)
            }
            _ => return Ok(()),
        };
        let types = &mut self.state.types;
        let changed = types[target]
            .names
            .as_ref()
            .is_none_or(|old| **old != names);
        if changed {
            let names = self.shared.intern(names);
            let t = &types[target];
            if !names.is_empty() || t.names.is_some() {
                out.push(wire::sotw_request(
                    TYPES[target],
                    &t.version,
                    &t.nonce,
                    &names,
                    None,
                ));
            }
            types[target].names = Some(names);
        }
        Ok(())
    }

    /// Delta: keeps the versions of what the proxy has (when resuming); on CDS, subscribes
    /// new EDS names and unsubscribes removed ones; LDS → RDS.
    fn on_delta(&mut self, ty: usize, msg: &Bytes, out: &mut Vec<Bytes>) -> anyhow::Result<()> {
        let shared = self.shared;
        let tracked = self.state.have.is_some();
        if !tracked && !matches!(ty, 0 | 2) && !self.resumed {
            return Ok(());
        }
        let r = wire::DeltaResources::decode(msg.clone())?;
        if self.resumed {
            shared.proxies[self.j]
                .resume_resources
                .fetch_add(r.resources.len() as u64, Ordering::Relaxed);
        }
        if let Some(have) = &mut self.state.have {
            let have = &mut have[ty];
            for name in &r.removed_resources {
                have.remove(name);
            }
            for res in &r.resources {
                have.insert(res.name.clone(), res.version.clone());
            }
        }
        let (target, slot) = match ty {
            0 => (1, &mut self.state.delta_eds),
            2 => (3, &mut self.state.delta_rds),
            _ => return Ok(()),
        };
        let old: BTreeSet<String> = slot
            .as_ref()
            .map(|s| s.iter().cloned().collect())
            .unwrap_or_default();
        let mut new = old.clone();
        for name in &r.removed_resources {
            new.remove(name);
        }
        for res in &r.resources {
            let Some(any) = &res.resource else { continue };
            if ty == 0 {
                match wire::eds_name(&any.value) {
                    Some(n) => {
                        new.insert(n);
                    }
                    None => {
                        new.remove(&res.name);
                    }
                }
            } else {
                let mut names = Vec::new();
                wire::route_names(&any.value, &mut names);
                new.extend(names);
            }
        }
        let subscribe: Vec<String> = new.difference(&old).cloned().collect();
        let unsubscribe: Vec<String> = old.difference(&new).cloned().collect();
        if !subscribe.is_empty() || !unsubscribe.is_empty() || slot.is_none() {
            if !subscribe.is_empty() || !unsubscribe.is_empty() {
                out.push(wire::delta_request(
                    TYPES[target],
                    "",
                    &subscribe,
                    &unsubscribe,
                    None,
                ));
            }
            *slot = Some(shared.intern(new.into_iter().collect()));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use envoy_types::pb::envoy::service::discovery::v3::{DeltaDiscoveryRequest, DiscoveryRequest};

    use super::*;
    use crate::wire::{EDS, RDS};

    fn decode<M: Message + Default>(frame: &Bytes) -> M {
        M::decode(&frame[5..]).unwrap()
    }

    /// A proxy that has every type: CDS and LDS wildcard, EDS `e1`, RDS `r1`.
    fn synced(delta: bool) -> State {
        let mut s = State::resuming();
        for (ty, v) in ["c", "e", "l", "r"].into_iter().enumerate() {
            s.types[ty].version = v.to_string();
            s.types[ty].nonce = "n".to_string();
            s.types[ty].acked = true;
        }
        let (eds, rds) = (
            Arc::new(vec!["e1".to_string()]),
            Arc::new(vec!["r1".to_string()]),
        );
        if delta {
            s.delta_eds = Some(eds);
            s.delta_rds = Some(rds);
        } else {
            s.types[1].names = Some(eds);
            s.types[3].names = Some(rds);
        }
        s.lds_requested = true;
        let have = s.have.as_mut().unwrap();
        have[0].insert("c1".to_string(), "v-c1".to_string());
        have[1].insert("e1".to_string(), "v-e1".to_string());
        s
    }

    #[test]
    fn a_fresh_proxy_asks_for_clusters_with_its_node() {
        let out = State::resuming().first_requests(false, b"");
        assert_eq!(out.len(), 1);
        let r: DiscoveryRequest = decode(&out[0]);
        assert_eq!((r.type_url.as_str(), r.version_info.as_str()), (CDS, ""));
        assert!(r.node.is_some());
    }

    #[test]
    fn a_sotw_proxy_resumes_each_type_at_its_acked_version_with_no_nonce() {
        let mut s = synced(false);
        let out = s.first_requests(false, b"");
        let reqs: Vec<DiscoveryRequest> = out.iter().map(decode).collect();
        let got: Vec<_> = reqs
            .iter()
            .map(|r| {
                (
                    r.type_url.as_str(),
                    r.version_info.as_str(),
                    r.response_nonce.as_str(),
                    r.resource_names.clone(),
                    r.node.is_some(),
                )
            })
            .collect();
        let names = |n: &str| vec![n.to_string()];
        assert_eq!(
            got,
            vec![
                (CDS, "c", "", vec![], true),
                (EDS, "e", "", names("e1"), false),
                (LDS, "l", "", vec![], false),
                (RDS, "r", "", names("r1"), false),
            ]
        );
        assert!(s.types.iter().all(|t| t.nonce.is_empty() && t.acked));
    }

    #[test]
    fn a_delta_proxy_resumes_with_its_initial_resource_versions() {
        let mut s = synced(true);
        let out = s.first_requests(true, b"");
        let reqs: Vec<DeltaDiscoveryRequest> = out.iter().map(decode).collect();
        assert_eq!(reqs.len(), 4);
        assert!(reqs[0].node.is_some() && reqs[1..].iter().all(|r| r.node.is_none()));
        assert_eq!(reqs[0].type_url, CDS);
        assert!(reqs[0].resource_names_subscribe.is_empty(), "wildcard");
        assert_eq!(reqs[0].initial_resource_versions["c1"], "v-c1");
        assert_eq!(reqs[1].type_url, EDS);
        assert_eq!(reqs[1].resource_names_subscribe, vec!["e1".to_string()]);
        assert_eq!(reqs[1].initial_resource_versions["e1"], "v-e1");
        assert_eq!(reqs[3].type_url, RDS);
        assert_eq!(reqs[3].resource_names_subscribe, vec!["r1".to_string()]);
        assert!(reqs.iter().all(|r| r.response_nonce.is_empty()));
    }

    #[test]
    fn a_delta_proxy_keeps_each_version_and_forgets_removed_resources() {
        use envoy_types::pb::envoy::service::discovery::v3::{DeltaDiscoveryResponse, Resource};
        use envoy_types::pb::google::protobuf::Any;
        let shared = Shared::new(1, |_| false);
        let mut state = State::resuming();
        let response = |resources: Vec<(&str, &str)>, removed: Vec<&str>| {
            Bytes::from(
                DeltaDiscoveryResponse {
                    system_version_info: "1".into(),
                    type_url: EDS.into(),
                    nonce: "n".into(),
                    resources: resources
                        .into_iter()
                        .map(|(name, version)| Resource {
                            name: name.into(),
                            version: version.into(),
                            resource: Some(Any {
                                type_url: EDS.into(),
                                value: vec![],
                            }),
                            ..Default::default()
                        })
                        .collect(),
                    removed_resources: removed.into_iter().map(String::from).collect(),
                    ..Default::default()
                }
                .encode_to_vec(),
            )
        };
        let mut proxy = Proxy {
            j: 0,
            shared: &shared,
            delta: true,
            state: &mut state,
            resumed: true,
        };
        proxy
            .on_message(response(vec![("a", "1"), ("b", "1")], vec![]))
            .unwrap();
        proxy
            .on_message(response(vec![("a", "2")], vec!["b"]))
            .unwrap();
        let have = &state.have.as_ref().unwrap()[1];
        assert_eq!(have.len(), 1, "{have:?}");
        assert_eq!(have["a"], "2");
        let stat = &shared.proxies[0];
        assert_eq!(stat.resume_resources.load(Ordering::Relaxed), 3);
        assert_eq!(
            stat.resume_bytes.load(Ordering::Relaxed),
            stat.bytes.load(Ordering::Relaxed)
        );
    }
}
