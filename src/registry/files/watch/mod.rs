//! The pure state of a watched config directory: which files to read again, what a read
//! means, the configs of every file (a [`FileSet`]) and the problems found. The
//! [`FileRegistry`](super::FileRegistry) is its shell: it lists the directory, reads the
//! files, passes the time in and sends what [`WatchState::commit`] returns.
//!
//! The rules that keep the last good state:
//! - a file that cannot be read (or is refused: too large, not UTF-8, an invalid document)
//!   keeps its last good configs;
//! - a loaded file that is found empty or gone is held for `file_settle` before its configs
//!   are dropped, so that a save in progress (truncate then write, a rename over it) never
//!   pushes what the user did not save;
//! - while the directory itself is missing or cannot be listed nothing is read, and files
//!   under a subdirectory that cannot be listed are not taken as gone;
//! - the first update waits for a clean read (no read errors, the directory listed); an
//!   empty directory is served once it has stayed empty for `file_settle`.
//!
//! The Kubernetes objects of the files (Services, EndpointSlices, Pods, Namespaces) go
//! through the API server's translation ([`DirectoryObjects`], in `registry::cluster`); the
//! ServiceEntries it makes are merged into the configs sent (a written config of the same
//! key wins), so an EndpointSlice edit is an endpoints-only change, as from the API server.

mod content;
#[cfg(test)]
mod tests;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

pub use content::{Content, FileRead, Stamp};

use crate::registry::cluster::{self, objects::DirectoryObjects};
use axon_config::config::ConfigKey;
use axon_config::config_set::{ConfigSet, compare};
use axon_config::file_set::{FileReport, FileSet, is_config_file};
use axon_config::kubernetes::ObjectKey;
use axon_config::yaml_bounds::YamlBounds;

/// The bounds and windows of a watched directory (from the limits file).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct WatchRules {
    pub settle: Duration,
    pub max_file_bytes: u64,
    pub max_files: usize,
    pub max_yaml_depth: usize,
}

impl Default for WatchRules {
    fn default() -> Self {
        WatchRules {
            settle: Duration::from_secs(1),
            max_file_bytes: 4 << 20,
            max_files: 10_000,
            max_yaml_depth: 64,
        }
    }
}

/// A listing of the directory: every config file with its stamp, and the subdirectories
/// that could not be listed (with why).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Listing {
    pub files: Vec<(PathBuf, Option<Stamp>)>,
    pub unreadable_dirs: Vec<(PathBuf, String)>,
}

/// What a read did.
#[derive(Debug)]
pub enum Applied {
    /// The file could not be read, or was refused: its last good configs are kept. `news`:
    /// not the problem it had already (to report once).
    Kept {
        reason: String,
        read_error: bool,
        news: bool,
    },
    /// A loaded file seen empty or gone: held until `until` (read it again then).
    Held { until: Instant },
    /// Nothing to do: the same text as last applied, or an unknown file that is gone.
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
    /// Config keys and Kubernetes objects defined more than once that were not before.
    pub new_duplicates: Vec<String>,
    pub update: Option<Update>,
}

/// Paths seen changing and not read yet, and whether a rescan was asked for too (an event
/// with no path, or on something that is not a config file).
#[derive(Debug, Default)]
pub struct Pending(Option<(Vec<PathBuf>, bool)>);

impl Pending {
    /// Adds the paths of an event; an empty list asks for a rescan.
    pub fn add(&mut self, paths: Vec<PathBuf>) {
        let (held, rescan) = self.0.get_or_insert_with(Default::default);
        *rescan |= paths.is_empty();
        held.extend(paths);
    }

    /// The paths to read now and whether to rescan, if anything is pending.
    pub fn take(&mut self) -> Option<(Vec<PathBuf>, bool)> {
        self.0.take()
    }
}

fn text_digest(text: &str) -> u64 {
    axon_config::hash::hash_text(text)
}

/// A loaded file seen empty (`Some(digest)`) or gone (`None`), since when.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Held {
    since: Instant,
    digest: Option<u64>,
}

