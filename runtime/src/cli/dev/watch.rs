//! Watches the files a guest crate's build reads and says when their content changed.
//!
//! What belongs to the build: every path package cargo builds it from (the crate, and
//! its path dependencies — the SDK, when the crate uses it by path), each watched as a
//! tree but for cargo's output (`target/`) and hidden entries other than `.cargo`; and
//! the workspace's manifest and lock file when the workspace is elsewhere. Editors'
//! scratch files (`.swp`, `~`, vim's `4913`, emacs's `.#…`) never count.
//!
//! Only content counts. Every file's SHA-256 is kept from the start; an event (creation,
//! write, rename, removal — not an open, a read or a metadata change) only makes its
//! path worth looking at again, after the events stop for a moment, and a change is a
//! file whose content differs from the last seen, appeared or went. So cargo reading
//! `Cargo.toml` and `Cargo.lock`, `touch`, or a save of identical content are not
//! changes; cargo's own lock file writes during a build ([`Changes::building`]) are
//! not either.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Component, Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use notify::event::{AccessKind, AccessMode, ModifyKind};
use notify::{Event, EventKind, RecommendedWatcher, RecursiveMode, Watcher};
use sha2::{Digest, Sha256};
use tokio::sync::Notify;

use crate::cli::guest_build::WASM_TARGET;

/// How long events must pause before the paths they name are looked at: an editor's
/// save is often a write, a rename and a metadata change.
const DEBOUNCE: Duration = Duration::from_millis(200);

/// The longest events are gathered before looking, however steadily they come.
const MOST_GATHERED: Duration = Duration::from_secs(2);

/// Content changes of one crate's build; watching stops when this is dropped.
pub struct Changes {
    shared: Arc<Shared>,
    to_thread: mpsc::Sender<Msg>,
    /// The only strong reference: the watching thread holds a weak one, so dropping
    /// this drops the watcher, whose event sender then goes, which ends the thread.
    _watcher: Arc<Mutex<RecommendedWatcher>>,
}

/// Held while cargo builds the crate: what cargo writes to the lock file meanwhile is
/// the build's doing, not a change.
pub struct Building<'a>(&'a Changes);

impl Drop for Building<'_> {
    fn drop(&mut self) {
        let _ = self.0.to_thread.send(Msg::Built);
    }
}

impl Changes {
    /// Resolves once content changed since the last call (changes while nobody waits
    /// are kept as one), with what changed, for the log.
    pub async fn next(&self) -> String {
        loop {
            self.shared.signal.notified().await;
            let mut state = self.shared.lock();
            let changed = std::mem::take(&mut state.changed);
            if !changed.is_empty() {
                return describe(&changed, &state.crate_dir);
            }
        }
    }

    /// Marks a build as running until the guard is dropped.
    pub fn building(&self) -> Building<'_> {
        self.shared.lock().building = true;
        Building(self)
    }
}

enum Msg {
    Event(notify::Result<Event>),
    /// A build ended.
    Built,
}

struct Shared {
    signal: Notify,
    state: Mutex<State>,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        crate::sync::lock(&self.state)
    }
}

struct State {
    crate_dir: PathBuf,
    tree: Tree,
    /// The content of every file that belongs to the build, as last seen.
    files: BTreeMap<PathBuf, [u8; 32]>,
    /// Directories given to the watcher, and how.
    watched: BTreeMap<PathBuf, RecursiveMode>,
    /// Changed since `next` last returned.
    changed: Vec<PathBuf>,
    building: bool,
    /// A manifest changed (or cargo could not say which packages there are) since
    /// the tree was resolved: resolve it again after the next build.
    stale: bool,
}

