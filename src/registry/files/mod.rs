//! The FileRegistry: watches a directory of Istio YAML (and of Kubernetes Services,
//! EndpointSlices, Pods and Namespaces, translated as the API server's) and reports its
//! configs; a shell over the pure [`WatchState`] (in [`watch`]), which holds the fault rules.
//!
//! Owns a file-system watcher and the timers. File events (and a periodic rescan for what
//! events miss) reload the touched files; an event on anything but a config file (a
//! directory, a Kubernetes ConfigMap's `..data` symlink swap) rescans. When the merged configs
//! differ, it sends a `ConfigUpdate` naming the changed keys through its [`Outbox`]. The
//! directory is held by the path it was given (not resolved), so that a symlinked directory
//! swapped for another is followed; when it is removed or replaced, the watch is set up again
//! once it is back. Errors are logged with the path, document and reason. It runs on a thread
//! of its own (the wiring starts it in its own arbiter), so that reading and parsing never
//! delay the pipeline actors.

mod tree;
pub mod watch;

pub use tree::{ConfigTree, DirId, dir_id, list_config_tree};

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime};

use actix::prelude::*;
use notify::{RecursiveMode, Watcher};

use super::outbox::Outbox;
use crate::actors::mailbox;
use crate::actors::messages::{GetConfigz, GetWaiting};
use axon_config::config_set::FILES as SOURCE;
use axon_config::file_set::is_config_file;
use axon_metrics::Metrics;
use watch::{Applied, Content, FileRead, Listing, Pending, Stamp, WatchRules, WatchState};

/// Paths that the watcher saw change; empty means "rescan everything".
#[derive(Message)]
#[rtype(result = "()")]
pub struct FilesChanged {
    pub paths: Vec<PathBuf>,
    /// The files may still be being written (a plain modification): wait for `file_settle`
    /// of quiet before reading. A closed-after-write, created, renamed or removed file is
    /// read at once.
    pub settle: bool,
}

/// The FileRegistry's windows and bounds (from the limits file), and how it translates the
/// Kubernetes objects of its files (as the Kubernetes registry does).
#[derive(Debug, Clone)]
pub struct FileSettings {
    pub rescan_interval: Duration,
    pub rules: WatchRules,
    pub cluster: crate::registry::cluster::Settings,
}

