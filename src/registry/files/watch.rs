//! The pure state of a watched config directory: which files to read again, what a read
//! means (a change, the same text again, a file being rewritten in place), the configs of
//! every file (a [`FileSet`]) and the problems found. The [`FileRegistry`](super::FileRegistry)
//! is its shell: it lists the directory, reads the files and sends what [`WatchState::commit`]
//! returns.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::SystemTime;

use crate::model::config::ConfigKey;
use crate::model::config_set::ConfigSet;
use crate::model::file_set::{FileReport, FileSet, is_config_file};

/// When a file was last modified and its size: a rescan reads only files whose stamp moved.
pub type Stamp = (SystemTime, u64);

/// What the shell found at a path.
#[derive(Debug, Clone, PartialEq)]
pub struct FileRead {
    pub content: Content,
    pub stamp: Option<Stamp>,
}

/// A file's content, or why there is none. Only a file that is not there is a deletion: a
/// file that cannot be read keeps its last good configs.
#[derive(Debug, Clone, PartialEq)]
pub enum Content {
    Text(String),
    /// The file does not exist (any more).
    Gone,
    /// It exists but could not be read (permission denied, an I/O error) or is not UTF-8:
    /// why, for the log and `/debug/configz`.
    Unreadable(String),
}

impl Content {
    /// Reads `path` as a config file.
    pub fn read(path: &Path) -> Content {
        match std::fs::read(path) {
            Ok(bytes) => match String::from_utf8(bytes) {
                Ok(text) => Content::Text(text),
                Err(e) => {
                    let at = e.utf8_error().valid_up_to();
                    let bytes = e.as_bytes();
                    let line = 1 + bytes[..at].iter().filter(|b| **b == b'\n').count();
                    Content::Unreadable(format!(
                        "invalid UTF-8 at line {line} (byte {at}): a config file must be UTF-8"
                    ))
                }
            },
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Content::Gone,
            Err(e) => Content::Unreadable(format!("cannot read: {e}")),
        }
    }
}

/// What a read did.
#[derive(Debug)]
pub enum Applied {
    /// The file could not be read: its last good configs are kept (`reason` says why).
    Unreadable { reason: String },
    /// A loaded file seen empty, most likely being rewritten in place (truncated, not yet
    /// written): read it again after the settle time before dropping its configs.
    Deferred,
    /// The same text as last applied: nothing parsed.
    Unchanged,
    /// Parsed (or removed). `new_kinds` are the unsupported kinds seen for the first time.
    Parsed {
        report: FileReport,
        new_kinds: Vec<(String, String)>,
    },
}

/// The configs to send after a reload, and what changed since the last ones sent.
#[derive(Debug)]
pub struct Update {
    pub configs: Arc<ConfigSet>,
    pub changed: BTreeSet<ConfigKey>,
    pub endpoints_only: bool,
    /// The first update of the directory (a full push).
    pub initial: bool,
}

/// The outcome of a reload's commit.
#[derive(Debug, Default)]
pub struct Committed {
    /// Keys defined more than once that were not before.
    pub new_duplicates: Vec<ConfigKey>,
    pub update: Option<Update>,
}

/// Paths seen changing and not read yet; `None` in the list means "rescan everything".
#[derive(Debug, Default)]
pub struct Pending(Option<Vec<PathBuf>>);

impl Pending {
    /// Adds the paths of an event; an empty list asks for a rescan, which covers them all.
    pub fn add(&mut self, paths: Vec<PathBuf>) {
        match (&mut self.0, paths.is_empty()) {
            (Some(held), false) if !held.is_empty() => held.extend(paths),
            (Some(held), true) => held.clear(),
            (Some(_), false) => {}
            (None, _) => self.0 = Some(paths),
        }
    }

    /// The paths to read now (empty: rescan), if any are pending.
    pub fn take(&mut self) -> Option<Vec<PathBuf>> {
        self.0.take()
    }
}

fn text_digest(text: &str) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    text.hash(&mut h);
    h.finish()
}

pub struct WatchState {
    files: FileSet,
    stamps: BTreeMap<PathBuf, Stamp>,
    /// The text last applied per file: an event for a file whose text did not change (editors
    /// and atomic renames fire several) is not parsed or reported again.
    texts: BTreeMap<PathBuf, u64>,
    reported_kinds: BTreeSet<(String, String)>,
    /// The current problems of each file, as reported.
    errors: BTreeMap<PathBuf, Vec<String>>,
    duplicates: BTreeSet<ConfigKey>,
    sent_initial: bool,
    /// Files found empty once.
    emptied: BTreeSet<PathBuf>,
}

impl WatchState {
    pub fn new(default_namespace: &str) -> Self {
        WatchState {
            files: FileSet::new(default_namespace),
            stamps: BTreeMap::new(),
            texts: BTreeMap::new(),
            reported_kinds: BTreeSet::new(),
            errors: BTreeMap::new(),
            duplicates: BTreeSet::new(),
            sent_initial: false,
            emptied: BTreeSet::new(),
        }
    }