/// Watches what `dir`'s build reads. Watching starts before this returns, so a change
/// made after it is seen; the content seen now is what changes are measured against.
pub fn watch(dir: &Path) -> Result<Changes> {
    let crate_dir = dir
        .canonicalize()
        .with_context(|| format!("cannot resolve {}", dir.display()))?;
    let (to_thread, events) = mpsc::channel();
    let sender = to_thread.clone();
    let watcher = RecommendedWatcher::new(
        move |event: notify::Result<Event>| {
            if event.as_ref().map_or(true, worth_a_look) {
                let _ = sender.send(Msg::Event(event));
            }
        },
        notify::Config::default(),
    )
    .context("cannot watch the crate's files")?;
    let watcher = Arc::new(Mutex::new(watcher));
    let (tree, resolved) = Tree::resolve(&crate_dir);
    let mut state = State {
        crate_dir,
        tree: Tree::default(),
        files: BTreeMap::new(),
        watched: BTreeMap::new(),
        changed: Vec::new(),
        building: false,
        stale: !resolved,
    };
    state.switch_to(tree, &mut watcher.lock().unwrap())?;
    let shared = Arc::new(Shared {
        signal: Notify::new(),
        state: Mutex::new(state),
    });
    let weak = Arc::downgrade(&watcher);
    let thread_shared = shared.clone();
    std::thread::Builder::new()
        .name("wedge-dev-watch".into())
        .spawn(move || run(&events, &thread_shared, &weak))
        .context("starting the watching thread")?;
    Ok(Changes {
        shared,
        to_thread,
        _watcher: watcher,
    })
}

/// Whether an event may mean changed content: opens, reads and closes after reading,
/// and metadata changes (`touch`, `chmod`) cannot.
fn worth_a_look(event: &Event) -> bool {
    match event.kind {
        EventKind::Access(AccessKind::Close(AccessMode::Write)) => true,
        EventKind::Access(_) | EventKind::Modify(ModifyKind::Metadata(_)) => false,
        _ => true,
    }
}

/// The watching thread: gathers events until they pause, then looks at the paths they
/// name; ends when the watcher is dropped.
fn run(events: &mpsc::Receiver<Msg>, shared: &Shared, watcher: &Weak<Mutex<RecommendedWatcher>>) {
    while let Ok(first) = events.recv() {
        let started = Instant::now();
        let mut batch = Batch::default();
        let mut built = batch.add(first);
        while !built && started.elapsed() < MOST_GATHERED {
            match events.recv_timeout(DEBOUNCE) {
                Ok(msg) => built = batch.add(msg),
                Err(RecvTimeoutError::Timeout) => break,
                Err(RecvTimeoutError::Disconnected) => return,
            }
        }
        let Some(watcher) = watcher.upgrade() else {
            return;
        };
        let mut watcher = crate::sync::lock(&watcher);
        let changed = shared.lock().look(&batch, &mut watcher);
        if changed {
            shared.signal.notify_one();
        }
        if built {
            built_done(shared, &mut watcher);
        }
    }
}

/// After a build: the lock file as cargo left it is the baseline, and a tree whose
/// manifests changed is resolved again (now that cargo has resolved them).
fn built_done(shared: &Shared, watcher: &mut RecommendedWatcher) {
    let stale = {
        let mut state = shared.lock();
        state.building = false;
        let lock_file = state.tree.lock_file.clone();
        state.reconcile(&lock_file);
        state.stale
    };
    if !stale {
        return;
    }
    let crate_dir = shared.lock().crate_dir.clone();
    // Without the lock held: cargo takes a moment, and a build may start meanwhile.
    let (tree, resolved) = Tree::resolve(&crate_dir);
    let mut state = shared.lock();
    state.stale = !resolved;
    if tree != state.tree
        && let Err(err) = state.switch_to(tree, watcher)
    {
        tracing::warn!("watching {}: {err:#}", crate_dir.display());
    }
}

/// Paths events named, gathered until the events paused.
#[derive(Default)]
struct Batch {
    paths: BTreeSet<PathBuf>,
    /// The watcher lost events (its queue overflowed): look at everything.
    rescan: bool,
}

impl Batch {
    /// Adds what `msg` says; true if it says a build ended.
    fn add(&mut self, msg: Msg) -> bool {
        match msg {
            Msg::Event(Ok(event)) => {
                self.rescan |= event.need_rescan();
                self.paths.extend(event.paths);
                false
            }
            Msg::Event(Err(err)) => {
                tracing::warn!("watching the crate: {err}");
                false
            }
            Msg::Built => true,
        }
    }
}

