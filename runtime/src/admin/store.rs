//! Deployed apps on disk, so they are back after a restart:
//! `<data-dir>/apps/<name>/` holds each version as `<version>.wasm` and
//! `<version>.toml` (its settings; no `.wasm` when they name an `oci://`
//! component, but `<version>.pinned`: the reference they name, pinned to the
//! digest it resolved to when deployed), and `current` names the version served.
//! Every file is written to a temporary name and renamed into place; writing
//! `current` is the commit, so a crash leaves the previous version or the new
//! one, never half of one.

use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use sha2::{Digest, Sha256};

use crate::config::{self, AppConfig, ComponentSource};
use crate::oci::Reference;

/// The file naming the version served.
const CURRENT: &str = "current";

/// The extension of a version's pinned OCI reference.
const PINNED: &str = "pinned";

/// The deployed apps' directory.
pub struct Store {
    dir: PathBuf,
}

/// One version of an app written to disk, not yet committed.
pub struct Version {
    name: String,
    id: String,
    /// Whether this call wrote it (and so may remove it again).
    written: bool,
}

impl Store {
    pub fn new(data_dir: &Path) -> Store {
        Store {
            dir: data_dir.join("apps"),
        }
    }

    /// Names the version of app `name` made of `component` and `config` (hashed
    /// once here: a component may be 100 MiB); nothing is written yet.
    pub fn version(&self, name: &str, component: &[u8], config: &str) -> Version {
        Version {
            name: name.to_string(),
            id: version_id(component, config),
            written: false,
        }
    }

    /// Where `version` keeps its component.
    pub fn component_path(&self, version: &Version) -> PathBuf {
        self.app_dir(&version.name)
            .join(format!("{}.wasm", version.id))
    }

    /// Writes `version`, made of `component` (if uploaded) and `config` (unless it
    /// is there already).
    pub fn write(
        &self,
        mut version: Version,
        component: Option<&[u8]>,
        config: &str,
    ) -> Result<Version> {
        let id = &version.id;
        let dir = self.app_dir(&version.name);
        let wasm = self.component_path(&version);
        let settings = dir.join(format!("{id}.toml"));
        // The file written last marks a whole version.
        let last = if component.is_some() {
            &wasm
        } else {
            &settings
        };
        version.written = !last.is_file();
        if version.written {
            std::fs::create_dir_all(&dir)
                .with_context(|| format!("cannot create {}", dir.display()))?;
            sync_dir(&self.dir).with_context(|| format!("cannot sync {}", self.dir.display()))?;
            write_atomically(&settings, config.as_bytes())?;
            if let Some(component) = component {
                write_atomically(&wasm, component)?;
            }
        }
        Ok(version)
    }

    /// Records the digest-pinned reference `version`'s OCI component resolved to:
    /// restored instead of the reference its settings name.
    pub fn pin(&self, version: &Version, resolved: &Reference) -> Result<()> {
        let dir = self.app_dir(&version.name);
        write_atomically(
            &dir.join(format!("{}.{PINNED}", version.id)),
            resolved.to_string().as_bytes(),
        )
    }

    /// Makes `version` the one restored at start and removes the others.
    pub fn commit(&self, version: Version) -> Result<()> {
        let dir = self.app_dir(&version.name);
        write_atomically(&dir.join(CURRENT), version.id.as_bytes())?;
        let keep = |file: &Path| {
            file.file_stem().and_then(|stem| stem.to_str()) == Some(version.id.as_str())
                || file.file_name().and_then(|name| name.to_str()) == Some(CURRENT)
        };
        for entry in std::fs::read_dir(&dir)?.flatten() {
            if !keep(&entry.path()) {
                let _ = std::fs::remove_file(entry.path());
            }
        }
        Ok(())
    }

    /// Removes a version that was refused, unless it was there before.
    pub fn discard(&self, version: Version) {
        if version.written {
            let dir = self.app_dir(&version.name);
            for ext in ["wasm", "toml", PINNED] {
                let _ = std::fs::remove_file(dir.join(format!("{}.{ext}", version.id)));
            }
        }
    }