pub struct WatchState {
    rules: WatchRules,
    files: FileSet,
    stamps: BTreeMap<PathBuf, Stamp>,
    /// The text last applied per file: an event for a file whose text did not change (editors
    /// and atomic renames fire several) is not parsed or reported again.
    texts: BTreeMap<PathBuf, u64>,
    reported_kinds: BTreeSet<(String, String)>,
    /// The current problems of each file, as reported.
    errors: BTreeMap<PathBuf, Vec<String>>,
    /// Per file, the fields of its configs accepted and not applied (`/debug/configz`).
    notes: BTreeMap<PathBuf, Vec<String>>,
    /// Files and subdirectories that could not be read, with why (not a clean read).
    read_errors: BTreeMap<PathBuf, String>,
    duplicates: BTreeSet<ConfigKey>,
    object_duplicates: BTreeSet<ObjectKey>,
    /// The Kubernetes objects of the files, translated.
    objects: DirectoryObjects,
    /// What was last committed: the files' configs and the objects' ServiceEntries.
    configs: Arc<ConfigSet>,
    /// Whether `configs` holds ServiceEntries of Kubernetes objects.
    has_entries: bool,
    sent_initial: bool,
    held: BTreeMap<PathBuf, Held>,
    /// Why the directory itself cannot be read now (missing, not listable).
    dir_problem: Option<String>,
    /// Since when the directory has been seen empty before the first update.
    empty_since: Option<Instant>,
}

impl WatchState {
    pub fn new(default_namespace: &str, rules: WatchRules) -> Self {
        Self::with_cluster(default_namespace, rules, &cluster::Settings::default())
    }

    /// A state whose Kubernetes objects are translated with `cluster` (the cluster domain and
    /// the namespace selector of the API server's).
    pub fn with_cluster(
        default_namespace: &str,
        rules: WatchRules,
        cluster: &cluster::Settings,
    ) -> Self {
        let bounds = YamlBounds {
            max_depth: rules.max_yaml_depth,
            max_expanded_bytes: rules.max_file_bytes,
        };
        WatchState {
            rules,
            files: FileSet::new(default_namespace)
                .with_bounds(bounds)
                .with_object_check(cluster::objects::check),
            stamps: BTreeMap::new(),
            texts: BTreeMap::new(),
            reported_kinds: BTreeSet::new(),
            errors: BTreeMap::new(),
            notes: BTreeMap::new(),
            read_errors: BTreeMap::new(),
            duplicates: BTreeSet::new(),
            object_duplicates: BTreeSet::new(),
            objects: DirectoryObjects::new(cluster),
            configs: Arc::default(),
            has_entries: false,
            sent_initial: false,
            held: BTreeMap::new(),
            dir_problem: None,
            empty_since: None,
        }
    }

    pub fn rules(&self) -> &WatchRules {
        &self.rules
    }

    /// Whether the first update was committed.
    pub fn sent_initial(&self) -> bool {
        self.sent_initial
    }

    /// The directory cannot be read (`why`); returns whether that is news. Nothing is read
    /// until [`WatchState::dir_back`].
    pub fn dir_missing(&mut self, why: String) -> bool {
        let news = self.dir_problem.as_ref() != Some(&why);
        self.dir_problem = Some(why);
        news
    }

    /// Whether the directory is known to be unreadable now.
    pub fn dir_problem(&self) -> Option<&str> {
        self.dir_problem.as_deref()
    }

    /// The directory can be read again: what was held is held afresh from `now`, so that
    /// files removed with the directory are dropped only if they stay gone for the settle.
    pub fn dir_back(&mut self, now: Instant) {
        if self.dir_problem.take().is_some() {
            for held in self.held.values_mut() {
                held.since = now;
            }
        }
    }