pub struct FileRegistry {
    dir: PathBuf,
    state: WatchState,
    out: Outbox,
    metrics: Metrics,
    rescan_interval: Duration,
    watcher: Option<notify::RecommendedWatcher>,
    /// The directory the watcher was set up on (it follows that inode, not the path).
    watched: Option<DirId>,
    /// Paths seen changing and not read yet, and the timer that reads them once the files
    /// have been quiet for `file_settle` (at most four times that after the first).
    pending: Pending,
    pending_since: Option<Instant>,
    settle: Option<SpawnHandle>,
    /// The timer that looks again at held files, an empty directory, or a missing one.
    recheck: Option<(Instant, SpawnHandle)>,
    /// Directory loops and waiting reasons already reported.
    loops: BTreeSet<PathBuf>,
    reported_waiting: Option<String>,
    reported_watch_error: Option<String>,
}

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
        settings: FileSettings,
    ) -> Self {
        // Events name the paths under the one watched: hold the directory absolute, as given
        // (not resolved), so that a file is known under one name and a swapped symlink is
        // followed.
        let dir = std::path::absolute(&dir).unwrap_or(dir);
        FileRegistry {
            dir,
            state: WatchState::with_cluster(default_namespace, settings.rules, &settings.cluster),
            out,
            metrics,
            rescan_interval: settings.rescan_interval,
            watcher: None,
            watched: None,
            pending: Pending::default(),
            pending_since: None,
            settle: None,
            recheck: None,
            loops: BTreeSet::new(),
            reported_waiting: None,
            reported_watch_error: None,
        }
    }

    /// The directory's identity now, or why it cannot be read.
    fn dir_now(&self) -> Result<DirId, String> {
        match std::fs::metadata(&self.dir) {
            Ok(meta) if meta.is_dir() => dir_id(&self.dir, &meta).map_err(|e| e.to_string()),
            Ok(_) => Err(format!("{} is not a directory", self.dir.display())),
            Err(e) => Err(format!(
                "cannot read the config directory {}: {e}",
                self.dir.display()
            )),
        }
    }

    /// The listing of a rescan, or why the directory cannot be listed.
    fn listing(&mut self) -> Result<Listing, String> {
        let tree = list_config_tree(&self.dir).map_err(|e| {
            format!(
                "cannot list the config directory {}: {e}",
                self.dir.display()
            )
        })?;
        for path in &tree.loops {
            if self.loops.insert(path.clone()) {
                tracing::warn!(
                    path = %path.display(),
                    "directory loop: a directory already read (a symlink to it); skipped"
                );
            }
        }
        for (dir, why) in &tree.unreadable_dirs {
            tracing::warn!(path = %dir.display(), reason = %why, "cannot list a config subdirectory; the configs of its files are kept");
        }
        Ok(Listing {
            files: tree
                .files
                .into_iter()
                .map(|p| {
                    let s = stamp(&p);
                    (p, s)
                })
                .collect(),
            unreadable_dirs: tree.unreadable_dirs,
        })
    }

    /// The directory cannot be read: keep everything, say so once, look again soon.
    fn directory_fault(&mut self, why: String) {
        if self.state.dir_missing(why.clone()) {
            self.metrics.config_read_errors.inc();
            tracing::warn!(dir = %self.dir.display(), reason = %why, "config directory unreadable; its last good configs are kept until it is back");
        }
        // The watch (if any) is on what was there: set it up again when the directory is back.
        self.watched = None;
        self.watcher = None;
    }

    /// Reads the files named in `hint`, and on a `rescan` every file whose stamp moved and
    /// every known file gone from the listing.
    fn reload(&mut self, ctx: &mut Context<Self>, hint: Vec<PathBuf>, mut rescan: bool) {
        let started = Instant::now();
        match self.dir_now() {
            Err(why) => {
                self.directory_fault(why);
                self.report_waiting();
                return self.schedule_recheck(ctx);
            }
            Ok(id) if self.watched.as_ref() != Some(&id) => {
                // First read, or the directory is back or was replaced: watch it anew and
                // read it all.
                self.watch(ctx, id);
                rescan = true;
            }
            Ok(_) => {}
        }
        let listing = if rescan {
            match self.listing() {
                Ok(listing) => Some(listing),
                Err(why) => {
                    self.directory_fault(why);
                    self.report_waiting();
                    return self.schedule_recheck(ctx);
                }
            }
        } else {
            None
        };
        self.state.dir_back(started);
        let paths = self.state.to_read(hint, listing.as_ref());
        let max_bytes = self.state.rules().max_file_bytes;
        for path in &paths {
            let read = FileRead {
                content: Content::read(path, max_bytes),
                stamp: stamp(path),
            };
            let applied = self.state.apply(path, read, Instant::now());
            self.report(path, applied);
        }
        let committed = self.state.commit(Instant::now());
        for key in &committed.new_duplicates {
            tracing::warn!(config = %key, "config or object defined more than once; the last file in path order wins");
        }
        self.report_waiting();
        self.schedule_recheck(ctx);
        let Some(update) = committed.update else {
            tracing::debug!(files = paths.len(), "files reloaded, no config changed");
            self.out.unchanged();
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

    fn report(&self, path: &Path, applied: Applied) {
        match applied {
            Applied::Kept { news: false, .. } => {}
            Applied::Kept {
                reason, read_error, ..
            } => {
                self.metrics.config_read_errors.inc();
                if read_error {
                    tracing::warn!(path = %path.display(), %reason, "config file unreadable; its last good configs are kept");
                } else {
                    tracing::warn!(path = %path.display(), %reason, "config file rejected; its last good configs are kept");
                }
            }
            Applied::Held { .. } => tracing::info!(
                path = %path.display(),
                "config file emptied or removed; its configs are dropped if it stays so for file_settle"
            ),
            Applied::Unchanged => {}
            Applied::Parsed { report, new_kinds } => {
                for error in &report.errors {
                    if matches!(error.error, axon_config::parse::DocError::Secret(_)) {
                        self.metrics.sds_certificate_errors.inc();
                    }
                    tracing::warn!(
                        path = %error.path.display(),
                        document = error.index,
                        line = error.line,
                        error = %error.error,
                        kept_previous = report.kept_previous,
                        "invalid config: {error}"
                    );
                }
                for note in &report.notes {
                    tracing::warn!(
                        path = %note.path.display(),
                        document = note.index,
                        line = note.note.line,
                        field = %note.note.path,
                        "{note}"
                    );
                }
                // Istio and Gateway API kinds axon does not apply: a warning at every load of
                // the file (what they say is not enforced); other kinds once, as skipped.
                let mut warned = std::collections::BTreeSet::new();
                for (api_version, kind) in &report.unsupported {
                    if axon_config::parse::drops_meaning(api_version)
                        && warned.insert((api_version, kind))
                    {
                        tracing::warn!(path = %path.display(), %api_version, %kind, "kind not applied by axon: what its documents say is not enforced");
                    }
                }
                for (api_version, kind) in new_kinds {
                    if !axon_config::parse::drops_meaning(&api_version) {
                        tracing::info!(path = %path.display(), %api_version, %kind, "kind not served by axon, skipped");
                    }
                }
            }
        }
    }

    /// Logs why the first update waits, when that changes.
    fn report_waiting(&mut self) {
        let waiting = self.state.waiting(Instant::now());
        if waiting != self.reported_waiting {
            if let Some(why) = &waiting {
                tracing::warn!(dir = %self.dir.display(), reason = %why, "config directory not served yet");
            }
            self.reported_waiting = waiting;
        }
    }

    /// Arms the timer for the next look: held files or an empty directory at their deadline,
    /// a missing directory every `file_settle`.
    fn schedule_recheck(&mut self, ctx: &mut Context<Self>) {
        let settle = self.state.rules().settle;
        let unwatched = self.state.dir_problem().is_some() || self.watched.is_none();
        let at = match (unwatched, self.state.next_deadline()) {
            (true, _) => Instant::now() + settle,
            (false, Some(at)) => at,
            (false, None) => {
                if let Some((_, timer)) = self.recheck.take() {
                    ctx.cancel_future(timer);
                }
                return;
            }
        };
        if self.recheck.as_ref().is_some_and(|(when, _)| *when <= at) {
            return;
        }
        if let Some((_, timer)) = self.recheck.take() {
            ctx.cancel_future(timer);
        }
        let delay = at.saturating_duration_since(Instant::now());
        let timer = ctx.run_later(delay, |act, ctx| {
            act.recheck = None;
            // A missing directory or an empty one is looked at whole; held files by name.
            let whole = act.state.dir_problem().is_some()
                || act.watched.is_none()
                || !act.state.sent_initial();
            let held = act.state.held_paths();
            act.reload(ctx, held, whole);
        });
        self.recheck = Some((at, timer));
    }

    fn watch(&mut self, ctx: &mut Context<Self>, id: DirId) {
        self.watcher = None;
        self.watched = Some(id);
        let addr = ctx.address();
        let metrics = self.metrics.clone();
        let root = self.dir.clone();
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
                // Reads (axon's own among them) change nothing.
                Ok(event) if matches!(event.kind, EventKind::Access(a) if a != AccessKind::Close(AccessMode::Write)) =>
                    {}
                Ok(event) if event.need_rescan() => send(Vec::new(), false),
                // The directory itself, a subdirectory, a symlink swap: rescan.
                Ok(event) if event.paths.contains(&root) => send(Vec::new(), false),
                Ok(event) if !event.paths.iter().all(|p| is_config_file(p)) => {
                    send(Vec::new(), true)
                }
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
        let failed = match notify::recommended_watcher(handler) {
            Ok(mut watcher) => match watcher.watch(&self.dir, RecursiveMode::Recursive) {
                Ok(()) => {
                    self.watcher = Some(watcher);
                    None
                }
                Err(e) => Some(e),
            },
            Err(e) => Some(e),
        };
        if let Some(e) = failed {
            // Most often a subdirectory that cannot be read: look again (and try the watch
            // again) every file_settle until it can.
            self.watched = None;
            if self.reported_watch_error.replace(e.to_string()).is_none() {
                tracing::warn!(dir = %self.dir.display(), error = %e, "cannot watch the config directory; rescanning every file_settle until it can");
            }
        } else {
            self.reported_watch_error = None;
        }
    }
}

impl Actor for FileRegistry {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Context<Self>) {
        self.reload(ctx, Vec::new(), true);
        ctx.run_interval(self.rescan_interval, |act, ctx| {
            act.reload(ctx, Vec::new(), true)
        });
    }
}