impl State {
    /// Looks at what `batch` names; true if content changed.
    fn look(&mut self, batch: &Batch, watcher: &mut RecommendedWatcher) -> bool {
        let paths: Vec<PathBuf> = match batch.rescan {
            true => self.tree.everything(),
            false => batch.paths.iter().cloned().collect(),
        };
        let mut changed = false;
        for path in paths {
            self.follow_top_dir(&path, watcher);
            for file in self.reconcile(&path) {
                if self.tree.is_manifest(&file) {
                    self.stale = true;
                }
                // cargo writes the lock file while it builds.
                if self.building && file == self.tree.lock_file {
                    continue;
                }
                self.changed.push(file);
                changed = true;
            }
        }
        changed
    }

    /// Watches a directory new in a package's top level, and forgets one that went
    /// (deeper ones are the recursive watch's above them).
    fn follow_top_dir(&mut self, path: &Path, watcher: &mut RecommendedWatcher) {
        let top = path
            .parent()
            .is_some_and(|parent| self.tree.roots.iter().any(|root| root == parent));
        if !top || !self.tree.belongs(path) {
            return;
        }
        let watched = self.watched.contains_key(path);
        if watched && !path.is_dir() {
            let _ = watcher.unwatch(path);
            self.watched.remove(path);
        } else if !watched && path.is_dir() {
            match watcher.watch(path, RecursiveMode::Recursive) {
                Ok(()) => {
                    self.watched
                        .insert(path.to_path_buf(), RecursiveMode::Recursive);
                }
                Err(err) => tracing::warn!("cannot watch {}: {err}", path.display()),
            }
        }
    }

    /// Brings the recorded content of `path` (a file, or everything under a
    /// directory) up to date; returns the files that differed (changed, new, gone).
    fn reconcile(&mut self, path: &Path) -> Vec<PathBuf> {
        let mut now = BTreeMap::new();
        if self.tree.belongs(path) {
            self.tree.scan(path, &mut now);
        }
        let before: Vec<PathBuf> = self
            .files
            .range(path.to_path_buf()..)
            .take_while(|(file, _)| file.starts_with(path))
            .map(|(file, _)| file.clone())
            .collect();
        let before: BTreeMap<PathBuf, [u8; 32]> = before
            .into_iter()
            .filter_map(|file| self.files.remove_entry(&file))
            .collect();
        let gone_or_changed = before
            .iter()
            .filter(|(file, old)| now.get(*file) != Some(old));
        let new = now.keys().filter(|file| !before.contains_key(*file));
        let differs = gone_or_changed
            .map(|(file, _)| file)
            .chain(new)
            .cloned()
            .collect();
        self.files.extend(now);
        differs
    }

    /// Watches `tree` instead of what was watched.
    fn switch_to(&mut self, tree: Tree, watcher: &mut RecommendedWatcher) -> Result<()> {
        let wanted = tree.dirs_to_watch();
        for dir in self.watched.keys() {
            if !wanted.contains_key(dir) {
                let _ = watcher.unwatch(dir);
            }
        }
        for (dir, mode) in &wanted {
            if self.watched.get(dir) != Some(mode) {
                watcher
                    .watch(dir, *mode)
                    .with_context(|| format!("cannot watch {}", dir.display()))?;
            }
        }
        self.watched = wanted;
        // What stays watched keeps its content as last seen (a save while cargo was
        // asked for the packages is still a change); what is new is seen now.
        let old = std::mem::take(&mut self.tree);
        self.files.retain(|file, _| tree.belongs(file));
        for path in tree.everything() {
            if !old.everything().contains(&path) {
                tree.scan(&path, &mut self.files);
            }
        }
        let others: Vec<String> = (tree.roots.iter())
            .filter(|root| **root != self.crate_dir)
            .map(|root| root.display().to_string())
            .collect();
        if !others.is_empty() {
            tracing::info!(
                "watching {} and its path dependencies {}",
                self.crate_dir.display(),
                others.join(", ")
            );
        }
        self.tree = tree;
        Ok(())
    }
}