    /// The paths to read: the config files among `hint`; on a rescan (`listing`), also the
    /// known files that are gone from it (except under a subdirectory that could not be
    /// listed), the present ones whose stamp moved, and the held ones.
    pub fn to_read(&mut self, hint: Vec<PathBuf>, listing: Option<&Listing>) -> BTreeSet<PathBuf> {
        let mut paths: BTreeSet<PathBuf> = hint.into_iter().filter(|p| is_config_file(p)).collect();
        let Some(listing) = listing else {
            return paths;
        };
        // Listing problems are as of this listing; a file's read error is refreshed by reading it.
        self.read_errors.retain(|path, _| is_config_file(path));
        for (dir, why) in &listing.unreadable_dirs {
            self.read_errors
                .insert(dir.clone(), format!("cannot list: {why}"));
        }
        let present: BTreeSet<&PathBuf> = listing.files.iter().map(|(p, _)| p).collect();
        let unlisted = |p: &Path| {
            listing
                .unreadable_dirs
                .iter()
                .any(|(d, _)| p.starts_with(d))
        };
        let known = self.files.paths().chain(self.read_errors.keys());
        let gone: Vec<PathBuf> = known
            .filter(|p| !present.contains(p) && !unlisted(p) && is_config_file(p))
            .cloned()
            .collect();
        paths.extend(gone);
        paths.extend(self.held.keys().cloned());
        for (path, stamp) in &listing.files {
            if stamp.is_none() || self.stamps.get(path) != stamp.as_ref() {
                paths.insert(path.clone());
            }
        }
        paths
    }

    /// When a held file (or the empty directory, before the first update) is next due a look.
    pub fn next_deadline(&self) -> Option<Instant> {
        let held = self.held.values().map(|h| h.since + self.rules.settle);
        let empty = self
            .empty_since
            .filter(|_| !self.sent_initial)
            .map(|since| since + self.rules.settle);
        held.chain(empty).min()
    }

    /// The held paths (to read again at the deadline).
    pub fn held_paths(&self) -> Vec<PathBuf> {
        self.held.keys().cloned().collect()
    }