    /// Whether the first update was committed.
    pub fn sent_initial(&self) -> bool {
        self.sent_initial
    }

    /// The paths to read: the config files among `hint`; on a rescan (`present`: every
    /// config file in the directory now, with its stamp), also the known files that are gone
    /// and the present ones whose stamp moved.
    pub fn to_read(
        &self,
        hint: Vec<PathBuf>,
        present: Option<Vec<(PathBuf, Option<Stamp>)>>,
    ) -> BTreeSet<PathBuf> {
        let mut paths: BTreeSet<PathBuf> = hint.into_iter().filter(|p| is_config_file(p)).collect();
        let Some(present) = present else {
            return paths;
        };
        let present_set: BTreeSet<&PathBuf> = present.iter().map(|(p, _)| p).collect();
        paths.extend(
            self.files
                .paths()
                .filter(|p| !present_set.contains(p))
                .cloned(),
        );
        for (path, stamp) in &present {
            if stamp.is_none() || self.stamps.get(path) != stamp.as_ref() {
                paths.insert(path.clone());
            }
        }
        paths
    }

    /// Applies what was read at `path`.
    pub fn apply(&mut self, path: &Path, read: FileRead) -> Applied {
        let text = match read.content {
            Content::Text(text) => Some(text),
            Content::Gone => None,
            Content::Unreadable(reason) => {
                // Never a deletion: the last good configs stay; the stamp is recorded so that
                // a rescan reads it again only when it changes (an event reports a chmod).
                self.emptied.remove(path);
                self.record_stamp(path, read.stamp);
                self.texts.remove(path);
                let message = format!("{}: {reason}", path.display());
                self.errors.insert(path.to_path_buf(), vec![message]);
                return Applied::Unreadable { reason };
            }
        };
        let empty = text.as_deref().is_some_and(|t| t.trim().is_empty());
        if empty && self.texts.contains_key(path) && self.emptied.insert(path.to_path_buf()) {
            return Applied::Deferred;
        }
        self.emptied.remove(path);
        // A file that is gone has no stamp to compare a rescan with.
        self.record_stamp(path, read.stamp.filter(|_| text.is_some()));
        let digest = text.as_deref().map(text_digest);
        if digest.is_some() && self.texts.get(path) == digest.as_ref() {
            return Applied::Unchanged;
        }
        match digest {
            Some(d) => self.texts.insert(path.to_path_buf(), d),
            None => self.texts.remove(path),
        };
        let report = self.files.apply(path, text.as_deref());
        let problems: Vec<String> = report.errors.iter().map(ToString::to_string).collect();
        if problems.is_empty() {
            self.errors.remove(path);
        } else {
            self.errors.insert(path.to_path_buf(), problems);
        }
        let new_kinds = report
            .unsupported
            .iter()
            .filter(|k| self.reported_kinds.insert((*k).clone()))
            .cloned()
            .collect();
        Applied::Parsed { report, new_kinds }
    }

    fn record_stamp(&mut self, path: &Path, stamp: Option<Stamp>) {
        match stamp {
            Some(stamp) => self.stamps.insert(path.to_path_buf(), stamp),
            None => self.stamps.remove(path),
        };
    }

    /// Merges every file's configs; returns the update to send, if the configs changed or
    /// none was sent yet.
    pub fn commit(&mut self) -> Committed {
        let commit = self.files.commit();
        let new_duplicates = commit
            .duplicates
            .difference(&self.duplicates)
            .cloned()
            .collect();
        self.duplicates = commit.duplicates;
        if commit.changed.is_empty() && self.sent_initial {
            return Committed {
                new_duplicates,
                update: None,
            };
        }
        let initial = !self.sent_initial;
        self.sent_initial = true;
        Committed {
            new_duplicates,
            update: Some(Update {
                configs: self.files.configs(),
                changed: commit.changed,
                endpoints_only: commit.endpoints_only,
                initial,
            }),
        }
    }