impl Handler<GetConfigz> for FileRegistry {
    type Result = MessageResult<GetConfigz>;

    fn handle(&mut self, _: GetConfigz, _: &mut Context<Self>) -> Self::Result {
        MessageResult(self.state.configz(SOURCE, &self.dir))
    }
}

impl Handler<GetWaiting> for FileRegistry {
    type Result = Option<String>;

    fn handle(&mut self, _: GetWaiting, _: &mut Context<Self>) -> Option<String> {
        self.state
            .waiting(Instant::now())
            .map(|why| format!("config directory {}: {why}", self.dir.display()))
    }
}

impl Handler<FilesChanged> for FileRegistry {
    type Result = ();

    fn handle(&mut self, msg: FilesChanged, ctx: &mut Context<Self>) {
        let started = Instant::now();
        self.pending.add(msg.paths);
        let first = *self.pending_since.get_or_insert(started);
        if let Some(timer) = self.settle.take() {
            ctx.cancel_future(timer);
        }
        let settle = self.state.rules().settle;
        // Quiet for `file_settle`, but never more than four times that after the first event,
        // so that a directory that keeps changing is still read.
        let due = (started + settle).min(first + 4 * settle);
        if msg.settle && due > started {
            self.settle = Some(ctx.run_later(due - started, |act, ctx| {
                act.settle = None;
                act.pending_since = None;
                if let Some((paths, rescan)) = act.pending.take() {
                    act.reload(ctx, paths, rescan);
                }
            }));
        } else if let Some((paths, rescan)) = self.pending.take() {
            self.pending_since = None;
            self.reload(ctx, paths, rescan);
        }
        self.metrics.handled("file_registry", started);
    }
}