    /// Applies what was read at `path` at `now`.
    pub fn apply(&mut self, path: &Path, read: FileRead, now: Instant) -> Applied {
        let text = match read.content {
            Content::Text(text) => Some(text),
            Content::Gone => None,
            Content::Unreadable(reason) => return self.keep(path, read.stamp, reason, true),
            Content::Rejected(reason) => return self.keep(path, read.stamp, reason, false),
        };
        self.read_errors.remove(path);
        // Every file read that is there has a stamp: a new one past max_files is refused
        // (without a stamp, so that it stays refused however often it is read).
        if text.is_some()
            && !self.stamps.contains_key(path)
            && self.stamps.len() >= self.rules.max_files
        {
            let reason = format!(
                "more than max_files ({}) config files in the directory; this one is not read",
                self.rules.max_files
            );
            return self.keep(path, None, reason, false);
        }
        let empty = text.as_deref().is_none_or(|t| t.trim().is_empty());
        if empty && self.files.holds_configs(path) {
            let digest = text.as_deref().map(text_digest);
            let held = self
                .held
                .entry(path.to_path_buf())
                .or_insert(Held { since: now, digest });
            if held.digest != digest {
                *held = Held { since: now, digest };
            }
            let until = held.since + self.rules.settle;
            if now < until || self.dir_problem.is_some() {
                return Applied::Held { until };
            }
        }
        self.held.remove(path);
        // A file that is gone has no stamp to compare a rescan with.
        self.record_stamp(path, read.stamp.filter(|_| text.is_some()));
        let digest = text.as_deref().map(text_digest);
        if digest.is_some() && self.texts.get(path) == digest.as_ref() {
            return Applied::Unchanged;
        }
        if digest.is_none() && !self.files.contains(path) {
            self.errors.remove(path);
            return Applied::Unchanged;
        }
        match digest {
            Some(d) => self.texts.insert(path.to_path_buf(), d),
            None => self.texts.remove(path),
        };
        let report = self.files.apply(path, text.as_deref());
        // The notes of the configs served: a file whose previous configs were kept keeps
        // its previous notes.
        if !report.kept_previous {
            let notes: Vec<String> = report.notes.iter().map(ToString::to_string).collect();
            if notes.is_empty() {
                self.notes.remove(path);
            } else {
                self.notes.insert(path.to_path_buf(), notes);
            }
        }
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

    /// A file that cannot be read or is refused: never a deletion. The stamp is recorded so
    /// that a rescan reads it again only when it changes (an event reports a chmod).
    fn keep(&mut self, path: &Path, stamp: Option<Stamp>, reason: String, io: bool) -> Applied {
        self.held.remove(path);
        self.record_stamp(path, stamp);
        self.texts.remove(path);
        let message = vec![format!("{}: {reason}", path.display())];
        let news = self.errors.get(path) != Some(&message);
        self.errors.insert(path.to_path_buf(), message);
        if io {
            self.read_errors.insert(path.to_path_buf(), reason.clone());
        } else {
            self.read_errors.remove(path);
        }
        Applied::Kept {
            reason,
            read_error: io,
            news,
        }
    }

    fn record_stamp(&mut self, path: &Path, stamp: Option<Stamp>) {
        match stamp {
            Some(stamp) => self.stamps.insert(path.to_path_buf(), stamp),
            None => self.stamps.remove(path),
        };
    }

    /// Why the first update cannot be sent yet at `now`, if it cannot.
    pub fn waiting(&self, now: Instant) -> Option<String> {
        if self.sent_initial {
            return None;
        }
        if let Some(problem) = &self.dir_problem {
            return Some(problem.clone());
        }
        if !self.read_errors.is_empty() {
            let list: Vec<String> = self
                .read_errors
                .iter()
                .map(|(p, why)| format!("{}: {why}", p.display()))
                .collect();
            return Some(format!(
                "{} unreadable: {}",
                self.read_errors.len(),
                list.join("; ")
            ));
        }
        match self.empty_since {
            Some(since) if self.files.is_empty() && now < since + self.rules.settle => {
                Some(format!(
                    "the directory has no config file yet; it is served as empty once it stays so for {:?} (file_settle)",
                    self.rules.settle
                ))
            }
            _ => None,
        }
    }

    /// Merges every file's configs; returns the update to send, if the configs changed, or
    /// the first one once the directory was read cleanly.
    pub fn commit(&mut self, now: Instant) -> Committed {
        if !self.sent_initial && self.files.is_empty() && self.empty_since.is_none() {
            self.empty_since = Some(now);
        }
        if self.waiting(now).is_some() {
            return Committed::default();
        }
        let commit = self.files.commit();
        let new_duplicates = commit
            .duplicates
            .difference(&self.duplicates)
            .map(ToString::to_string)
            .chain(
                commit
                    .object_duplicates
                    .difference(&self.object_duplicates)
                    .map(ToString::to_string),
            )
            .collect();
        self.duplicates = commit.duplicates;
        self.object_duplicates = commit.object_duplicates;
        self.objects.apply(&commit.objects, self.files.objects());
        let entries = self.objects.configs();
        let had_entries = std::mem::replace(&mut self.has_entries, !entries.is_empty());
        let (configs, changed, endpoints_only) = if entries.is_empty() && !had_entries {
            (self.files.configs(), commit.changed, commit.endpoints_only)
        } else {
            // The objects' ServiceEntries under the files' configs: a written config of the
            // same key wins.
            let mut merged = (*entries).clone();
            merged.extend(
                self.files
                    .configs()
                    .iter()
                    .map(|(k, v)| (k.clone(), v.clone())),
            );
            let (changed, endpoints_only) = compare(&self.configs, &merged);
            (Arc::new(merged), changed, endpoints_only)
        };
        self.configs = configs.clone();
        if changed.is_empty() && self.sent_initial {
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
                configs,
                changed,
                endpoints_only,
                initial,
            }),
        }
    }

    /// The configs held and the problems found (`/debug/configz`).
    pub fn configz(&self, source: &str, dir: &Path) -> serde_json::Value {
        let configs: Vec<_> = self.configs.values().cloned().collect();
        serde_json::json!({
            "source": source,
            "dir": dir.display().to_string(),
            "dir_problem": self.dir_problem,
            "configs": configs,
            "objects": self.objects.counts(),
            "errors": self.errors.values().flatten().cloned().chain(
                self.read_errors
                    .iter()
                    .filter(|(p, _)| !self.errors.contains_key(*p))
                    .map(|(p, why)| format!("{}: {why}", p.display()))
            ).collect::<Vec<_>>(),
            "held": self.held.keys().map(|p| p.display().to_string()).collect::<Vec<_>>(),
            "not_applied": self.notes.values().flatten().cloned().collect::<Vec<_>>(),
            "unsupported_kinds": self
                .reported_kinds
                .iter()
                .map(|(v, k)| format!("{k} ({v})"))
                .collect::<Vec<_>>(),
        })
    }
}
