//! Reloads `wedge.toml` on SIGHUP or when the file changes: a valid file's apps are
//! swapped in without dropping a connection; an invalid one is refused (every
//! problem logged) and the previous apps keep serving.

use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use notify::{RecommendedWatcher, RecursiveMode};
use notify_debouncer_mini::{DebounceEventResult, Debouncer, new_debouncer};
use tokio::signal::unix::{SignalKind, signal};
use tokio::sync::Notify;

use crate::config;
use crate::host::Compile;
use crate::tenancy::Tenancy;

/// Saves in quick succession (an editor's write and rename) make one reload.
const DEBOUNCE: Duration = Duration::from_millis(200);

/// The listeners a config names: they are bound once, at start.
type Listeners = (Option<SocketAddr>, Option<SocketAddr>);

/// What a reload cannot change, as wedge started: a change of it in the file is
/// reported as needing a restart.
#[derive(Clone, Copy)]
pub struct AtStart {
    pub listeners: Listeners,
    /// `--compile`, which wins over the file's `compile`.
    pub compile_flag: Option<Compile>,
    /// The compile mode the engines were built for.
    pub compile: Compile,
}

/// Reloads `path` into `tenancy` on every SIGHUP or change of the file, until the
/// process ends. The watch (file and signal) is set up before this returns, so no
/// change made after it is missed; the returned future does the reloading.
pub fn reload_on_change(
    path: PathBuf,
    at_start: AtStart,
    tenancy: Arc<Tenancy>,
) -> impl Future<Output = ()> {
    let changed = Arc::new(Notify::new());
    let watcher = match watch_file(&path, changed.clone()) {
        Ok(watcher) => Some(watcher),
        Err(err) => {
            tracing::warn!(
                "not watching {} for changes ({err:#}); SIGHUP reloads it",
                path.display()
            );
            None
        }
    };
    let mut hangup = match signal(SignalKind::hangup()) {
        Ok(hangup) => Some(hangup),
        Err(err) => {
            tracing::warn!("cannot watch SIGHUP: {err}");
            None
        }
    };
    async move {
        let _watcher = watcher;
        loop {
            tokio::select! {
                _ = changed.notified() => tracing::info!("{} changed: reloading", path.display()),
                Some(()) = async { hangup.as_mut()?.recv().await } => {
                    tracing::info!("SIGHUP: reloading {}", path.display());
                }
            }
            reload(&path, at_start, &tenancy).await;
        }
    }
}

async fn reload(path: &Path, at_start: AtStart, tenancy: &Tenancy) {
    let config = match config::load(path) {
        Ok(config) => config,
        Err(errors) => {
            for line in errors.to_string().lines() {
                tracing::warn!("{line}");
            }
            tracing::warn!("config reload refused: still serving the previous config");
            return;
        }
    };
    if (config.listen, config.tls.as_ref().map(|t| t.listen)) != at_start.listeners {
        tracing::warn!(
            "listener addresses changed in {}: they take effect after a restart",
            path.display()
        );
    }
    // The engines are built for one mode, once.
    let compile = at_start.compile_flag.or(config.compile).unwrap_or_default();
    if compile != at_start.compile {
        tracing::warn!(
            "compile mode changed to `{compile}` in {}: it takes effect after a restart \
             (until then components are compiled `{}`)",
            path.display(),
            at_start.compile
        );
    }
    let count = config.apps.len();
    match tenancy.reconfigure(config.apps).await {
        Ok(()) => tracing::info!("config reloaded: {count} configured app(s) serving"),
        Err(err) => {
            tracing::warn!("config reload refused ({err:#}): still serving the previous config")
        }
    }
}

/// Signals `changed` when the file at `path` is written, replaced or removed.
///
/// The directory holding `path` is watched, not the file: editors replace files by
/// renaming, and a Kubernetes ConfigMap volume never touches the file's own entry —
/// `wedge.toml` is a symlink to `..data/wedge.toml`, and an update swaps the `..data`
/// symlink to a new timestamped directory, then deletes the old one. So the event's
/// path says little; what counts is whether what `path` resolves to changed
/// ([`Identity`]), checked after every batch of events in the watched directories:
/// `path`'s own and, if it resolves elsewhere, the target's (in-place edits there).
fn watch_file(path: &Path, changed: Arc<Notify>) -> anyhow::Result<Debouncer<RecommendedWatcher>> {
    let given = std::path::absolute(path)?;
    let dirs: BTreeSet<PathBuf> = [given.clone(), given.canonicalize()?]
        .iter()
        .filter_map(|file| file.parent().map(Path::to_path_buf))
        .collect();
    let mut last = Identity::of(&given);
    let mut debouncer = new_debouncer(DEBOUNCE, move |result: DebounceEventResult| {
        if result.is_err() {
            return;
        }
        let now = Identity::of(&given);
        if now != last {
            last = now;
            changed.notify_one();
        }
    })?;
    for dir in &dirs {
        debouncer
            .watcher()
            .watch(dir, RecursiveMode::NonRecursive)?;
    }
    Ok(debouncer)
}

/// What the config path resolves to now, without reading it: the file at the end of
/// its symlinks and that file's device, inode, size and modification time. A rename
/// or symlink swap changes the inode or target; a write in place the size or mtime.
/// `None`s when it does not resolve (removed): a change too.
#[derive(PartialEq)]
struct Identity {
    target: Option<PathBuf>,
    file: Option<(u64, u64, u64, Option<SystemTime>)>,
}

impl Identity {
    fn of(path: &Path) -> Identity {
        Identity {
            target: path.canonicalize().ok(),
            file: std::fs::metadata(path)
                .ok()
                .map(|meta| (meta.dev(), meta.ino(), meta.len(), meta.modified().ok())),
        }
    }
}
