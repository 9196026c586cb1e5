//! The FileRegistry: watches a directory of Istio YAML and reports its configs.
//!
//! Owns a [`FileSet`] and a file-system watcher. File events (and a periodic rescan for
//! what events miss) reload the touched files; when the merged configs differ, it sends a
//! [`ConfigUpdate`] naming the changed keys to the Debouncer. A file saved again with the
//! same spec sends nothing. Errors are logged with the path, document and reason.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime};

use actix::prelude::*;
use notify::{RecursiveMode, Watcher};

use super::GetConfigz;
use super::outbox::Outbox;
use crate::actors::mailbox;
use crate::metrics::Metrics;
use crate::model::config_set::{FILES as SOURCE, SourceId};
use crate::model::file_set::{FileSet, is_config_file};

/// The source id of the config directory.
pub const FILES: SourceId = SOURCE;

/// Paths that the watcher saw change; empty means "rescan everything".
#[derive(Message)]
#[rtype(result = "()")]
pub struct FilesChanged {
    pub paths: Vec<PathBuf>,
    /// The files may still be being written (a plain modification): wait for [`SETTLE`] of
    /// quiet before reading. A closed-after-write, created, renamed or removed file is read
    /// at once.
    pub settle: bool,
}

/// Lists the config files under `dir`, recursively, in path order.
pub fn list_config_files(dir: &Path) -> std::io::Result<Vec<PathBuf>> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d)? {
            let path = entry?.path();
            let hidden = path
                .file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with('.'));
            if path.is_dir() && !hidden {
                stack.push(path);
            } else if is_config_file(&path) {
                out.push(path);
            }
        }
    }
    out.sort();
    Ok(out)
}

fn text_digest(text: &str) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    text.hash(&mut h);
    h.finish()
}

pub struct FileRegistry {
    dir: PathBuf,
    files: FileSet,
    stamps: BTreeMap<PathBuf, (SystemTime, u64)>,
    /// The text last applied per file: an event for a file whose text did not change (editors
    /// and atomic renames fire several) is not parsed or reported again.
    texts: BTreeMap<PathBuf, u64>,
    out: Outbox,
    metrics: Metrics,
    rescan_interval: Duration,
    reported_kinds: BTreeSet<(String, String)>,
    /// The current problems of each file, as reported.
    errors: BTreeMap<PathBuf, Vec<String>>,
    duplicates: BTreeSet<crate::model::config::ConfigKey>,
    watcher: Option<notify::RecommendedWatcher>,
    sent_initial: bool,
    /// Paths seen changing and not read yet (an empty list means "rescan"), and the timer that
    /// reads them once the files have been quiet for [`SETTLE`].
    pending: Option<Vec<PathBuf>>,
    settle: Option<SpawnHandle>,
    /// Files found empty once, and those to read again after SETTLE.
    emptied: BTreeSet<PathBuf>,
    deferred: Vec<PathBuf>,
}

/// How long a changed file must be quiet before it is read: an editor that truncates and then
/// writes a file in place fires several events, and the file is read once, complete.
pub const SETTLE: Duration = Duration::from_millis(50);

impl FileRegistry {
    pub fn new(
        dir: PathBuf,
        default_namespace: &str,
        out: Outbox,
        metrics: Metrics,
        rescan_interval: Duration,
    ) -> Self {
        // Events name absolute paths: hold the directory the same way, so that a file is
        // never known under two names.
        let dir = std::fs::canonicalize(&dir).unwrap_or(dir);
        FileRegistry {
            dir,
            files: FileSet::new(default_namespace),
            stamps: BTreeMap::new(),
            texts: BTreeMap::new(),
            out,
            metrics,
            rescan_interval,
            reported_kinds: BTreeSet::new(),
            errors: BTreeMap::new(),
            duplicates: BTreeSet::new(),
            watcher: None,
            sent_initial: false,
            pending: None,
            settle: None,
            emptied: BTreeSet::new(),
            deferred: Vec::new(),
        }
    }