/// What belongs to a crate's build.
#[derive(Default, PartialEq, Debug)]
struct Tree {
    /// The path packages' directories, each watched as a tree.
    roots: Vec<PathBuf>,
    /// Files outside them: the workspace's manifest and lock file.
    files: Vec<PathBuf>,
    /// cargo's output directory.
    target_dir: Option<PathBuf>,
    lock_file: PathBuf,
}

impl Tree {
    /// The packages cargo builds `crate_dir` from, as `cargo metadata` says without
    /// the network or a change to the lock file; just `crate_dir` when it cannot (no
    /// lock file yet, a broken manifest), with false.
    fn resolve(crate_dir: &Path) -> (Tree, bool) {
        match Tree::from_cargo(crate_dir) {
            Ok(tree) => (tree, true),
            Err(err) => {
                tracing::debug!("watching {} alone: {err:#}", crate_dir.display());
                let tree = Tree {
                    roots: vec![crate_dir.to_path_buf()],
                    files: Vec::new(),
                    target_dir: None,
                    lock_file: crate_dir.join("Cargo.lock"),
                };
                (tree, false)
            }
        }
    }

    fn from_cargo(crate_dir: &Path) -> Result<Tree> {
        let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
        let output = Command::new(cargo)
            .args(["metadata", "--format-version", "1", "--locked", "--offline"])
            .args(["--filter-platform", WASM_TARGET])
            .arg("--manifest-path")
            .arg(crate_dir.join("Cargo.toml"))
            .current_dir(crate_dir)
            .stdin(Stdio::null())
            .output()
            .context("running cargo metadata")?;
        anyhow::ensure!(
            output.status.success(),
            "cargo metadata: {}",
            String::from_utf8_lossy(&output.stderr).trim()
        );
        let metadata: serde_json::Value =
            serde_json::from_slice(&output.stdout).context("reading cargo metadata")?;
        Tree::from_metadata(crate_dir, &metadata)
    }

    fn from_metadata(crate_dir: &Path, metadata: &serde_json::Value) -> Result<Tree> {
        let path = |value: &serde_json::Value| value.as_str().map(PathBuf::from);
        let workspace = path(&metadata["workspace_root"]).context("no workspace_root")?;
        let mut roots = vec![crate_dir.to_path_buf()];
        for package in metadata["packages"].as_array().context("no packages")? {
            // Path packages have no source (registry, git).
            if !package["source"].is_null() {
                continue;
            }
            let manifest = path(&package["manifest_path"]).context("no manifest_path")?;
            if let Some(dir) = manifest.parent() {
                roots.push(dir.to_path_buf());
            }
        }
        // A package inside another is watched with it.
        roots.sort();
        roots.dedup_by(|inner, outer| inner.starts_with(outer));
        let files = [workspace.join("Cargo.toml"), workspace.join("Cargo.lock")]
            .into_iter()
            .filter(|file| !roots.iter().any(|root| file.starts_with(root)))
            .collect();
        Ok(Tree {
            roots,
            files,
            target_dir: path(&metadata["target_directory"]),
            lock_file: workspace.join("Cargo.lock"),
        })
    }

    /// Whether `path` (a file or directory) belongs to the build.
    fn belongs(&self, path: &Path) -> bool {
        if self.files.iter().any(|file| file == path) {
            return true;
        }
        let Some(root) = self.roots.iter().find(|root| path.starts_with(root)) else {
            return false;
        };
        if self
            .target_dir
            .as_ref()
            .is_some_and(|t| path.starts_with(t))
        {
            return false;
        }
        let relative = path.strip_prefix(root).expect("under its root");
        let mut components = relative.components().peekable();
        if components.peek() == Some(&Component::Normal("target".as_ref())) {
            return false;
        }
        let hidden = components.any(|c| {
            let name = c.as_os_str().to_string_lossy();
            name.starts_with('.') && name != ".cargo"
        });
        !hidden
            && !relative
                .file_name()
                .is_some_and(|name| is_scratch(&name.to_string_lossy()))
    }

