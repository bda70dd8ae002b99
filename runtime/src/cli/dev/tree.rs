//! What belongs to a project's build, path by path: the rules [`super::watch`] applies.
//!
//! A tree is directories watched whole (roots) and single files, less what the build
//! writes (its output directories), hidden entries and editors' scratch files. A guest
//! crate's tree is what cargo builds it from ([`super::crate_tree`]); another
//! toolchain's project is its directory, or the paths it names ([`Tree::for_paths`]).

use std::collections::BTreeMap;
use std::path::{Component, Path, PathBuf};

use notify::RecursiveMode;
use sha2::{Digest, Sha256};

/// What belongs to a build.
#[derive(Default, PartialEq, Debug, Clone)]
pub(super) struct Tree {
    /// Directories watched as trees.
    pub roots: Vec<PathBuf>,
    /// Files outside them.
    pub files: Vec<PathBuf>,
    /// What the build writes (directories or files): never part of it.
    pub outputs: Vec<PathBuf>,
    /// Names of entries that never belong directly under a root (`target`).
    pub skipped_at_top: &'static [&'static str],
    /// Names of entries that never belong, however deep (`node_modules`).
    pub skipped_anywhere: &'static [&'static str],
    /// Hidden entries that belong all the same (`.cargo`).
    pub hidden_kept: &'static [&'static str],
    /// A file the build itself writes while it runs (cargo's lock file).
    pub written_by_build: Option<PathBuf>,
    /// The name of the files that say what else belongs (`Cargo.toml`): when one
    /// changes, the tree is resolved again.
    pub manifest: Option<&'static str>,
}

/// The directories another toolchain's build writes into, or whose packages it
/// installs: `node_modules` wherever it is, `target` at the top.
const SKIPPED_ANYWHERE: &[&str] = &["node_modules"];
const SKIPPED_AT_TOP: &[&str] = &["target"];

impl Tree {
    /// A project another toolchain builds in `dir`, writing `component`: `watch`
    /// (files and directories; all of `dir` when empty) less `node_modules`, a
    /// top-level `target`, hidden entries and the directory the component is written
    /// to (its top-level directory under `dir`: `dist` for `dist/app.wasm`; the file
    /// itself when it is written to `dir`).
    pub fn for_paths(dir: &Path, watch: &[PathBuf], component: &Path) -> Tree {
        let output = match component.strip_prefix(dir) {
            Ok(relative) => match relative.components().next() {
                Some(top) if relative.components().nth(1).is_some() => dir.join(top),
                _ => component.to_path_buf(),
            },
            Err(_) => component
                .parent()
                .map_or_else(|| component.to_path_buf(), Path::to_path_buf),
        };
        let (mut roots, files): (Vec<PathBuf>, Vec<PathBuf>) = match watch {
            [] => (vec![dir.to_path_buf()], Vec::new()),
            paths => paths.iter().cloned().partition(|path| path.is_dir()),
        };
        // A directory inside another is watched with it.
        roots.sort();
        roots.dedup_by(|inner, outer| inner.starts_with(outer));
        Tree {
            roots,
            files,
            outputs: vec![output],
            skipped_at_top: SKIPPED_AT_TOP,
            skipped_anywhere: SKIPPED_ANYWHERE,
            hidden_kept: &[],
            written_by_build: None,
            manifest: None,
        }
    }

    /// Whether `path` (a file or directory) belongs to the build.
    pub fn belongs(&self, path: &Path) -> bool {
        if self.files.iter().any(|file| file == path) {
            return true;
        }
        let Some(root) = self.roots.iter().find(|root| path.starts_with(root)) else {
            return false;
        };
        if self.outputs.iter().any(|output| path.starts_with(output)) {
            return false;
        }
        let relative = path.strip_prefix(root).expect("under its root");
        let named = |names: &[&str], c: &Component| names.iter().any(|n| c.as_os_str() == *n);
        let mut components = relative.components().peekable();
        if components
            .peek()
            .is_some_and(|top| named(self.skipped_at_top, top))
        {
            return false;
        }
        let skipped = components.any(|c| {
            let name = c.as_os_str().to_string_lossy();
            (name.starts_with('.') && !named(self.hidden_kept, &c))
                || named(self.skipped_anywhere, &c)
        });
        !skipped
            && !relative
                .file_name()
                .is_some_and(|name| is_scratch(&name.to_string_lossy()))
    }

    /// Whether `path` is a manifest or the file the build writes: changed, what
    /// belongs may be other.
    pub fn is_manifest(&self, path: &Path) -> bool {
        self.manifest
            .is_some_and(|name| path.file_name().is_some_and(|file| file == name))
            || self.written_by_build.as_deref() == Some(path)
    }

    /// Every root and file, to look at in full.
    pub fn everything(&self) -> Vec<PathBuf> {
        self.roots.iter().chain(&self.files).cloned().collect()
    }

    /// The directories to give the watcher: each root's own entries, its
    /// subdirectories that belong as trees, and the directories of `files`.
    pub fn dirs_to_watch(&self) -> BTreeMap<PathBuf, RecursiveMode> {
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
    pub fn scan(&self, path: &Path, into: &mut BTreeMap<PathBuf, [u8; 32]>) {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn another_toolchains_project_is_its_directory_less_packages_outputs_and_hidden_entries() {
        let tree = Tree::for_paths(Path::new("/app"), &[], Path::new("/app/dist/app.wasm"));
        for source in [
            "/app/src/app.js",
            "/app/package.json",
            "/app/wit/world.wit",
            "/app/src/target/x.js",
        ] {
            assert!(tree.belongs(Path::new(source)), "{source}");
        }
        for other in [
            "/app/node_modules/x/index.js",
            "/app/packages/ui/node_modules/y.js",
            "/app/dist/app.wasm",
            "/app/dist/other.js",
            "/app/target/wasm32-wasip2/release/app.wasm",
            "/app/.git/HEAD",
            "/app/src/.cache/z",
            "/app/src/app.js~",
            "/elsewhere/src/app.js",
        ] {
            assert!(!tree.belongs(Path::new(other)), "{other}");
        }
        assert!(!tree.is_manifest(Path::new("/app/package.json")));

        // Written to the project's directory: only that file is the output.
        let tree = Tree::for_paths(Path::new("/app"), &[], Path::new("/app/app.wasm"));
        assert!(!tree.belongs(Path::new("/app/app.wasm")));
        assert!(tree.belongs(Path::new("/app/app.js")));
    }

    #[test]
    fn named_paths_are_watched_directories_as_trees_files_alone() {
        let dir = std::env::temp_dir().join(format!("wedge-tree-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("src/inner")).unwrap();
        std::fs::write(dir.join("package.json"), "{}").unwrap();
        let watch = [
            dir.join("src/inner"),
            dir.join("package.json"),
            dir.join("src"),
        ];
        let tree = Tree::for_paths(&dir, &watch, &dir.join("out/app.wasm"));
        assert_eq!(tree.roots, [dir.join("src")]);
        assert_eq!(tree.files, [dir.join("package.json")]);
        assert!(tree.belongs(&dir.join("src/inner/a.js")));
        assert!(tree.belongs(&dir.join("package.json")));
        assert!(!tree.belongs(&dir.join("README.md")));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
