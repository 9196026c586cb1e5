//! The mesh generator: a config directory for a synthetic mesh that axon loads.
//!
//! Service `i` is `svc-i` in namespace `ns-(i % namespaces)`, a STATIC ServiceEntry with one
//! HTTP port 80 and `endpoints` inline endpoints on `10.a.b.e` (labels `version: v1|v2`).
//! The first `destination_rules` services get a DestinationRule with subsets v1/v2; the first
//! `virtual_services` a VirtualService with a weighted route (v1/v2 when there is a
//! DestinationRule, else one destination). The first `round(sidecar_share × namespaces)`
//! namespaces get a Sidecar `default` with `egress: [{hosts: ["./*"]}]`.
//! One file per config, so that an edit is one file write.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use clap::Args;

#[derive(Args, Debug, Clone)]
pub struct MeshArgs {
    /// A preset: `mesh-1k` (1,000 services, 10 namespaces, 10 endpoints, 200 VirtualServices,
    /// 200 DestinationRules); the flags below override it.
    #[arg(long, default_value = "mesh-1k")]
    pub mesh: String,
    #[arg(long)]
    pub services: Option<usize>,
    #[arg(long)]
    pub namespaces: Option<usize>,
    #[arg(long)]
    pub endpoints: Option<usize>,
    #[arg(long)]
    pub virtual_services: Option<usize>,
    #[arg(long)]
    pub destination_rules: Option<usize>,
    /// Share of namespaces (hence of proxies) under a Sidecar `./*`, 0 to 1.
    #[arg(long)]
    pub sidecar_share: Option<f64>,
}

/// The sizes of a synthetic mesh.
#[derive(Debug, Clone, PartialEq)]
pub struct Mesh {
    pub services: usize,
    pub namespaces: usize,
    pub endpoints: usize,
    pub virtual_services: usize,
    pub destination_rules: usize,
    pub sidecar_share: f64,
}

impl Mesh {
    pub fn preset(name: &str) -> anyhow::Result<Mesh> {
        match name {
            "mesh-1k" => Ok(Mesh {
                services: 1000,
                namespaces: 10,
                endpoints: 10,
                virtual_services: 200,
                destination_rules: 200,
                sidecar_share: 0.0,
            }),
            "mesh-100" => Ok(Mesh {
                services: 100,
                namespaces: 10,
                endpoints: 10,
                virtual_services: 20,
                destination_rules: 20,
                sidecar_share: 0.0,
            }),
            other => anyhow::bail!("unknown mesh preset {other:?} (mesh-1k, mesh-100)"),
        }
    }

    pub fn from_args(a: &MeshArgs) -> anyhow::Result<Mesh> {
        let mut m = Mesh::preset(&a.mesh)?;
        if let Some(s) = a.services {
            // Scale the routing configs with the services unless they are given.
            m.virtual_services = m.virtual_services * s / m.services.max(1);
            m.destination_rules = m.destination_rules * s / m.services.max(1);
            m.services = s;
        }
        m.namespaces = a.namespaces.unwrap_or(m.namespaces).max(1);
        m.endpoints = a.endpoints.unwrap_or(m.endpoints).clamp(1, 250);
        m.virtual_services = a.virtual_services.unwrap_or(m.virtual_services);
        m.destination_rules = a.destination_rules.unwrap_or(m.destination_rules);
        m.sidecar_share = a.sidecar_share.unwrap_or(m.sidecar_share).clamp(0.0, 1.0);
        anyhow::ensure!(m.services <= 250 * 250, "at most 62,500 services");
        m.virtual_services = m.virtual_services.min(m.services);
        m.destination_rules = m.destination_rules.min(m.services);
        Ok(m)
    }

    pub fn namespace_of(&self, service: usize) -> usize {
        service % self.namespaces
    }

    pub fn host(&self, i: usize) -> String {
        format!("svc-{i}.ns-{}.svc.cluster.local", self.namespace_of(i))
    }

    /// Namespaces with a Sidecar: the first `round(share × namespaces)`.
    pub fn sidecar_namespaces(&self) -> usize {
        (self.sidecar_share * self.namespaces as f64).round() as usize
    }

    pub fn service_entry(&self, i: usize, generation: usize) -> String {
        let ns = self.namespace_of(i);
        let (a, b) = (i / 250, i % 250);
        let mut out = format!(
            "apiVersion: networking.istio.io/v1\nkind: ServiceEntry\n\
             metadata: {{name: svc-{i}, namespace: ns-{ns}}}\nspec:\n  hosts: [{host}]\n  \
             location: MESH_INTERNAL\n  resolution: STATIC\n  \
             ports: [{{number: 80, name: http, protocol: HTTP}}]\n  endpoints:\n",
            host = self.host(i)
        );
        for e in 0..self.endpoints {
            // An edit moves the first endpoint (an EDS-only change).
            let last = if e == 0 {
                1 + (generation % 4) * 60
            } else {
                e + 1
            };
            let version = if e % 2 == 0 { "v1" } else { "v2" };
            let _ = writeln!(
                out,
                "  - {{address: 10.{a}.{b}.{last}, labels: {{app: svc-{i}, version: {version}}}}}"
            );
        }
        out
    }