    /// Paths to reload: those given, or every known and present file on a rescan whose
    /// modification time or size changed.
    fn dirty_paths(&mut self, hint: Vec<PathBuf>) -> BTreeSet<PathBuf> {
        let rescan = hint.is_empty();
        let mut paths: BTreeSet<PathBuf> = hint.into_iter().filter(|p| is_config_file(p)).collect();
        if rescan {
            let present = match list_config_files(&self.dir) {
                Ok(p) => p,
                Err(e) => {
                    tracing::warn!(dir = %self.dir.display(), error = %e, "cannot list config directory");
                    return paths;
                }
            };
            let present_set: BTreeSet<&PathBuf> = present.iter().collect();
            paths.extend(
                self.files
                    .paths()
                    .filter(|p| !present_set.contains(p))
                    .cloned(),
            );
            for path in present {
                let stamp = std::fs::metadata(&path)
                    .ok()
                    .map(|m| (m.modified().unwrap_or(SystemTime::UNIX_EPOCH), m.len()));
                if stamp.is_none() || self.stamps.get(&path) != stamp.as_ref() {
                    paths.insert(path);
                }
            }
        }
        paths
    }

    fn reload(&mut self, hint: Vec<PathBuf>) {
        let started = Instant::now();
        let paths = self.dirty_paths(hint);
        if paths.is_empty() && self.sent_initial {
            return;
        }
        for path in &paths {
            let text = std::fs::read_to_string(path).ok();
            let empty = text.as_deref().is_some_and(|t| t.trim().is_empty());
            if empty && self.texts.contains_key(path) && self.emptied.insert(path.clone()) {
                // A loaded file seen empty is most likely being rewritten in place (truncated,
                // not yet written): look again after SETTLE before dropping its configs.
                self.deferred.push(path.clone());
                continue;
            }
            self.emptied.remove(path);
            match std::fs::metadata(path) {
                Ok(m) if text.is_some() => {
                    self.stamps.insert(
                        path.clone(),
                        (m.modified().unwrap_or(SystemTime::UNIX_EPOCH), m.len()),
                    );
                }
                _ => {
                    self.stamps.remove(path);
                }
            }
            let digest = text.as_deref().map(text_digest);
            if digest.is_some() && self.texts.get(path) == digest.as_ref() {
                continue;
            }
            match digest {
                Some(d) => self.texts.insert(path.clone(), d),
                None => self.texts.remove(path),
            };
            let report = self.files.apply(path, text.as_deref());
            let problems: Vec<String> = report.errors.iter().map(ToString::to_string).collect();
            if problems.is_empty() {
                self.errors.remove(path);
            } else {
                self.errors.insert(path.clone(), problems);
            }
            for error in &report.errors {
                tracing::warn!(
                    path = %error.path.display(),
                    document = error.index,
                    line = error.line,
                    error = %error.error,
                    kept_previous = report.kept_previous,
                    "invalid config: {error}"
                );
            }
            for (api_version, kind) in report.unsupported {
                if self
                    .reported_kinds
                    .insert((api_version.clone(), kind.clone()))
                {
                    tracing::info!(path = %path.display(), %api_version, %kind, "kind not served by axon, skipped");
                }
            }
        }
        let commit = self.files.commit();
        for key in commit.duplicates.difference(&self.duplicates) {
            tracing::warn!(config = %key, "config defined more than once; the last file in path order wins");
        }
        self.duplicates = commit.duplicates;
        if commit.changed.is_empty() && self.sent_initial {
            tracing::debug!(files = paths.len(), "files reloaded, no config changed");
            return;
        }
        self.sent_initial = true;
        let configs = self.files.configs();
        tracing::info!(
            files = paths.len(),
            configs = configs.len(),
            changed = commit.changed.len(),
            took_ms = started.elapsed().as_secs_f64() * 1e3,
            "config directory loaded"
        );
        self.out
            .publish_changes(configs, commit.changed, commit.endpoints_only, started);
    }

