//! What `wedge dev` builds: a guest crate, with cargo; or a project another toolchain
//! builds, given as a build command and the component it writes (flags, or the
//! `[dev]` table of the project's `wedge.toml`), with what to watch.

use std::path::{Path, PathBuf};

use anyhow::{Result, bail};

use super::command_build::CommandBuild;
use super::tree::Tree;
use super::watch::Sources;
use crate::cli::guest_build::{self, BuildFailed, Built};

/// The file whose `[dev]` table describes a project another toolchain builds.
const CONFIG_FILE: &str = "wedge.toml";

/// A project `wedge dev` builds, serves and watches.
pub enum Project {
    /// A guest crate: cargo builds it; the watcher asks cargo what it reads.
    Crate { dir: PathBuf, name: String },
    /// Another toolchain's project: its command builds it; `watch` (all of its
    /// directory when empty) is what it reads.
    Command {
        build: CommandBuild,
        watch: Vec<PathBuf>,
    },
}

/// What the command line says about the build (each overrides `[dev]`'s key).
pub struct BuildFlags {
    pub build: Option<String>,
    pub component: Option<PathBuf>,
    pub watch: Vec<PathBuf>,
}

impl Project {
    /// The project in `dir`: another toolchain's when the flags or `dir/wedge.toml`'s
    /// `[dev]` give a build command, else the guest crate there.
    pub fn find(dir: &Path, flags: BuildFlags) -> Result<Project> {
        if !dir.is_dir() {
            bail!("{} is not a directory (expected a project)", dir.display());
        }
        let name = dir_name(dir);
        let config = dir.join(CONFIG_FILE);
        let dev = match std::fs::read_to_string(&config) {
            Ok(text) => crate::config::parse_dev(&text, &config)?,
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => None,
            Err(err) => bail!("cannot read {}: {err}", config.display()),
        }
        .unwrap_or_default();
        let command = flags.build.or(dev.build);
        let component = flags.component.map(|path| dir.join(path)).or(dev.component);
        let watch = match flags.watch.is_empty() {
            true => dev.watch.unwrap_or_default(),
            false => flags.watch.iter().map(|path| dir.join(path)).collect(),
        };
        match (command, component) {
            (Some(command), Some(component)) => {
                if let Some(missing) = watch.iter().find(|path| !path.exists()) {
                    bail!(
                        "cannot watch {}: no such file or directory (--watch and `watch` \
                         in wedge.toml's [dev] are relative to the project, {})",
                        missing.display(),
                        dir.display()
                    );
                }
                let build = CommandBuild {
                    dir: dir.to_path_buf(),
                    command,
                    component,
                    name,
                };
                Ok(Project::Command { build, watch })
            }
            (Some(_), None) => bail!(
                "a build command needs the component it writes: --component PATH (relative \
                 to the project), or `component` in wedge.toml's [dev]"
            ),
            (None, Some(_)) => bail!(
                "a component needs the command that builds it: --build COMMAND (run in the \
                 project), or `build` in wedge.toml's [dev]"
            ),
            (None, None) if !watch.is_empty() => bail!(
                "--watch (or `watch` in wedge.toml's [dev]) is for a project another toolchain \
                 builds: give --build COMMAND and --component PATH too (a guest crate's \
                 watched files are what cargo reads)"
            ),
            (None, None) if !dir.join("Cargo.toml").is_file() => bail!(
                "{} has no Cargo.toml (expected a guest crate; `wedge new NAME` makes one) and \
                 no build command (another toolchain's project: --build COMMAND --component \
                 PATH, or [dev] in its wedge.toml)",
                dir.display()
            ),
            (None, None) => Ok(Project::Crate {
                dir: dir.to_path_buf(),
                name,
            }),
        }
    }

    /// The project's directory.
    pub fn dir(&self) -> &Path {
        match self {
            Project::Crate { dir, .. } => dir,
            Project::Command { build, .. } => &build.dir,
        }
    }

    /// The name to show before the first build (a crate's package may name it
    /// otherwise once built): the directory's.
    pub fn name(&self) -> &str {
        match self {
            Project::Crate { name, .. } => name,
            Project::Command { build, .. } => &build.name,
        }
    }

    /// Builds the project: its component, or why there is none.
    pub fn build(&self) -> Result<Built, BuildFailed> {
        match self {
            Project::Crate { dir, .. } => guest_build::build(dir),
            Project::Command { build, .. } => build.build(),
        }
    }

    /// What the watcher watches.
    pub fn sources(&self) -> Sources {
        match self {
            Project::Crate { .. } => Sources::Crate,
            Project::Command { build, watch } => {
                let dir = canonical(&build.dir);
                let watch: Vec<PathBuf> = watch.iter().map(|path| canonical(path)).collect();
                let component = canonical_parent(&build.component);
                Sources::Paths(Tree::for_paths(&dir, &watch, &component))
            }
        }
    }
}

/// The directory's name, for the start-up line and the app.
fn dir_name(dir: &Path) -> String {
    dir.canonicalize()
        .ok()
        .and_then(|d| d.file_name().map(|n| n.to_string_lossy().into_owned()))
        .unwrap_or_else(|| dir.display().to_string())
}

/// `path` as the watcher's events name it: absolute, through no symbolic link.
fn canonical(path: &Path) -> PathBuf {
    path.canonicalize().unwrap_or_else(|_| path.to_path_buf())
}

/// `path` (a file that may not exist yet) with its directory made canonical.
fn canonical_parent(path: &Path) -> PathBuf {
    match (path.parent(), path.file_name()) {
        (Some(parent), Some(file)) if parent.exists() => canonical(parent).join(file),
        (Some(parent), Some(file)) => canonical_parent(parent).join(file),
        _ => path.to_path_buf(),
    }
}