    pub fn destination_rule(&self, i: usize) -> String {
        let ns = self.namespace_of(i);
        format!(
            "apiVersion: networking.istio.io/v1\nkind: DestinationRule\n\
             metadata: {{name: svc-{i}, namespace: ns-{ns}}}\nspec:\n  host: {host}\n  \
             subsets:\n  - {{name: v1, labels: {{version: v1}}}}\n  \
             - {{name: v2, labels: {{version: v2}}}}\n",
            host = self.host(i)
        )
    }

    /// A VirtualService with a weighted route; `weight` (0..=100) goes to v1.
    pub fn virtual_service(&self, i: usize, weight: usize) -> String {
        let ns = self.namespace_of(i);
        let host = self.host(i);
        let route = if i < self.destination_rules {
            format!(
                "    - {{destination: {{host: {host}, subset: v1}}, weight: {weight}}}\n    \
                 - {{destination: {{host: {host}, subset: v2}}, weight: {}}}\n",
                100 - weight.min(100)
            )
        } else {
            format!("    - {{destination: {{host: {host}}}, weight: 100}}\n")
        };
        format!(
            "apiVersion: networking.istio.io/v1\nkind: VirtualService\n\
             metadata: {{name: svc-{i}, namespace: ns-{ns}}}\nspec:\n  hosts: [{host}]\n  \
             http:\n  - name: split-{weight}\n    route:\n{route}"
        )
    }

    pub fn sidecar(&self, ns: usize) -> String {
        format!(
            "apiVersion: networking.istio.io/v1\nkind: Sidecar\n\
             metadata: {{name: default, namespace: ns-{ns}}}\nspec:\n  \
             egress:\n  - hosts: [\"./*\"]\n"
        )
    }

    pub fn se_path(dir: &Path, i: usize) -> PathBuf {
        dir.join("se").join(format!("svc-{i}.yaml"))
    }

    pub fn vs_path(dir: &Path, i: usize) -> PathBuf {
        dir.join("vs").join(format!("svc-{i}.yaml"))
    }

    /// Writes the whole mesh under `dir` (created if missing). Returns the number of files.
    pub fn write(&self, dir: &Path) -> anyhow::Result<usize> {
        for sub in ["se", "dr", "vs", "sidecar"] {
            std::fs::create_dir_all(dir.join(sub))?;
        }
        let mut files = 0;
        for i in 0..self.services {
            std::fs::write(Mesh::se_path(dir, i), self.service_entry(i, 0))?;
            files += 1;
        }
        for i in 0..self.destination_rules {
            let path = dir.join("dr").join(format!("svc-{i}.yaml"));
            std::fs::write(path, self.destination_rule(i))?;
            files += 1;
        }
        for i in 0..self.virtual_services {
            std::fs::write(Mesh::vs_path(dir, i), self.virtual_service(i, 90))?;
            files += 1;
        }
        for ns in 0..self.sidecar_namespaces() {
            let path = dir.join("sidecar").join(format!("ns-{ns}.yaml"));
            std::fs::write(path, self.sidecar(ns))?;
            files += 1;
        }
        Ok(files)
    }

    /// The whole mesh as one multi-document YAML text (for in-process benchmarks).
    #[allow(dead_code)]
    pub fn yaml(&self) -> String {
        let mut docs = Vec::new();
        docs.extend((0..self.services).map(|i| self.service_entry(i, 0)));
        docs.extend((0..self.destination_rules).map(|i| self.destination_rule(i)));
        docs.extend((0..self.virtual_services).map(|i| self.virtual_service(i, 90)));
        docs.extend((0..self.sidecar_namespaces()).map(|ns| self.sidecar(ns)));
        docs.join("---\n")
    }
}

/// Istio's node id and namespace of simulated proxy `j`: `sidecar~10.X.Y.Z~proxy-j.ns-K~…`.
pub fn proxy_identity(j: usize, namespaces: usize) -> (String, String) {
    let ns = format!("ns-{}", j % namespaces.max(1));
    let ip = format!("10.{}.{}.{}", 200 + (j >> 16) % 50, (j >> 8) & 255, j & 255);
    (
        format!("sidecar~{ip}~proxy-{j}.{ns}~{ns}.svc.cluster.local"),
        ns,
    )
}