    fn watch(&mut self, ctx: &mut Context<Self>) {
        let addr = ctx.address();
        let metrics = self.metrics.clone();
        let send = move |paths: Vec<PathBuf>, settle: bool| {
            mailbox::tell_addr(
                &metrics,
                "file_registry",
                &addr,
                FilesChanged { paths, settle },
            );
        };
        let handler = move |res: notify::Result<notify::Event>| {
            use notify::EventKind;
            use notify::event::{AccessKind, AccessMode, ModifyKind};
            match res {
                Ok(event) if event.need_rescan() => send(Vec::new(), false),
                Ok(event) => match event.kind {
                    EventKind::Access(AccessKind::Close(AccessMode::Write))
                    | EventKind::Create(_)
                    | EventKind::Remove(_)
                    | EventKind::Modify(ModifyKind::Name(_)) => send(event.paths, false),
                    EventKind::Modify(_) | EventKind::Any | EventKind::Other => {
                        send(event.paths, true)
                    }
                    EventKind::Access(_) => {}
                },
                Err(e) => {
                    tracing::warn!(error = %e, "file watch error; rescanning");
                    send(Vec::new(), false);
                }
            }
        };
        match notify::recommended_watcher(handler) {
            Ok(mut watcher) => match watcher.watch(&self.dir, RecursiveMode::Recursive) {
                Ok(()) => self.watcher = Some(watcher),
                Err(e) => {
                    tracing::warn!(dir = %self.dir.display(), error = %e, "cannot watch; relying on periodic rescans")
                }
            },
            Err(e) => tracing::warn!(error = %e, "no file watcher; relying on periodic rescans"),
        }
    }
}

impl Actor for FileRegistry {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Context<Self>) {
        self.watch(ctx);
        self.reload(Vec::new());
        ctx.run_interval(self.rescan_interval, |act, _| act.reload(Vec::new()));
    }
}

impl Handler<GetConfigz> for FileRegistry {
    type Result = MessageResult<GetConfigz>;

    fn handle(&mut self, _: GetConfigz, _: &mut Context<Self>) -> Self::Result {
        let configs: Vec<_> = self.files.configs().values().cloned().collect();
        MessageResult(serde_json::json!({
            "source": SOURCE,
            "dir": self.dir.display().to_string(),
            "configs": configs,
            "errors": self.errors.values().flatten().collect::<Vec<_>>(),
            "unsupported_kinds": self
                .reported_kinds
                .iter()
                .map(|(v, k)| format!("{k} ({v})"))
                .collect::<Vec<_>>(),
        }))
    }
}

impl FileRegistry {
    /// Reads again, after SETTLE, the files that were found empty.
    fn recheck_deferred(&mut self, ctx: &mut Context<Self>) {
        if self.deferred.is_empty() {
            return;
        }
        let paths = std::mem::take(&mut self.deferred);
        ctx.run_later(SETTLE, move |act, ctx| {
            act.reload(paths);
            act.recheck_deferred(ctx);
        });
    }
}

impl Handler<FilesChanged> for FileRegistry {
    type Result = ();

    fn handle(&mut self, msg: FilesChanged, ctx: &mut Context<Self>) {
        let started = Instant::now();
        match (&mut self.pending, msg.paths.is_empty()) {
            (Some(paths), false) if !paths.is_empty() => paths.extend(msg.paths),
            (Some(paths), true) => paths.clear(),
            (Some(_), false) => {}
            (None, _) => self.pending = Some(msg.paths),
        }
        if let Some(timer) = self.settle.take() {
            ctx.cancel_future(timer);
        }
        if msg.settle {
            self.settle = Some(ctx.run_later(SETTLE, |act, ctx| {
                act.settle = None;
                if let Some(paths) = act.pending.take() {
                    act.reload(paths);
                }
                act.recheck_deferred(ctx);
            }));
        } else if let Some(paths) = self.pending.take() {
            self.reload(paths);
        }
        self.recheck_deferred(ctx);
        self.metrics.handled("file_registry", started);
    }
}
