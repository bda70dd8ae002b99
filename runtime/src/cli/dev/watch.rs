//! Watches the files a project's build reads and says when their content changed.
//!
//! What belongs to the build is a [`Tree`]: a guest crate's is what cargo builds it
//! from ([`super::crate_tree`]), resolved again when a manifest changed; another
//! toolchain's is its directory or the paths it names ([`Tree::for_paths`]). Editors'
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
use std::path::{Path, PathBuf};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use notify::event::{AccessKind, AccessMode, ModifyKind};
use notify::{Event, EventKind, RecommendedWatcher, RecursiveMode, Watcher};
use tokio::sync::Notify;

use super::crate_tree;
use super::tree::Tree;

/// How long events must pause before the paths they name are looked at: an editor's
/// save is often a write, a rename and a metadata change.
const DEBOUNCE: Duration = Duration::from_millis(200);

/// The longest events are gathered before looking, however steadily they come.
const MOST_GATHERED: Duration = Duration::from_secs(2);

/// Where a project's tree comes from.
#[derive(Clone)]
pub enum Sources {
    /// A guest crate in the project's directory: what cargo builds it from.
    Crate,
    /// Another toolchain's project: these paths, always.
    Paths(Tree),
}

impl Sources {
    /// The tree of the project in `dir` now, and whether it is final (false: resolve
    /// it again after the next build).
    fn resolve(&self, dir: &Path) -> (Tree, bool) {
        match self {
            Sources::Crate => crate_tree::resolve(dir),
            Sources::Paths(tree) => (tree.clone(), true),
        }
    }
}

/// Content changes of one project's build; watching stops when this is dropped.
pub struct Changes {
    shared: Arc<Shared>,
    to_thread: mpsc::Sender<Msg>,
    /// The only strong reference: the watching thread holds a weak one, so dropping
    /// this drops the watcher, whose event sender then goes, which ends the thread.
    _watcher: Arc<Mutex<RecommendedWatcher>>,
}

/// Held while the project builds: what cargo writes to the lock file meanwhile is
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
                return describe(&changed, &state.dir);
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
    /// The project's directory.
    dir: PathBuf,
    sources: Sources,
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

/// Watches what the build of the project in `dir` reads, as `sources` say. Watching
/// starts before this returns, so a change made after it is seen; the content seen
/// now is what changes are measured against.
pub fn watch(dir: &Path, sources: Sources) -> Result<Changes> {
    let dir = dir
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
    .context("cannot watch the project's files")?;
    let watcher = Arc::new(Mutex::new(watcher));
    let (tree, resolved) = sources.resolve(&dir);
    let mut state = State {
        dir,
        sources,
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

/// After a build: what the build wrote as it left it is the baseline, and a tree
/// whose manifests changed is resolved again (now that cargo has resolved them).
fn built_done(shared: &Shared, watcher: &mut RecommendedWatcher) {
    let stale = {
        let mut state = shared.lock();
        state.building = false;
        if let Some(written) = state.tree.written_by_build.clone() {
            state.reconcile(&written);
        }
        state.stale
    };
    if !stale {
        return;
    }
    let (dir, sources) = {
        let state = shared.lock();
        (state.dir.clone(), state.sources.clone())
    };
    // Without the lock held: cargo takes a moment, and a build may start meanwhile.
    let (tree, resolved) = sources.resolve(&dir);
    let mut state = shared.lock();
    state.stale = !resolved;
    if tree != state.tree
        && let Err(err) = state.switch_to(tree, watcher)
    {
        tracing::warn!("watching {}: {err:#}", dir.display());
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
                if self.building && self.tree.written_by_build.as_ref() == Some(&file) {
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

    /// Logs what is watched, when it is more than the project's directory.
    fn say_what_is_watched(&self) {
        let others: Vec<String> = (self.tree.everything().iter())
            .filter(|path| **path != self.dir)
            .map(|path| path.display().to_string())
            .collect();
        if others.is_empty() {
            return;
        }
        match self.sources {
            Sources::Crate => tracing::info!(
                "watching {} and its path dependencies {}",
                self.dir.display(),
                others.join(", ")
            ),
            Sources::Paths(_) => tracing::info!("watching {}", others.join(", ")),
        }
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
        self.tree = tree;
        self.say_what_is_watched();
        Ok(())
    }
}

/// `src/lib.rs`, or `src/lib.rs and 2 other files` (relative to the project).
fn describe(changed: &[PathBuf], dir: &Path) -> String {
    let unique: BTreeSet<&PathBuf> = changed.iter().collect();
    let first = changed[0].strip_prefix(dir).unwrap_or(&changed[0]);
    match unique.len() {
        1 => first.display().to_string(),
        2 => format!("{} and 1 other file", first.display()),
        n => format!("{} and {} other files", first.display(), n - 1),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_change_is_content_that_differs_appears_or_goes() {
        let dir = std::env::temp_dir().join(format!("wedge-watch-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("src")).unwrap();
        std::fs::write(dir.join("src/lib.rs"), "one").unwrap();
        let tree = Tree::for_paths(&dir, &[], &dir.join("dist/app.wasm"));
        let mut state = State {
            dir: dir.clone(),
            sources: Sources::Paths(tree.clone()),
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
