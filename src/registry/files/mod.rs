//! The FileRegistry: watches a directory of Istio YAML and reports its configs; a shell over
//! the pure [`WatchState`] (in [`watch`]).
//!
//! Owns a file-system watcher and the timers. File events (and a periodic rescan for what
//! events miss) reload the touched files; when the merged configs differ, it sends a
//! `ConfigUpdate` naming the changed keys through its [`Outbox`]. A file saved again with the
//! same spec sends nothing. Errors are logged with the path, document and reason. It runs on
//! a thread of its own (the wiring starts it in its own arbiter), so that reading and
//! parsing never delay the pipeline actors.

pub mod watch;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime};

use actix::prelude::*;
use notify::{RecursiveMode, Watcher};

use super::outbox::Outbox;
use crate::actors::mailbox;
use crate::actors::messages::GetConfigz;
use crate::metrics::Metrics;
use crate::model::config_set::FILES as SOURCE;
use crate::model::file_set::is_config_file;
use watch::{Applied, Content, FileRead, Pending, Stamp, WatchState};

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

/// The config files under a directory, and the directories skipped because the walk had
/// read them already (a symlink to a directory above or beside: a loop).
#[derive(Debug, Default, PartialEq)]
pub struct ConfigTree {
    pub files: Vec<PathBuf>,
    pub loops: Vec<PathBuf>,
}

/// Walks `dir` recursively, following a symlink to a directory only to a directory it has
/// not read yet (by device and inode), so that two symlinks to `.` cannot make it endless.
pub fn list_config_tree(dir: &Path) -> std::io::Result<ConfigTree> {
    let mut tree = ConfigTree::default();
    let mut seen = BTreeSet::new();
    seen.insert(dir_id(dir, &std::fs::metadata(dir)?)?);
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let mut entries = std::fs::read_dir(&d)?
            .map(|e| e.map(|e| e.path()))
            .collect::<std::io::Result<Vec<PathBuf>>>()?;
        // Real directories before symlinks to them: a directory is read under its own name.
        entries.sort_by_cached_key(|p| (p.is_symlink(), p.clone()));
        for path in entries {
            let hidden = path
                .file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with('.'));
            // One stat per entry (following symlinks); an entry that cannot be stat'ed (a
            // dangling symlink, one gone meanwhile) is not a directory.
            match std::fs::metadata(&path) {
                Ok(meta) if meta.is_dir() => {
                    if hidden {
                        continue;
                    }
                    if seen.insert(dir_id(&path, &meta)?) {
                        stack.push(path);
                    } else {
                        tree.loops.push(path);
                    }
                }
                _ if is_config_file(&path) => tree.files.push(path),
                _ => {}
            }
        }
    }
    tree.files.sort();
    tree.loops.sort();
    Ok(tree)
}

/// What identifies a directory however it is reached: its device and inode.
#[cfg(unix)]
fn dir_id(_: &Path, meta: &std::fs::Metadata) -> std::io::Result<(u64, u64)> {
    use std::os::unix::fs::MetadataExt;
    Ok((meta.dev(), meta.ino()))
}

#[cfg(not(unix))]
fn dir_id(dir: &Path, _: &std::fs::Metadata) -> std::io::Result<PathBuf> {
    std::fs::canonicalize(dir)
}

pub struct FileRegistry {
    dir: PathBuf,
    state: WatchState,
    out: Outbox,
    metrics: Metrics,
    rescan_interval: Duration,
    watcher: Option<notify::RecommendedWatcher>,
    /// Paths seen changing and not read yet, and the timer that reads them once the files
    /// have been quiet for [`SETTLE`].
    pending: Pending,
    settle: Option<SpawnHandle>,
    /// Files found empty, to read again after SETTLE.
    deferred: Vec<PathBuf>,
    /// Directory loops already reported.
    loops: BTreeSet<PathBuf>,
}

/// How long a changed file must be quiet before it is read: an editor that truncates and then
/// writes a file in place fires several events, and the file is read once, complete.
pub const SETTLE: Duration = Duration::from_millis(50);

