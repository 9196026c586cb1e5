//! The configs of a directory of Istio YAML, file by file, as the FileRegistry holds them.
//!
//! Pure: the FileRegistry actor reads files and hands their text to [`FileSet::apply`]. A file
//! whose new text has an invalid document keeps its last good configs (the error is reported,
//! and what was served goes on being served); a new file contributes its valid documents.
//! The Kubernetes objects of the files ([`crate::kubernetes`]) are held beside the configs,
//! under the same rules; [`FileSet::commit`] reports which of them changed.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::config::{Config, ConfigKey};
use super::config_set::ConfigSet;
pub use super::config_set::{compare, diff};
use super::kubernetes::{KubeObject, ObjectChange, ObjectCheck, ObjectKey};
use super::parse::{DocError, DocOutcome, Note, parse_documents_checked};
use super::yaml_bounds::YamlBounds;

/// Whether a path names a file that the registry reads: `*.yaml` or `*.yml`, not hidden.
pub fn is_config_file(path: &Path) -> bool {
    let hidden = path
        .file_name()
        .and_then(|n| n.to_str())
        .is_none_or(|n| n.starts_with('.'));
    let yaml = matches!(
        path.extension().and_then(|e| e.to_str()),
        Some("yaml" | "yml")
    );
    yaml && !hidden
}

/// One problem in one document of one file.
#[derive(Debug, Clone, PartialEq)]
pub struct DocReport {
    pub path: PathBuf,
    pub index: usize,
    pub line: usize,
    pub error: DocError,
}

impl std::fmt::Display for DocReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}: document {} (line {}): {}",
            self.path.display(),
            self.index,
            self.line,
            self.error
        )
    }
}

/// A field of a config in a file that axon accepts and does not apply.
#[derive(Debug, Clone, PartialEq)]
pub struct NoteReport {
    pub path: PathBuf,
    pub index: usize,
    pub note: Note,
}

impl std::fmt::Display for NoteReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}: document {} (line {}): {}",
            self.path.display(),
            self.index,
            self.note.line,
            self.note
        )
    }
}

/// What loading one file found.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct FileReport {
    pub errors: Vec<DocReport>,
    /// Fields accepted and not applied, in the configs loaded.
    pub notes: Vec<NoteReport>,
    /// `(apiVersion, kind)` of documents of kinds that axon does not read.
    pub unsupported: Vec<(String, String)>,
    /// The file had errors and its previous configs were kept.
    pub kept_previous: bool,
    pub configs: usize,
    /// Kubernetes objects (Services, EndpointSlices, Pods, Namespaces) loaded.
    pub objects: usize,
}

#[derive(Debug, Clone)]
pub struct FileSet {
    default_namespace: String,
    bounds: YamlBounds,
    check: Option<ObjectCheck>,
    files: BTreeMap<PathBuf, Vec<Arc<Config>>>,
    /// Each loaded file's Kubernetes objects.
    objects: BTreeMap<PathBuf, Vec<Arc<KubeObject>>>,
    /// Where each file's configs are: key, document index and line.
    places: BTreeMap<PathBuf, Vec<(ConfigKey, usize, usize)>>,
    merged: Arc<ConfigSet>,
    merged_objects: BTreeMap<ObjectKey, Arc<KubeObject>>,
}

/// Where a config was read: its file, document index and the document's first line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Place {
    pub path: PathBuf,
    pub index: usize,
    pub line: usize,
}

impl std::fmt::Display for Place {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}: document {} (line {})",
            self.path.display(),
            self.index,
            self.line
        )
    }
}

impl FileSet {
    pub fn new(default_namespace: impl Into<String>) -> FileSet {
        FileSet {
            default_namespace: default_namespace.into(),
            bounds: YamlBounds::default(),
            check: None,
            files: BTreeMap::new(),
            objects: BTreeMap::new(),
            places: BTreeMap::new(),
            merged: Arc::default(),
            merged_objects: BTreeMap::new(),
        }
    }

    /// Checks every Kubernetes object against its type with `check`: one that fails is an
    /// invalid document. Without a check, objects are kept as read.
    pub fn with_object_check(mut self, check: ObjectCheck) -> FileSet {
        self.check = Some(check);
        self
    }

    /// The bounds every document is parsed within.
    pub fn with_bounds(mut self, bounds: YamlBounds) -> FileSet {
        self.bounds = bounds;
        self
    }

    /// How many files are loaded (with configs or without).
    pub fn len(&self) -> usize {
        self.files.len()
    }

    pub fn is_empty(&self) -> bool {
        self.files.is_empty()
    }