    /// Whether `path` is a manifest: changed, the packages may be others.
    fn is_manifest(&self, path: &Path) -> bool {
        path.file_name().is_some_and(|name| name == "Cargo.toml") || path == self.lock_file
    }

    /// Every root and file, to look at in full.
    fn everything(&self) -> Vec<PathBuf> {
        self.roots.iter().chain(&self.files).cloned().collect()
    }

    /// The directories to give the watcher: each root's own entries, its
    /// subdirectories that belong as trees, and the directories of `files`.
    fn dirs_to_watch(&self) -> BTreeMap<PathBuf, RecursiveMode> {
        let mut dirs = BTreeMap::new();
        for root in &self.roots {
            dirs.insert(root.clone(), RecursiveMode::NonRecursive);
            for entry in std::fs::read_dir(root).into_iter().flatten().flatten() {
                let path = entry.path();
                if entry.file_type().is_ok_and(|t| t.is_dir()) && self.belongs(&path) {
                    dirs.insert(path, RecursiveMode::Recursive);
                }
            }
        }
        for file in &self.files {
            if let Some(dir) = file.parent() {
                dirs.entry(dir.to_path_buf())
                    .or_insert(RecursiveMode::NonRecursive);
            }
        }
        dirs
    }

    /// Records the content of `path`: the file, or every file under the directory
    /// that belongs to the build. Nothing for a path that is gone (or unreadable).
    fn scan(&self, path: &Path, into: &mut BTreeMap<PathBuf, [u8; 32]>) {
        let Ok(metadata) = std::fs::metadata(path) else {
            return;
        };
        if metadata.is_file() {
            if let Ok(content) = std::fs::read(path) {
                into.insert(path.to_path_buf(), Sha256::digest(&content).into());
            }
        } else if metadata.is_dir()
            // Not through a symbolic link: it might lead back up.
            && !std::fs::symlink_metadata(path).is_ok_and(|m| m.is_symlink())
        {
            for entry in std::fs::read_dir(path).into_iter().flatten().flatten() {
                let entry = entry.path();
                if self.belongs(&entry) {
                    self.scan(&entry, into);
                }
            }
        }
    }
}

/// An editor's scratch file: swap and backup files, vim's write probe, emacs's lock
/// and autosave files, JetBrains' safe-write copies.
fn is_scratch(name: &str) -> bool {
    name.starts_with('.')
        || name.ends_with('~')
        || [".swp", ".swx", ".swo", "___jb_tmp___", "___jb_old___"]
            .iter()
            .any(|suffix| name.ends_with(suffix))
        || (name.starts_with('#') && name.ends_with('#'))
        || name == "4913"
}