    /// The configs held and the problems found (`/debug/configz`).
    pub fn configz(&self, source: &str, dir: &Path) -> serde_json::Value {
        let configs: Vec<_> = self.files.configs().values().cloned().collect();
        serde_json::json!({
            "source": source,
            "dir": dir.display().to_string(),
            "configs": configs,
            "errors": self.errors.values().flatten().collect::<Vec<_>>(),
            "unsupported_kinds": self
                .reported_kinds
                .iter()
                .map(|(v, k)| format!("{k} ({v})"))
                .collect::<Vec<_>>(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const VS: &str = "apiVersion: networking.istio.io/v1\nkind: VirtualService\nmetadata: {name: a, namespace: ns}\nspec:\n  hosts: [a]\n  http: [{route: [{destination: {host: a}}]}]\n";

    fn read(text: &str, at: u64) -> FileRead {
        FileRead {
            content: Content::Text(text.to_string()),
            stamp: Some((SystemTime::UNIX_EPOCH, at)),
        }
    }

    fn gone() -> FileRead {
        FileRead {
            content: Content::Gone,
            stamp: None,
        }
    }

    #[test]
    fn a_read_failure_is_never_a_deletion() {
        let mut w = WatchState::new("default");
        let path = Path::new("/d/a.yaml");
        w.apply(path, read(VS, 1));
        assert_eq!(w.commit().update.expect("initial").configs.len(), 1);
        let unreadable = FileRead {
            content: Content::Unreadable("cannot read: Permission denied (os error 13)".into()),
            stamp: Some((SystemTime::UNIX_EPOCH, 2)),
        };
        assert!(matches!(
            w.apply(path, unreadable),
            Applied::Unreadable { .. }
        ));
        assert!(
            w.commit().update.is_none(),
            "the VirtualService is still served"
        );
        let configz = w.configz("files", Path::new("/d"));
        assert!(
            configz["errors"][0]
                .as_str()
                .unwrap()
                .contains("Permission denied"),
            "{configz}"
        );
        assert_eq!(configz["configs"].as_array().unwrap().len(), 1);
        // Readable again, the same text: nothing to push, and the error is gone.
        assert!(matches!(w.apply(path, read(VS, 3)), Applied::Parsed { .. }));
        assert!(w.commit().update.is_none());
        assert!(
            w.configz("files", Path::new("/d"))["errors"]
                .as_array()
                .unwrap()
                .is_empty()
        );
        // Only a file that is gone is a deletion.
        w.apply(path, gone());
        assert_eq!(w.commit().update.expect("deleted").changed.len(), 1);
    }

    #[test]
    fn invalid_utf8_is_reported_with_its_line() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.yaml");
        std::fs::write(&path, b"# ok\n# caf\xe9\nkind: VirtualService\n").unwrap();
        match Content::read(&path) {
            Content::Unreadable(reason) => {
                assert!(reason.contains("invalid UTF-8 at line 2"), "{reason}")
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(Content::read(&dir.path().join("none.yaml")), Content::Gone);
        assert!(
            matches!(Content::read(dir.path()), Content::Unreadable(_)),
            "a directory"
        );
    }

    #[test]
    fn a_first_commit_is_sent_even_when_empty_then_only_changes() {
        let mut w = WatchState::new("default");
        let first = w.commit().update.expect("the initial update");
        assert!(first.initial && first.configs.is_empty());
        assert!(w.commit().update.is_none(), "nothing changed");
        let path = Path::new("/d/a.yaml");
        assert!(matches!(w.apply(path, read(VS, 1)), Applied::Parsed { .. }));
        let update = w.commit().update.expect("a VirtualService appeared");
        assert!(!update.initial && update.changed.len() == 1 && !update.endpoints_only);
        assert!(
            matches!(w.apply(path, read(VS, 2)), Applied::Unchanged),
            "the same text"
        );
        assert!(w.commit().update.is_none());
    }

    #[test]
    fn an_emptied_file_is_read_again_before_its_configs_are_dropped() {
        let mut w = WatchState::new("default");
        let path = Path::new("/d/a.yaml");
        w.apply(path, read(VS, 1));
        w.commit();
        assert!(matches!(w.apply(path, read("", 2)), Applied::Deferred));
        assert!(
            matches!(w.apply(path, read("", 3)), Applied::Parsed { .. }),
            "still empty"
        );
        assert_eq!(w.commit().update.expect("dropped").changed.len(), 1);
    }

    #[test]
    fn a_rescan_reads_moved_stamps_and_gone_files() {
        let mut w = WatchState::new("default");
        let (a, b) = (PathBuf::from("/d/a.yaml"), PathBuf::from("/d/b.yaml"));
        w.apply(&a, read(VS, 1));
        w.apply(&b, read(VS, 1));
        let stamp = Some((SystemTime::UNIX_EPOCH, 1));
        let present = vec![(a.clone(), stamp)];
        assert_eq!(
            w.to_read(Vec::new(), Some(present)),
            BTreeSet::from([b.clone()]),
            "b is gone, a did not move"
        );
        let moved = vec![
            (a.clone(), Some((SystemTime::UNIX_EPOCH, 2))),
            (b.clone(), stamp),
        ];
        assert_eq!(
            w.to_read(Vec::new(), Some(moved)),
            BTreeSet::from([a.clone()])
        );
        let hint = vec![a.clone(), PathBuf::from("/d/notes.txt")];
        assert_eq!(
            w.to_read(hint, None),
            BTreeSet::from([a.clone()]),
            "only config files"
        );
        w.apply(&b, gone());
        assert!(w.to_read(Vec::new(), Some(Vec::new())).contains(&a));
    }

    #[test]
    fn pending_paths_merge_and_a_rescan_covers_them() {
        let mut p = Pending::default();
        p.add(vec![PathBuf::from("a")]);
        p.add(vec![PathBuf::from("b")]);
        assert_eq!(p.take().unwrap().len(), 2);
        assert!(p.take().is_none());
        p.add(vec![PathBuf::from("a")]);
        p.add(Vec::new());
        p.add(vec![PathBuf::from("b")]);
        assert_eq!(p.take(), Some(Vec::new()), "a rescan");
    }
}