    /// Whether `path` is loaded.
    pub fn contains(&self, path: &Path) -> bool {
        self.files.contains_key(path)
    }

    /// Whether `path` is loaded with at least one config or Kubernetes object.
    pub fn holds_configs(&self, path: &Path) -> bool {
        self.files.get(path).is_some_and(|c| !c.is_empty())
            || self.objects.get(path).is_some_and(|o| !o.is_empty())
    }

    pub fn paths(&self) -> impl Iterator<Item = &PathBuf> {
        self.files.keys()
    }

    /// Applies a file's new text (`None`: the file is gone). Call [`FileSet::commit`] after a
    /// batch of files to learn which configs changed.
    pub fn apply(&mut self, path: &Path, text: Option<&str>) -> FileReport {
        let Some(text) = text else {
            self.files.remove(path);
            self.objects.remove(path);
            self.places.remove(path);
            return FileReport::default();
        };
        let mut report = FileReport::default();
        let mut configs = Vec::new();
        let mut objects = Vec::new();
        let mut places = Vec::new();
        let docs = parse_documents_checked(text, &self.default_namespace, &self.bounds, self.check);
        for doc in docs {
            match doc.outcome {
                DocOutcome::Kubernetes(object) => objects.push(Arc::new(*object)),
                DocOutcome::Empty => {}
                DocOutcome::Unsupported { api_version, kind } => {
                    report.unsupported.push((api_version, kind))
                }
                DocOutcome::Config(config) => {
                    report
                        .notes
                        .extend(doc.notes.into_iter().map(|note| NoteReport {
                            path: path.to_path_buf(),
                            index: doc.index,
                            note,
                        }));
                    places.push((config.key.clone(), doc.index, doc.line));
                    configs.push(Arc::new(*config))
                }
                DocOutcome::Invalid(error) => report.errors.push(DocReport {
                    path: path.to_path_buf(),
                    index: doc.index,
                    line: doc.line,
                    error,
                }),
            }
        }
        if !report.errors.is_empty() && self.files.contains_key(path) {
            report.kept_previous = true;
            report.configs = self.files[path].len();
            report.objects = self.objects.get(path).map_or(0, Vec::len);
            return report;
        }
        report.configs = configs.len();
        report.objects = objects.len();
        self.files.insert(path.to_path_buf(), configs);
        self.objects.insert(path.to_path_buf(), objects);
        self.places.insert(path.to_path_buf(), places);
        report
    }

    /// Where the config `key` that the merge keeps was read (the last file in path order, its
    /// last document, as [`FileSet::commit`] merges).
    pub fn place(&self, key: &ConfigKey) -> Option<Place> {
        self.places.iter().rev().find_map(|(path, places)| {
            places
                .iter()
                .rev()
                .find(|(k, _, _)| k == key)
                .map(|(_, index, line)| Place {
                    path: path.clone(),
                    index: *index,
                    line: *line,
                })
        })
    }

    /// Merges every file's configs (in path order; a later file or document wins a duplicate
    /// key) and returns the keys that differ from the last commit, and the duplicates.
    pub fn commit(&mut self) -> Commit {
        let mut merged = ConfigSet::new();
        let mut duplicates = BTreeSet::new();
        for configs in self.files.values() {
            for config in configs {
                if merged.insert(config.key.clone(), config.clone()).is_some() {
                    duplicates.insert(config.key.clone());
                }
            }
        }
        let (changed, endpoints_only) = compare(&self.merged, &merged);
        self.merged = Arc::new(merged);
        let (objects, object_duplicates) = self.commit_objects();
        Commit {
            changed,
            endpoints_only,
            duplicates,
            objects,
            object_duplicates,
        }
    }

    /// Merges every file's Kubernetes objects as configs are merged; returns the objects
    /// that changed since the last commit and the keys defined more than once.
    fn commit_objects(&mut self) -> (Vec<ObjectChange>, BTreeSet<ObjectKey>) {
        let mut merged = BTreeMap::new();
        let mut duplicates = BTreeSet::new();
        for object in self.objects.values().flatten() {
            if merged.insert(object.key.clone(), object.clone()).is_some() {
                duplicates.insert(object.key.clone());
            }
        }
        let mut old = std::mem::replace(&mut self.merged_objects, merged);
        let mut changes = Vec::new();
        for (key, new) in &self.merged_objects {
            match old.remove(key) {
                Some(prev) if Arc::ptr_eq(&prev, new) || prev == *new => {}
                prev => changes.push(ObjectChange {
                    key: key.clone(),
                    old: prev,
                    new: Some(new.clone()),
                }),
            }
        }
        changes.extend(old.into_iter().map(|(key, prev)| ObjectChange {
            key,
            old: Some(prev),
            new: None,
        }));
        (changes, duplicates)
    }

