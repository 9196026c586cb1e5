//! `--mesh-config`: istiod's MeshConfig file, read once at start-up, and the flags that
//! override it (`--root-namespace`, `--default-export-to`, `--trust-domain`). A file that does
//! not read is a start-up error naming the file, the line and the reason; each field it sets
//! that axon does not apply is logged once as a WARN.

use std::path::Path;

use anyhow::Context;

use axon_config::mesh::{self, MeshConfig};

/// The mesh settings axon serves with, and the trust domain it accepts identities in.
pub struct MeshSettings {
    pub mesh: MeshConfig,
    pub trust_domain: String,
}

/// The file's settings (axon's defaults without one), then the flags given.
pub fn load(
    path: Option<&Path>,
    root_namespace: Option<&str>,
    default_export_to: Option<&[String]>,
    trust_domain: Option<&str>,
) -> anyhow::Result<MeshSettings> {
    let file = match path {
        Some(path) => {
            let text = std::fs::read_to_string(path)
                .with_context(|| format!("--mesh-config {}", path.display()))?;
            let file =
                mesh::parse(&text).with_context(|| format!("--mesh-config {}", path.display()))?;
            for note in &file.not_applied {
                tracing::warn!(file = %path.display(), "mesh config: {note}");
            }
            Some(file)
        }
        None => None,
    };
    let file_trust_domain = file.as_ref().and_then(|f| f.trust_domain.clone());
    let mut mesh = file.map(|f| f.mesh).unwrap_or_default();
    if let Some(ns) = root_namespace {
        mesh.root_namespace = ns.to_string();
    }
    if let Some(export_to) = default_export_to {
        mesh.default_service_export_to = export_to.to_vec();
        mesh.default_virtual_service_export_to = export_to.to_vec();
        mesh.default_destination_rule_export_to = export_to.to_vec();
    }
    let trust_domain = trust_domain
        .map(str::to_string)
        .or(file_trust_domain)
        .unwrap_or_else(|| "cluster.local".to_string());
    mesh.trust_domain = trust_domain.clone();
    Ok(MeshSettings { mesh, trust_domain })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_override_the_file() {
        let dir = std::env::temp_dir().join(format!("axon-mesh-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("mesh.yaml");
        std::fs::write(&path, "rootNamespace: from-file\ntrustDomain: file.org\n").unwrap();
        let s = load(Some(&path), None, None, None).unwrap();
        assert_eq!(s.mesh.root_namespace, "from-file");
        assert_eq!(s.trust_domain, "file.org");
        let s = load(
            Some(&path),
            Some("flag"),
            Some(&[".".into()]),
            Some("flag.org"),
        )
        .unwrap();
        assert_eq!(s.mesh.root_namespace, "flag");
        assert_eq!(s.mesh.default_destination_rule_export_to, ["."]);
        assert_eq!(s.trust_domain, "flag.org");
        let s = load(None, None, None, None).unwrap();
        assert_eq!(s.mesh, MeshConfig::default());
        assert_eq!(s.trust_domain, "cluster.local");
        std::fs::write(&path, "rootNamespce: x\n").unwrap();
        let err = format!("{:#}", load(Some(&path), None, None, None).err().unwrap());
        assert!(err.contains("mesh.yaml") && err.contains("line 1"), "{err}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
