//! Watches a guest crate's sources and signals (debounced) when they change.

use std::path::{Component, Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result};
use notify::{RecommendedWatcher, RecursiveMode};
use notify_debouncer_mini::{DebounceEventResult, Debouncer, new_debouncer};
use tokio::sync::Notify;

/// Saves closer together than this make one rebuild (an editor's save is often a
/// write, a rename and a metadata change).
const DEBOUNCE: Duration = Duration::from_millis(200);

/// Source changes of one crate; watching stops when this is dropped.
pub struct Changes {
    signal: Arc<Notify>,
    _debouncer: Debouncer<RecommendedWatcher>,
}

impl Changes {
    /// Resolves once sources changed since the last call (changes while nobody
    /// waits are kept as one).
    pub async fn next(&self) {
        self.signal.notified().await
    }
}

/// Watches `dir` (its own files, and every subdirectory but `target` and hidden ones
/// except `.cargo`): what cargo reads to build the crate.
pub fn watch(dir: &Path) -> Result<Changes> {
    let root = dir
        .canonicalize()
        .with_context(|| format!("cannot resolve {}", dir.display()))?;
    let signal = Arc::new(Notify::new());
    let notify = signal.clone();
    let events_root = root.clone();
    let mut debouncer = new_debouncer(DEBOUNCE, move |result: DebounceEventResult| match result {
        Ok(events) => {
            if events.iter().any(|e| is_source(&events_root, &e.path)) {
                notify.notify_one();
            }
        }
        Err(err) => tracing::warn!("watching {}: {err}", events_root.display()),
    })
    .context("cannot watch the crate's files")?;
    let watcher = debouncer.watcher();
    watcher
        .watch(&root, RecursiveMode::NonRecursive)
        .with_context(|| format!("cannot watch {}", root.display()))?;
    for subdir in watched_subdirs(&root)? {
        watcher
            .watch(&subdir, RecursiveMode::Recursive)
            .with_context(|| format!("cannot watch {}", subdir.display()))?;
    }
    Ok(Changes {
        signal,
        _debouncer: debouncer,
    })
}

/// The crate's subdirectories worth watching: not cargo's output, not `.git` and the like.
fn watched_subdirs(root: &Path) -> Result<Vec<PathBuf>> {
    let entries =
        std::fs::read_dir(root).with_context(|| format!("cannot list {}", root.display()))?;
    let mut dirs = Vec::new();
    for entry in entries.flatten() {
        let name = entry.file_name();
        let name = name.to_string_lossy();
        let skipped = name == "target" || (name.starts_with('.') && name != ".cargo");
        if !skipped && entry.file_type().is_ok_and(|t| t.is_dir()) {
            dirs.push(entry.path());
        }
    }
    Ok(dirs)
}

/// Whether a changed path is something a build reads, not cargo's output or an
/// editor's scratch file.
fn is_source(root: &Path, path: &Path) -> bool {
    let Ok(relative) = path.strip_prefix(root) else {
        return false;
    };
    let mut components = relative.components();
    let first = components.next();
    if first == Some(Component::Normal("target".as_ref())) {
        return false;
    }
    let Some(name) = relative.file_name().map(|n| n.to_string_lossy()) else {
        return false;
    };
    let scratch = (name.starts_with('.') && name != ".cargo")
        || name.ends_with('~')
        || name.ends_with(".swp")
        || name.ends_with(".swx")
        || name == "4913"; // vim's probe file
    !scratch
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sources_count_cargo_output_and_editor_scratch_do_not() {
        let root = Path::new("/work/greeter");
        for source in [
            "src/lib.rs",
            "Cargo.toml",
            ".cargo/config.toml",
            "wit/world.wit",
        ] {
            assert!(is_source(root, &root.join(source)), "{source}");
        }
        for other in [
            "target/release/greeter.wasm",
            "src/.lib.rs.swp",
            "src/lib.rs~",
            "src/4913",
        ] {
            assert!(!is_source(root, &root.join(other)), "{other}");
        }
        assert!(!is_source(root, Path::new("/elsewhere/src/lib.rs")));
    }
}
