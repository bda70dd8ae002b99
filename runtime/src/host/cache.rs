//! On-disk cache of precompiled components, keyed by the engine's
//! compatibility hash and what the component was made from (the bytes loaded and,
//! for a componentized module, its adapter), so a restart skips cranelift.

use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use sha2::{Digest, Sha256};
use wasmtime::Engine;
use wasmtime::component::Component;

/// What the artifacts stored under a key are, beyond what the key hashes: raised when
/// it changes, so artifacts of an older wedge are not loaded (they stay on disk,
/// unused). 2: WASI 0.2 apps served fresh instances run on the engine without
/// component-model concurrency (7db7bdb); keys of 1 (no version hashed) were made
/// when every artifact was for the engine with it, and loading one kept such an app
/// there.
const FORMAT: u64 = 2;

/// Where precompiled artifacts live.
#[derive(Debug, Clone)]
pub struct ArtifactCache {
    /// `None`: nothing is cached (`wedge dev`'s reloads, each a new component that
    /// would only pile up on disk).
    dir: Option<PathBuf>,
}

/// Feeds `Hash` output into SHA-256 so the key is stable across processes.
struct Sha256Hasher(Sha256);

impl Hasher for Sha256Hasher {
    fn write(&mut self, bytes: &[u8]) {
        self.0.update(bytes);
    }
    fn finish(&self) -> u64 {
        0 // never used: only the digest is read
    }
}

impl ArtifactCache {
    /// A cache stored under `dir` (created on first write).
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        ArtifactCache {
            dir: Some(dir.into()),
        }
    }

    /// A cache that holds nothing and stores nothing.
    pub fn disabled() -> Self {
        ArtifactCache { dir: None }
    }

    /// Whether components are stored.
    pub fn is_enabled(&self) -> bool {
        self.dir.is_some()
    }

    /// The file the artifact of a component made from `source` is stored in for
    /// this engine and [`FORMAT`]. Each part's length goes before it, so no two
    /// sources share a key.
    fn path_for(&self, dir: &Path, engine: &Engine, source: &[&[u8]]) -> PathBuf {
        let mut hasher = Sha256Hasher(Sha256::new());
        hasher.0.update(FORMAT.to_le_bytes());
        engine.precompile_compatibility_hash().hash(&mut hasher);
        for part in source {
            hasher.0.update((part.len() as u64).to_le_bytes());
            hasher.0.update(part);
        }
        let digest = hasher.0.finalize();
        let name = crate::hex::hex(&digest);
        dir.join(format!("{name}.cwasm"))
    }

    /// The precompiled component made from `source`, if the cache holds a usable one.
    pub fn load(&self, engine: &Engine, source: &[&[u8]]) -> Option<Component> {
        let path = self.path_for(self.dir.as_ref()?, engine, source);
        if !path.exists() {
            return None;
        }
        // SAFETY: the file was written by `Component::serialize` of this
        // cache and is named by the engine's compatibility hash; wasmtime
        // also checks the header before using it.
        let started = std::time::Instant::now();
        match unsafe { Component::deserialize_file(engine, &path) } {
            Ok(component) => {
                tracing::debug!(
                    "deserialized {} in {} µs",
                    path.display(),
                    started.elapsed().as_micros()
                );
                Some(component)
            }
            Err(err) => {
                tracing::warn!(
                    "ignoring unusable precompiled artifact {}: {err}",
                    path.display()
                );
                None
            }
        }
    }

    /// Stores a component compiled from `source`; failure only costs a
    /// recompilation next time, so it is logged, not returned.
    pub fn store(&self, engine: &Engine, source: &[&[u8]], component: &Component) {
        let Some(dir) = &self.dir else { return };
        let path = self.path_for(dir, engine, source);
        if let Err(err) = write(dir, &path, component) {
            tracing::warn!("could not cache the compiled component: {err:#}");
        }
    }
}

fn write(dir: &Path, path: &Path, component: &Component) -> Result<()> {
    let bytes = component.serialize()?;
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    // Write then rename, so a crash never leaves a half-written artifact.
    let tmp = path.with_extension(format!("tmp{}", std::process::id()));
    std::fs::write(&tmp, bytes).with_context(|| format!("writing {}", tmp.display()))?;
    std::fs::rename(&tmp, path).with_context(|| format!("renaming to {}", path.display()))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Where wedge stored an artifact before keys had a format version.
    fn unversioned_path(dir: &Path, engine: &Engine, source: &[&[u8]]) -> PathBuf {
        let mut hasher = Sha256Hasher(Sha256::new());
        engine.precompile_compatibility_hash().hash(&mut hasher);
        for part in source {
            hasher.0.update((part.len() as u64).to_le_bytes());
            hasher.0.update(part);
        }
        dir.join(format!("{}.cwasm", crate::hex::hex(&hasher.0.finalize())))
    }

    #[test]
    fn an_artifact_stored_under_an_unversioned_key_is_not_loaded() {
        let dir = std::env::temp_dir().join(format!("wedge-cache-test-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let cache = ArtifactCache::new(&dir);
        let engine = Engine::default();
        // The smallest valid component.
        let wasm: &[u8] = b"\0asm\x0d\0\x01\0";
        let component = Component::new(&engine, wasm).unwrap();
        let old = unversioned_path(&dir, &engine, &[wasm]);
        write(&dir, &old, &component).unwrap();
        assert!(cache.load(&engine, &[wasm]).is_none());
        cache.store(&engine, &[wasm], &component);
        assert!(cache.load(&engine, &[wasm]).is_some());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