    /// The merged configs as of the last commit.
    pub fn configs(&self) -> Arc<ConfigSet> {
        self.merged.clone()
    }

    /// The merged Kubernetes objects as of the last commit.
    pub fn objects(&self) -> &BTreeMap<ObjectKey, Arc<KubeObject>> {
        &self.merged_objects
    }
}

#[derive(Debug, Default, PartialEq)]
pub struct Commit {
    pub changed: BTreeSet<ConfigKey>,
    /// Every change touches endpoints only: WorkloadEntries, or the inline endpoints of a
    /// ServiceEntry that is otherwise the same.
    pub endpoints_only: bool,
    pub duplicates: BTreeSet<ConfigKey>,
    /// The Kubernetes objects added, changed or removed (in key order, removals last).
    pub objects: Vec<ObjectChange>,
    /// Kubernetes objects defined more than once (the last file in path order wins).
    pub object_duplicates: BTreeSet<ObjectKey>,
}

#[cfg(test)]
mod tests {
    use super::*;

    const GW: &str = "apiVersion: networking.istio.io/v1\nkind: Gateway\nmetadata: {name: gw}\nspec:\n  selector: {istio: ingressgateway}\n  servers: [{port: {number: 80, name: http, protocol: HTTP}, hosts: ['*']}]\n";
    const GW2: &str = "apiVersion: networking.istio.io/v1\nkind: Gateway\nmetadata: {name: gw}\nspec:\n  selector: {istio: other}\n  servers: [{port: {number: 80, name: http, protocol: HTTP}, hosts: ['*']}]\n";

    #[test]
    fn same_spec_saved_again_changes_nothing() {
        let mut set = FileSet::new("default");
        set.apply(Path::new("/d/a.yaml"), Some(GW));
        assert_eq!(set.commit().changed.len(), 1);
        set.apply(Path::new("/d/a.yaml"), Some(&format!("# comment\n{GW}")));
        assert!(set.commit().changed.is_empty());
        set.apply(Path::new("/d/a.yaml"), Some(GW2));
        assert_eq!(set.commit().changed.len(), 1);
        set.apply(Path::new("/d/a.yaml"), None);
        assert_eq!(set.commit().changed.len(), 1);
        assert!(set.configs().is_empty());
    }

    #[test]
    fn endpoint_only_changes_are_told_apart() {
        let se = |addr: &str, port: u32| {
            format!(
                "apiVersion: networking.istio.io/v1\nkind: ServiceEntry\nmetadata: {{name: se}}\nspec:\n  hosts: [a.example.com]\n  resolution: STATIC\n  ports: [{{number: {port}, name: http, protocol: HTTP}}]\n  endpoints: [{{address: {addr}}}]\n"
            )
        };
        let we = |addr: &str| {
            format!(
                "apiVersion: networking.istio.io/v1\nkind: WorkloadEntry\nmetadata: {{name: we}}\nspec: {{address: {addr}}}\n"
            )
        };
        let mut set = FileSet::new("default");
        set.apply(Path::new("/d/se.yaml"), Some(&se("10.0.0.1", 80)));
        set.apply(Path::new("/d/we.yaml"), Some(&we("10.0.0.2")));
        assert!(!set.commit().endpoints_only, "first load");
        set.apply(Path::new("/d/se.yaml"), Some(&se("10.0.0.3", 80)));
        set.apply(Path::new("/d/we.yaml"), Some(&we("10.0.0.4")));
        let commit = set.commit();
        assert_eq!(commit.changed.len(), 2);
        assert!(commit.endpoints_only);
        set.apply(Path::new("/d/se.yaml"), Some(&se("10.0.0.3", 81)));
        assert!(
            !set.commit().endpoints_only,
            "a port change is a service change"
        );
        set.apply(Path::new("/d/we.yaml"), None);
        assert!(set.commit().endpoints_only, "a WorkloadEntry removed");
    }

