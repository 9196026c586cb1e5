//! The endpoint addresses of the mesh, each with the service ports it serves: how a sidecar
//! finds its own workload's ports (by its IP).
//!
//! Sharded by a hash of the address, each shard behind an `Arc`: an endpoint-only update
//! copies only the shards holding the addresses of the changed services and shares the
//! others with the previous index, so moving one endpoint of a 10,000-endpoint mesh does not
//! copy 10,000 entries.

use std::collections::BTreeMap;
use std::sync::Arc;

use super::service::Endpoint;

/// `(hostname, service port, endpoint port)`.
pub type Served = (String, u32, u32);

const SHARDS: usize = 64;

type Shard = BTreeMap<String, Vec<Served>>;

#[derive(Debug, Clone, PartialEq)]
pub struct AddressIndex {
    shards: Vec<Arc<Shard>>,
}

impl Default for AddressIndex {
    fn default() -> Self {
        AddressIndex {
            shards: vec![Arc::default(); SHARDS],
        }
    }
}

fn shard_of(address: &str) -> usize {
    // A fixed (unkeyed) hash: equal indexes shard equally.
    (axon_config::hash::hash_text(address) % SHARDS as u64) as usize
}

impl AddressIndex {
    /// The index of every endpoint, in `(hostname, port)` order.
    pub fn build<'a>(
        by_service_port: impl IntoIterator<Item = (&'a (String, u32), &'a Arc<Vec<Endpoint>>)>,
    ) -> AddressIndex {
        let mut index = AddressIndex::default();
        for ((host, port), endpoints) in by_service_port {
            for ep in endpoints.iter() {
                index
                    .shard_mut(&ep.address)
                    .entry(ep.address.clone())
                    .or_default()
                    .push((host.clone(), *port, ep.port));
            }
        }
        index
    }

    fn shard_mut(&mut self, address: &str) -> &mut Shard {
        Arc::make_mut(&mut self.shards[shard_of(address)])
    }

    pub fn get(&self, address: &str) -> Option<&Vec<Served>> {
        self.shards[shard_of(address)].get(address)
    }

    /// This index with `host`'s endpoints replaced: `old` are the host's previous
    /// `(port, endpoints)`, `new` its current ones. Equal to a [`AddressIndex::build`] of the
    /// updated endpoints.
    pub fn replace_host<'a>(
        &self,
        host: &str,
        old: impl IntoIterator<Item = &'a Endpoint>,
        new: impl IntoIterator<Item = (u32, &'a Endpoint)>,
    ) -> AddressIndex {
        let mut index = self.clone();
        for ep in old {
            let shard = index.shard_mut(&ep.address);
            if let Some(served) = shard.get_mut(&ep.address) {
                served.retain(|(h, _, _)| h != host);
                if served.is_empty() {
                    shard.remove(&ep.address);
                }
            }
        }
        for (port, ep) in new {
            let served = index
                .shard_mut(&ep.address)
                .entry(ep.address.clone())
                .or_default();
            served.push((host.to_string(), port, ep.port));
            // As built: in (hostname, port) order, endpoints in their order within one.
            served.sort_by(|a, b| (&a.0, a.1).cmp(&(&b.0, b.1)));
        }
        index
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ep(address: &str, port: u32) -> Endpoint {
        Endpoint {
            address: address.into(),
            port,
            labels: Default::default(),
            weight: 1,
            locality: String::new(),
            network: String::new(),
            service_account: String::new(),
        }
    }

    fn map(
        entries: &[((&str, u32), Vec<Endpoint>)],
    ) -> BTreeMap<(String, u32), Arc<Vec<Endpoint>>> {
        entries
            .iter()
            .map(|((h, p), eps)| ((h.to_string(), *p), Arc::new(eps.clone())))
            .collect()
    }

    #[test]
    fn replacing_a_host_equals_a_rebuild_and_copies_only_touched_shards() {
        let before = map(&[
            (("a", 80), vec![ep("10.0.0.1", 8080), ep("10.0.0.2", 8080)]),
            (("b", 80), vec![ep("10.0.0.1", 9090)]),
            (
                ("c", 80),
                (3..200).map(|i| ep(&format!("10.0.1.{i}"), 80)).collect(),
            ),
        ]);
        let after = map(&[
            (("a", 80), vec![ep("10.0.0.1", 8080), ep("10.0.0.3", 8080)]),
            (("a", 81), vec![ep("10.0.0.3", 8081)]),
            (("b", 80), vec![ep("10.0.0.1", 9090)]),
            (
                ("c", 80),
                (3..200).map(|i| ep(&format!("10.0.1.{i}"), 80)).collect(),
            ),
        ]);
        let index = AddressIndex::build(&before);
        let old: Vec<&Endpoint> = before[&("a".to_string(), 80)].iter().collect();
        let new: Vec<(u32, &Endpoint)> = after
            .iter()
            .filter(|((h, _), _)| h == "a")
            .flat_map(|((_, p), eps)| eps.iter().map(move |e| (*p, e)))
            .collect();
        let updated = index.replace_host("a", old, new);
        assert_eq!(updated, AddressIndex::build(&after));
        assert_eq!(updated.get("10.0.0.2"), None);
        assert_eq!(
            updated.get("10.0.0.1").unwrap(),
            &vec![("a".to_string(), 80, 8080), ("b".to_string(), 80, 9090)]
        );
        let shared = (0..SHARDS)
            .filter(|&i| Arc::ptr_eq(&index.shards[i], &updated.shards[i]))
            .count();
        assert!(
            shared >= SHARDS - 3,
            "only the touched shards are copied: {shared}"
        );
    }
}
