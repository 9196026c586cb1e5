//! `exportTo`: which namespaces may see a ServiceEntry, VirtualService or DestinationRule.
//!
//! `*` is every namespace, `.` the config's own, `~` none, anything else a namespace by name.
//! A config that sets nothing takes the mesh-wide default.

use std::collections::BTreeSet;

/// The namespaces a config is visible from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ExportTo {
    All,
    Namespaces(BTreeSet<String>),
}

impl ExportTo {
    /// Resolves `export_to` of a config in `namespace`, with `default` when it is empty.
    pub fn resolve(export_to: &[String], namespace: &str, default: &[String]) -> ExportTo {
        let entries = if export_to.is_empty() {
            default
        } else {
            export_to
        };
        let mut namespaces = BTreeSet::new();
        for entry in entries {
            match entry.as_str() {
                "*" => return ExportTo::All,
                "." => {
                    namespaces.insert(namespace.to_string());
                }
                "~" => {}
                ns => {
                    namespaces.insert(ns.to_string());
                }
            }
        }
        ExportTo::Namespaces(namespaces)
    }

    pub fn visible_from(&self, namespace: &str) -> bool {
        match self {
            ExportTo::All => true,
            ExportTo::Namespaces(set) => set.contains(namespace),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(e: &[&str]) -> Vec<String> {
        e.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn export_to_forms() {
        let star = v(&["*"]);
        assert!(ExportTo::resolve(&[], "a", &star).visible_from("b"));
        assert!(ExportTo::resolve(&v(&["."]), "a", &star).visible_from("a"));
        assert!(!ExportTo::resolve(&v(&["."]), "a", &star).visible_from("b"));
        assert!(!ExportTo::resolve(&v(&["~"]), "a", &star).visible_from("a"));
        let e = ExportTo::resolve(&v(&["b", "."]), "a", &star);
        assert!(e.visible_from("a") && e.visible_from("b") && !e.visible_from("c"));
        assert!(
            !ExportTo::resolve(&[], "a", &v(&["."])).visible_from("b"),
            "mesh default"
        );
    }
}