fn stamp(path: &Path) -> Option<Stamp> {
    std::fs::metadata(path)
        .ok()
        .map(|m| (m.modified().unwrap_or(SystemTime::UNIX_EPOCH), m.len()))
}

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
            state: WatchState::new(default_namespace),
            out,
            metrics,
            rescan_interval,
            watcher: None,
            pending: Pending::default(),
            settle: None,
            deferred: Vec::new(),
            loops: BTreeSet::new(),
        }
    }

    /// Paths to reload: those given, or, on a rescan (none given), also every known file
    /// that is gone and every present one whose modification time or size changed.
    fn paths_to_read(&mut self, hint: Vec<PathBuf>) -> BTreeSet<PathBuf> {
        let present = if hint.is_empty() {
            match list_config_tree(&self.dir) {
                Ok(tree) => Some(
                    self.report_loops(tree)
                        .into_iter()
                        .map(|p| {
                            let s = stamp(&p);
                            (p, s)
                        })
                        .collect(),
                ),
                Err(e) => {
                    tracing::warn!(dir = %self.dir.display(), error = %e, "cannot list config directory");
                    None
                }
            }
        } else {
            None
        };
        self.state.to_read(hint, present)
    }

    /// Logs each directory loop once; returns the files.
    fn report_loops(&mut self, tree: ConfigTree) -> Vec<PathBuf> {
        for path in &tree.loops {
            if self.loops.insert(path.clone()) {
                tracing::warn!(
                    path = %path.display(),
                    "directory loop: a directory already read (a symlink to it); skipped"
                );
            }
        }
        tree.files
    }

    fn reload(&mut self, hint: Vec<PathBuf>) {
        let started = Instant::now();
        let paths = self.paths_to_read(hint);
        if paths.is_empty() && self.state.sent_initial() {
            return;
        }
        for path in &paths {
            let read = FileRead {
                content: Content::read(path),
                stamp: stamp(path),
            };
            match self.state.apply(path, read) {
                Applied::Unreadable { reason } => {
                    self.metrics.config_read_errors.inc();
                    tracing::warn!(
                        path = %path.display(),
                        %reason,
                        "config file unreadable; its last good configs are kept"
                    );
                }
                Applied::Deferred => self.deferred.push(path.clone()),
                Applied::Unchanged => {}
                Applied::Parsed { report, new_kinds } => {
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
                    for (api_version, kind) in new_kinds {
                        tracing::info!(path = %path.display(), %api_version, %kind, "kind not served by axon, skipped");
                    }
                }
            }
        }
        let committed = self.state.commit();
        for key in &committed.new_duplicates {
            tracing::warn!(config = %key, "config defined more than once; the last file in path order wins");
        }
        let Some(update) = committed.update else {
            tracing::debug!(files = paths.len(), "files reloaded, no config changed");
            return;
        };
        tracing::info!(
            files = paths.len(),
            configs = update.configs.len(),
            changed = update.changed.len(),
            took_ms = started.elapsed().as_secs_f64() * 1e3,
            "config directory loaded"
        );
        self.out.publish_changes(
            update.configs,
            update.changed,
            update.endpoints_only,
            started,
        );
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
        MessageResult(self.state.configz(SOURCE, &self.dir))
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
        self.pending.add(msg.paths);
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

#[cfg(test)]
mod tests {
    use super::*;

    #[cfg(unix)]
    #[test]
    fn the_walk_reads_each_directory_once_and_reports_loops() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        std::fs::create_dir(root.join("sub")).unwrap();
        std::fs::write(root.join("a.yaml"), "").unwrap();
        std::fs::write(root.join("sub/b.yaml"), "").unwrap();
        std::os::unix::fs::symlink(".", root.join("self")).unwrap();
        std::os::unix::fs::symlink("..", root.join("sub/up")).unwrap();
        std::os::unix::fs::symlink("sub", root.join("again")).unwrap();
        let tree = list_config_tree(root).unwrap();
        assert_eq!(tree.files, [root.join("a.yaml"), root.join("sub/b.yaml")]);
        assert_eq!(
            tree.loops.len(),
            3,
            "self, sub/up and again (or sub): {tree:?}"
        );
    }
}
