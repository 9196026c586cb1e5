//! [`Registry`]: what a mesh and its pods share: the live pods and the services' names, by
//! which pods resolve hosts ([`Registry::resolve`], for the test's own clients) and the
//! `/etc/netns/NS/hosts` and `resolv.conf` that `ip netns exec` mounts over a pod's `/etc`
//! ([`Registry::write_etc_files`], rewritten whenever a pod or a service is added).

use std::collections::BTreeMap;
use std::fs;
use std::net::Ipv4Addr;
use std::sync::Mutex;

use super::netns;

/// The live pods and the services' names of a mesh.
#[derive(Default)]
pub(super) struct Registry {
    /// Service hostnames (every form a pod may use) and their ClusterIPs.
    pub(super) services: Mutex<BTreeMap<String, Ipv4Addr>>,
    /// The live pods: netns name → (pod namespace, pod name, IP).
    pub(super) pods: Mutex<BTreeMap<String, (String, String, Ipv4Addr)>>,
}

impl Registry {
    /// The IP of `host` as a pod in `namespace` resolves it: an IP is itself; a service by any
    /// of its names; a short name in the pod's namespace.
    pub(super) fn resolve(&self, namespace: &str, host: &str) -> Option<Ipv4Addr> {
        if let Ok(ip) = host.parse() {
            return Some(ip);
        }
        let services = self.services.lock().unwrap();
        services
            .get(host)
            .or_else(|| services.get(&format!("{host}.{namespace}")))
            .copied()
    }

    /// Writes `/etc/netns/NS/hosts` (and `resolv.conf`) of every live pod.
    pub(super) fn write_etc_files(&self) {
        let pods = self.pods.lock().unwrap().clone();
        let services = self.services.lock().unwrap().clone();
        for (netns_name, (namespace, pod_name, ip)) in pods {
            let mut text = format!("127.0.0.1 localhost\n{ip} {pod_name}\n");
            for (host, vip) in &services {
                text.push_str(&format!("{vip} {host}\n"));
                if let Some(short) = host.strip_suffix(&format!(".{namespace}"))
                    && !short.contains('.')
                {
                    text.push_str(&format!("{vip} {short}\n"));
                }
            }
            let dir = netns::etc_dir(&netns_name);
            fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("create {}: {e}", dir.display()));
            // No DNS server in a pod: a lookup missing from `hosts` fails at once (loopback
            // refuses it) instead of waiting on the machine's nameserver, unreachable here.
            let resolv = "# a mesh pod: names come from /etc/hosts\nnameserver 127.0.0.1\n\
                          options timeout:1 attempts:1\n";
            for (file, text) in [("hosts", text.as_str()), ("resolv.conf", resolv)] {
                let path = dir.join(file);
                fs::write(&path, text).unwrap_or_else(|e| panic!("write {}: {e}", path.display()));
            }
        }
    }
}