    /// Forgets app `name`; `false` if it was not stored.
    pub fn remove(&self, name: &str) -> Result<bool> {
        let dir = self.app_dir(name);
        // Removing `current` first: a crash after it leaves nothing restored.
        match std::fs::remove_file(dir.join(CURRENT)) {
            Ok(()) => {}
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => return Ok(false),
            Err(err) => {
                return Err(err).with_context(|| format!("cannot remove {}", dir.display()));
            }
        }
        std::fs::remove_dir_all(&dir)
            .with_context(|| format!("cannot remove {}", dir.display()))?;
        // Else a crash could bring back an app whose removal was answered 204.
        sync_dir(&self.dir).with_context(|| format!("cannot sync {}", self.dir.display()))?;
        Ok(true)
    }

    /// Every stored app as it was last deployed, by name; an app that cannot be
    /// read is an error of its own.
    pub fn saved(&self) -> Vec<(String, Result<AppConfig>)> {
        let Ok(entries) = std::fs::read_dir(&self.dir) else {
            return Vec::new();
        };
        let mut dirs: Vec<PathBuf> = entries.flatten().map(|entry| entry.path()).collect();
        dirs.sort();
        dirs.iter()
            .filter(|dir| dir.join(CURRENT).is_file())
            .map(|dir| (dir_name(dir), saved_app(dir)))
            .collect()
    }

    fn app_dir(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }
}

/// The name of the app stored in `dir`.
fn dir_name(dir: &Path) -> String {
    dir.file_name()
        .unwrap_or_default()
        .to_string_lossy()
        .into_owned()
}

/// The app stored in `dir`, named after it.
fn saved_app(dir: &Path) -> Result<AppConfig> {
    let name = dir_name(dir);
    let id = std::fs::read_to_string(dir.join(CURRENT))?;
    let settings = dir.join(format!("{}.toml", id.trim()));
    let config = std::fs::read_to_string(&settings)
        .with_context(|| format!("cannot read {}", settings.display()))?;
    // No file: the settings name an oci:// component.
    let component = Some(dir.join(format!("{}.wasm", id.trim()))).filter(|path| path.is_file());
    let source = settings.display().to_string();
    let mut entry = config::parse_app(&config, &source, &name, component).map_err(|errors| {
        let lines: Vec<String> = errors.to_string().lines().map(str::to_string).collect();
        anyhow::anyhow!("{}", lines.join("; "))
    })?;
    let pinned = dir.join(format!("{}.{PINNED}", id.trim()));
    if let Ok(resolved) = std::fs::read_to_string(&pinned) {
        let resolved = Reference::parse(resolved.trim())
            .map_err(|err| anyhow::anyhow!("{}: {err}", pinned.display()))?;
        entry.component = ComponentSource::Oci(resolved);
    }
    Ok(entry)
}

/// Names a version by its component and settings.
fn version_id(component: &[u8], config: &str) -> String {
    let digest = Sha256::new()
        .chain_update(Sha256::digest(component))
        .chain_update(config)
        .finalize();
    crate::hex::hex(&digest)
}

/// Writes `bytes` to `path` through a temporary file in the same directory,
/// synced before the rename so the rename never exposes a partial file, and
/// the directory synced after it so the rename survives a crash.
fn write_atomically(path: &Path, bytes: &[u8]) -> Result<()> {
    let temp = PathBuf::from(format!("{}.partial", path.display()));
    let write = || -> std::io::Result<()> {
        let mut file = std::fs::File::create(&temp)?;
        file.write_all(bytes)?;
        file.sync_all()?;
        std::fs::rename(&temp, path)?;
        sync_dir(path.parent().unwrap_or(Path::new(".")))
    };
    write().with_context(|| format!("cannot write {}", path.display()))
}

/// Makes the renames and new entries in `dir` durable: until then a crash may
/// lose them, and `commit` would already have unlinked the version they replace.
fn sync_dir(dir: &Path) -> std::io::Result<()> {
    std::fs::File::open(dir)?.sync_all()
}
