//! `wedge serve TARGET`: a component file, a guest crate directory (built first) or
//! an `oci://` reference (pulled when the server starts).

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, anyhow, bail};

use crate::host::Executor;
use crate::oci::{Reference, Registry, SCHEME};

/// What TARGET names, checked (and built) before anything is bound.
pub enum Target {
    /// A component file (or the one a guest crate built to), read already.
    File {
        name: String,
        path: PathBuf,
        wasm: Vec<u8>,
        /// What a guest crate's metadata says it builds (a file's is the default).
        executor: Executor,
    },
    Oci(Reference),
}

impl Target {
    /// Reads TARGET: an `oci://` reference, else a directory to build or a file.
    pub fn resolve(target: &Path) -> Result<Target> {
        if let Some(text) = target.to_str().filter(|t| t.starts_with(SCHEME)) {
            return Reference::parse(text)
                .map(Target::Oci)
                .map_err(|why| anyhow!(why));
        }
        let (name, path, executor) = if target.is_dir() {
            let built = super::guest_build::build(target)?;
            (built.name, built.wasm, built.executor)
        } else if target.exists() {
            let name = target
                .file_stem()
                .map(|s| s.to_string_lossy().into_owned())
                .unwrap_or_else(|| "app".into());
            (name, target.to_path_buf(), Executor::default())
        } else {
            bail!("{} does not exist", target.display());
        };
        let wasm =
            std::fs::read(&path).with_context(|| format!("cannot read {}", path.display()))?;
        Ok(Target::File {
            name,
            path,
            wasm,
            executor,
        })
    }

    /// The app's name, its component's bytes (pulled through `registry` for a
    /// reference), how to name where they came from in errors, and how a guest
    /// crate's metadata says it runs.
    pub async fn component(
        self,
        registry: &Registry,
    ) -> Result<(String, Vec<u8>, String, Executor)> {
        match self {
            Target::File {
                name,
                path,
                wasm,
                executor,
            } => Ok((name, wasm, path.display().to_string(), executor)),
            Target::Oci(reference) => {
                let name = reference.name().to_string();
                let pulled = registry.fetch(&name, &reference).await?;
                Ok((
                    name,
                    pulled.wasm,
                    reference.to_string(),
                    Executor::default(),
                ))
            }
        }
    }
}