/// `src/lib.rs`, or `src/lib.rs and 2 other files` (relative to the crate).
fn describe(changed: &[PathBuf], crate_dir: &Path) -> String {
    let unique: BTreeSet<&PathBuf> = changed.iter().collect();
    let first = changed[0].strip_prefix(crate_dir).unwrap_or(&changed[0]);
    match unique.len() {
        1 => first.display().to_string(),
        2 => format!("{} and 1 other file", first.display()),
        n => format!("{} and {} other files", first.display(), n - 1),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tree() -> Tree {
        Tree {
            roots: vec!["/work/greeter".into(), "/sdk".into()],
            files: vec!["/ws/Cargo.toml".into(), "/ws/Cargo.lock".into()],
            target_dir: Some("/ws/target".into()),
            lock_file: "/ws/Cargo.lock".into(),
        }
    }

    #[test]
    fn sources_of_every_root_belong_cargo_output_and_editor_scratch_do_not() {
        let tree = tree();
        for source in [
            "/work/greeter/src/lib.rs",
            "/work/greeter/Cargo.toml",
            "/work/greeter/build.rs",
            "/work/greeter/.cargo/config.toml",
            "/work/greeter/wit/world.wit",
            "/work/greeter/assets/new/page.html",
            "/sdk/src/request.rs",
            "/ws/Cargo.lock",
        ] {
            assert!(tree.belongs(Path::new(source)), "{source}");
        }
        for other in [
            "/work/greeter/target/release/greeter.wasm",
            "/ws/target/debug/x",
            "/work/greeter/src/.lib.rs.swp",
            "/work/greeter/src/lib.rs~",
            "/work/greeter/src/4913",
            "/work/greeter/src/.#lib.rs",
            "/work/greeter/src/#lib.rs#",
            "/work/greeter/src/lib.rs___jb_tmp___",
            "/work/greeter/.git/index",
            "/ws/README.md",
            "/elsewhere/src/lib.rs",
        ] {
            assert!(!tree.belongs(Path::new(other)), "{other}");
        }
    }

    #[test]
    fn the_tree_is_the_path_packages_and_the_workspace_files_outside_them() {
        let metadata = serde_json::json!({
            "workspace_root": "/ws",
            "target_directory": "/ws/target",
            "packages": [
                {"source": null, "manifest_path": "/ws/greeter/Cargo.toml"},
                {"source": null, "manifest_path": "/ws/greeter/inner/Cargo.toml"},
                {"source": null, "manifest_path": "/sdk/Cargo.toml"},
                {"source": "registry+https://github.com/rust-lang/crates.io-index",
                 "manifest_path": "/home/.cargo/registry/src/x/http-1.0.0/Cargo.toml"},
            ],
        });
        let tree = Tree::from_metadata(Path::new("/ws/greeter"), &metadata).unwrap();
        assert_eq!(
            tree.roots,
            [PathBuf::from("/sdk"), PathBuf::from("/ws/greeter")]
        );
        assert_eq!(
            tree.files,
            [
                PathBuf::from("/ws/Cargo.toml"),
                PathBuf::from("/ws/Cargo.lock")
            ]
        );
        assert_eq!(tree.lock_file, Path::new("/ws/Cargo.lock"));
    }

    #[test]
    fn a_change_is_content_that_differs_appears_or_goes() {
        let dir = std::env::temp_dir().join(format!("wedge-watch-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("src")).unwrap();
        std::fs::write(dir.join("src/lib.rs"), "one").unwrap();
        let tree = Tree {
            roots: vec![dir.clone()],
            files: Vec::new(),
            target_dir: None,
            lock_file: dir.join("Cargo.lock"),
        };
        let mut state = State {
            crate_dir: dir.clone(),
            tree: Tree::default(),
            files: BTreeMap::new(),
            watched: BTreeMap::new(),
            changed: Vec::new(),
            building: false,
            stale: false,
        };
        tree.scan(&dir, &mut state.files);
        state.tree = tree;
        let lib = dir.join("src/lib.rs");
        let none: Vec<PathBuf> = Vec::new();
        assert_eq!(none, state.reconcile(&lib), "nothing was written");
        std::fs::write(&lib, "one").unwrap();
        assert_eq!(none, state.reconcile(&lib), "the same content");
        std::fs::write(&lib, "two").unwrap();
        assert_eq!(state.reconcile(&lib), std::slice::from_ref(&lib));
        std::fs::write(dir.join("src/.lib.rs.swp"), "x").unwrap();
        assert_eq!(
            none,
            state.reconcile(&dir.join("src/.lib.rs.swp")),
            "scratch"
        );
        std::fs::create_dir_all(dir.join("src/more")).unwrap();
        std::fs::write(dir.join("src/more/a.rs"), "a").unwrap();
        let more = vec![dir.join("src/more/a.rs")];
        assert_eq!(
            state.reconcile(&dir.join("src/more")),
            more,
            "a new directory's file"
        );
        std::fs::remove_dir_all(dir.join("src/more")).unwrap();
        assert_eq!(state.reconcile(&dir.join("src/more")), more, "removed");
        assert_eq!(none, state.reconcile(&dir.join("src")), "all seen");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn describes_what_changed_relative_to_the_crate() {
        let dir = Path::new("/c");
        let one = [PathBuf::from("/c/src/lib.rs")];
        assert_eq!(describe(&one, dir), "src/lib.rs");
        let three = ["/c/src/lib.rs", "/sdk/a.rs", "/c/src/lib.rs", "/c/b.rs"].map(PathBuf::from);
        assert_eq!(describe(&three, dir), "src/lib.rs and 2 other files");
    }
}
