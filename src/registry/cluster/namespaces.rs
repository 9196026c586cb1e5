//! Which namespaces are read: `--namespace-selector`, like istiod's discoverySelectors.
//! Pure; the same filter for the API server's Namespaces and a config directory's.
//!
//! Owns [`NamespaceSelector`] (`key=value[,key=value]`) and [`NamespaceFilter`], the set of
//! selected namespaces fed by the Namespace watch. Without a selector every namespace is
//! selected and Namespaces are not watched. The indexes drop objects of other namespaces
//! (they are never held); a namespace that stops matching is purged, and one that starts
//! matching makes the registry relist its other kinds.

use std::collections::{BTreeMap, BTreeSet};
use std::str::FromStr;

use k8s_openapi::api::core::v1::Namespace;

use thiserror::Error;

/// A `--namespace-selector` that does not parse.
#[derive(Debug, Error)]
#[error("invalid namespace selector {selector:?}: {reason}")]
pub struct SelectorError {
    pub selector: String,
    pub reason: String,
}

/// Equality-based label selector on Namespaces.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NamespaceSelector {
    labels: BTreeMap<String, String>,
}

impl NamespaceSelector {
    pub fn matches(&self, labels: Option<&BTreeMap<String, String>>) -> bool {
        self.labels
            .iter()
            .all(|(k, v)| labels.and_then(|l| l.get(k)) == Some(v))
    }

    /// The selector in the API server's `labelSelector` syntax.
    pub fn to_label_selector(&self) -> String {
        self.labels
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join(",")
    }
}

impl FromStr for NamespaceSelector {
    type Err = SelectorError;

    fn from_str(text: &str) -> Result<Self, SelectorError> {
        let invalid = |reason: &str| SelectorError {
            selector: text.to_string(),
            reason: reason.to_string(),
        };
        let mut labels = BTreeMap::new();
        for term in text.split(',').map(str::trim).filter(|t| !t.is_empty()) {
            let (k, v) = term
                .split_once("==")
                .or_else(|| term.split_once('='))
                .ok_or_else(|| invalid("each term must be key=value"))?;
            let (k, v) = (k.trim(), v.trim());
            let label_char = |c: char| c.is_ascii_alphanumeric() || "-_./".contains(c);
            if k.is_empty() || !k.chars().all(label_char) || !v.chars().all(label_char) {
                return Err(invalid("keys and values are label names and values"));
            }
            labels.insert(k.to_string(), v.to_string());
        }
        if labels.is_empty() {
            return Err(invalid("no key=value term"));
        }
        Ok(NamespaceSelector { labels })
    }
}

/// How the selected set changed.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct NamespaceChange {
    pub added: BTreeSet<String>,
    pub removed: BTreeSet<String>,
}

impl NamespaceChange {
    pub fn is_empty(&self) -> bool {
        self.added.is_empty() && self.removed.is_empty()
    }
}

/// The selected namespaces, as the Namespace watch reports them.
#[derive(Debug, Default)]
pub struct NamespaceFilter {
    selector: Option<NamespaceSelector>,
    selected: BTreeSet<String>,
    buffer: Option<BTreeSet<String>>,
}

impl NamespaceFilter {
    pub fn new(selector: Option<NamespaceSelector>) -> Self {
        NamespaceFilter {
            selector,
            ..Default::default()
        }
    }

    pub fn selector(&self) -> Option<&NamespaceSelector> {
        self.selector.as_ref()
    }

    /// Whether objects of `namespace` are read.
    pub fn allows(&self, namespace: &str) -> bool {
        self.selector.is_none() || self.selected.contains(namespace)
    }

    fn selects(&self, ns: &Namespace) -> Option<String> {
        let name = ns.metadata.name.clone()?;
        let selector = self.selector.as_ref()?;
        selector
            .matches(ns.metadata.labels.as_ref())
            .then_some(name)
    }

    pub fn init(&mut self) {
        self.buffer = Some(BTreeSet::new());
    }

    pub fn init_apply(&mut self, ns: &Namespace) {
        let selected = self.selects(ns);
        match (&mut self.buffer, selected) {
            (Some(buffer), Some(name)) => {
                buffer.insert(name);
            }
            (Some(_), None) => {}
            (None, _) => {
                self.apply(ns);
            }
        }
    }

    pub fn init_done(&mut self) -> NamespaceChange {
        let Some(new) = self.buffer.take() else {
            return NamespaceChange::default();
        };
        let change = NamespaceChange {
            added: new.difference(&self.selected).cloned().collect(),
            removed: self.selected.difference(&new).cloned().collect(),
        };
        self.selected = new;
        change
    }

    pub fn apply(&mut self, ns: &Namespace) -> NamespaceChange {
        let Some(name) = ns.metadata.name.clone() else {
            return NamespaceChange::default();
        };
        let mut change = NamespaceChange::default();
        if self.selects(ns).is_some() {
            if self.selected.insert(name.clone()) {
                change.added.insert(name);
            }
        } else if self.selected.remove(&name) {
            change.removed.insert(name);
        }
        change
    }

    pub fn delete(&mut self, ns: &Namespace) -> NamespaceChange {
        let mut change = NamespaceChange::default();
        if let Some(name) = &ns.metadata.name
            && self.selected.remove(name)
        {
            change.removed.insert(name.clone());
        }
        change
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    fn ns(name: &str, labels: &[(&str, &str)]) -> Namespace {
        Namespace {
            metadata: ObjectMeta {
                name: Some(name.into()),
                labels: Some(
                    labels
                        .iter()
                        .map(|(k, v)| (k.to_string(), v.to_string()))
                        .collect(),
                ),
                ..Default::default()
            },
            ..Default::default()
        }
    }

    #[test]
    fn selector_syntax() {
        let s: NamespaceSelector = "istio-discovery=enabled, team==a".parse().unwrap();
        assert_eq!(s.to_label_selector(), "istio-discovery=enabled,team=a");
        assert!("novalue".parse::<NamespaceSelector>().is_err());
        assert!("".parse::<NamespaceSelector>().is_err());
        assert!("a=b c".parse::<NamespaceSelector>().is_err());
    }

    #[test]
    fn the_selected_set_follows_labels() {
        let mut f = NamespaceFilter::new(Some("mesh=on".parse().unwrap()));
        assert!(!f.allows("a"), "nothing is selected before the list");
        f.init();
        f.init_apply(&ns("a", &[("mesh", "on")]));
        f.init_apply(&ns("b", &[]));
        assert_eq!(f.init_done().added, BTreeSet::from(["a".to_string()]));
        assert!(f.allows("a") && !f.allows("b"));
        assert_eq!(
            f.apply(&ns("b", &[("mesh", "on")])).added,
            BTreeSet::from(["b".to_string()])
        );
        assert_eq!(
            f.apply(&ns("a", &[("mesh", "off")])).removed,
            BTreeSet::from(["a".to_string()])
        );
        assert!(f.apply(&ns("a", &[])).is_empty());
        assert_eq!(f.delete(&ns("b", &[])).removed.len(), 1);
        assert!(NamespaceFilter::new(None).allows("anything"));
    }
}
