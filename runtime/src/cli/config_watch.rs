//! Reloads `wedge.toml` on SIGHUP or when the file changes: a valid file's apps are
//! swapped in without dropping a connection; an invalid one is refused (every
//! problem logged) and the previous apps keep serving.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use notify::{RecommendedWatcher, RecursiveMode};
use notify_debouncer_mini::{DebounceEventResult, Debouncer, new_debouncer};
use tokio::signal::unix::{SignalKind, signal};
use tokio::sync::Notify;

use crate::config;
use crate::tenancy::Tenancy;

/// Saves in quick succession (an editor's write and rename) make one reload.
const DEBOUNCE: Duration = Duration::from_millis(200);

/// The listeners a config names: they are bound once, at start.
type Listeners = (Option<SocketAddr>, Option<SocketAddr>);

/// Reloads `path` into `tenancy` on every SIGHUP or change of the file, until the
/// process ends. The watch (file and signal) is set up before this returns, so no
/// change made after it is missed; the returned future does the reloading.
pub fn reload_on_change(
    path: PathBuf,
    listeners: Listeners,
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
            reload(&path, listeners, &tenancy).await;
        }
    }
}

async fn reload(path: &Path, listeners: Listeners, tenancy: &Tenancy) {
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
    if (config.listen, config.tls.as_ref().map(|t| t.listen)) != listeners {
        tracing::warn!(
            "listener addresses changed in {}: they take effect after a restart",
            path.display()
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

/// Signals `changed` when the file at `path` is written, replaced or removed. Its
/// directory is watched, since editors replace files by renaming.
fn watch_file(path: &Path, changed: Arc<Notify>) -> anyhow::Result<Debouncer<RecommendedWatcher>> {
    let path = path.canonicalize()?;
    let dir = path
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_else(|| PathBuf::from("."));
    let mut debouncer = new_debouncer(DEBOUNCE, move |result: DebounceEventResult| {
        if let Ok(events) = result
            && events.iter().any(|event| event.path == path)
        {
            changed.notify_one();
        }
    })?;
    debouncer
        .watcher()
        .watch(&dir, RecursiveMode::NonRecursive)?;
    Ok(debouncer)
}