    #[test]
    fn a_headless_services_endpoints_are_a_full_change() {
        // Resolution NONE, no address: a listener per endpoint (istiod's full push for a
        // Passthrough service's endpoints).
        let se = "apiVersion: networking.istio.io/v1\nkind: ServiceEntry\nmetadata: {name: kafka}\nspec:\n  hosts: [kafka.example.com]\n  resolution: NONE\n  ports: [{number: 9092, name: tcp, protocol: TCP}]\n  workloadSelector: {labels: {app: kafka}}\n";
        let we = |name: &str, app: &str, addr: &str| {
            format!(
                "apiVersion: networking.istio.io/v1\nkind: WorkloadEntry\nmetadata: {{name: {name}}}\nspec: {{address: {addr}, labels: {{app: {app}}}}}\n"
            )
        };
        let mut set = FileSet::new("default");
        set.apply(Path::new("/d/se.yaml"), Some(se));
        set.apply(
            Path::new("/d/k0.yaml"),
            Some(&we("k0", "kafka", "10.0.0.1")),
        );
        set.apply(
            Path::new("/d/other.yaml"),
            Some(&we("o", "other", "10.0.0.9")),
        );
        set.commit();
        set.apply(
            Path::new("/d/k0.yaml"),
            Some(&we("k0", "kafka", "10.0.0.2")),
        );
        let commit = set.commit();
        assert!(!commit.endpoints_only, "a selected WorkloadEntry moved");
        // The ServiceEntry is named too: proxies depend on it, not on its WorkloadEntries.
        let keys: Vec<String> = commit.changed.iter().map(|k| k.to_string()).collect();
        assert_eq!(
            keys,
            ["ServiceEntry/default/kafka", "WorkloadEntry/default/k0"]
        );
        set.apply(
            Path::new("/d/other.yaml"),
            Some(&we("o", "other", "10.0.0.8")),
        );
        assert!(
            set.commit().endpoints_only,
            "a WorkloadEntry no headless service selects"
        );
        set.apply(Path::new("/d/k0.yaml"), None);
        assert!(
            !set.commit().endpoints_only,
            "a selected WorkloadEntry removed"
        );
    }

    #[test]
    fn kubernetes_objects_are_held_and_their_changes_reported() {
        let svc = |port: u32| {
            format!(
                "apiVersion: v1\nkind: Service\nmetadata: {{name: web, namespace: shop}}\nspec: {{ports: [{{name: http, port: {port}}}]}}\n"
            )
        };
        let mut set = FileSet::new("default");
        let report = set.apply(Path::new("/d/a.yaml"), Some(&svc(80)));
        assert_eq!((report.configs, report.objects), (0, 1));
        assert!(set.holds_configs(Path::new("/d/a.yaml")));
        let commit = set.commit();
        assert!(commit.changed.is_empty());
        assert_eq!(commit.objects.len(), 1);
        assert!(commit.objects[0].old.is_none());
        set.apply(
            Path::new("/d/a.yaml"),
            Some(&format!("# again\n{}", svc(80))),
        );
        assert!(set.commit().objects.is_empty(), "the same object again");
        // A broken edit keeps the last good object; a fixed one replaces it.
        let report = set.apply(Path::new("/d/a.yaml"), Some("kind: [x"));
        assert!(report.kept_previous && report.objects == 1);
        assert!(set.commit().objects.is_empty());
        set.apply(Path::new("/d/a.yaml"), Some(&svc(81)));
        let commit = set.commit();
        assert_eq!(commit.objects.len(), 1);
        assert!(commit.objects[0].old.is_some() && commit.objects[0].new.is_some());
        set.apply(Path::new("/d/b.yaml"), Some(&svc(82)));
        let commit = set.commit();
        assert_eq!(commit.object_duplicates.len(), 1, "b.yaml redefines it");
        assert_eq!(set.objects().len(), 1);
        set.apply(Path::new("/d/a.yaml"), None);
        set.apply(Path::new("/d/b.yaml"), None);
        let commit = set.commit();
        assert!(commit.objects[0].new.is_none());
        assert!(set.objects().is_empty());
    }

    #[test]
    fn a_broken_edit_keeps_the_last_good_configs() {
        let mut set = FileSet::new("default");
        set.apply(Path::new("/d/a.yaml"), Some(GW));
        set.commit();
        let report = set.apply(Path::new("/d/a.yaml"), Some("kind: [unclosed"));
        assert!(report.kept_previous);
        assert_eq!(report.errors[0].path, Path::new("/d/a.yaml"));
        assert!(set.commit().changed.is_empty());
        assert_eq!(set.configs().len(), 1);
        // A new broken file still contributes its good documents.
        let report = set.apply(
            Path::new("/d/b.yaml"),
            Some(&format!("kind: [x\n---\n{GW2}")),
        );
        assert!(!report.kept_previous);
        assert_eq!((report.errors.len(), report.configs), (1, 1));
        let commit = set.commit();
        assert_eq!(commit.duplicates.len(), 1, "b.yaml redefines gw");
    }
}
