//! Pulled blobs (manifests and components) on disk, named by their digest:
//! `<data-dir>/oci/sha256/<hex>`. A blob is checked against its name whenever it is
//! read, so a file changed on disk is never served: it is dropped and pulled again.

use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};

use super::Digest;

/// The content-addressed blob store.
#[derive(Clone)]
pub struct BlobCache {
    dir: PathBuf,
}

impl BlobCache {
    /// The cache of the data dir `data_dir`.
    pub fn new(data_dir: &Path) -> BlobCache {
        BlobCache {
            dir: data_dir.join("oci").join("sha256"),
        }
    }

    /// Where the blob `digest` is kept.
    pub fn path(&self, digest: &Digest) -> PathBuf {
        self.dir.join(digest.hex())
    }

    /// The blob `digest`, if it is cached and its bytes still hash to it. One that
    /// does not is removed (and logged), so the next pull fetches it again.
    pub fn get(&self, digest: &Digest) -> Option<Vec<u8>> {
        let path = self.path(digest);
        let bytes = std::fs::read(&path).ok()?;
        let actual = Digest::of(&bytes);
        if actual == *digest {
            return Some(bytes);
        }
        tracing::warn!(
            "the cached blob {} hashes to {actual}, not {digest}: removed, to be pulled again",
            path.display()
        );
        let _ = std::fs::remove_file(&path);
        None
    }

    /// Keeps `bytes` as the blob `digest`; refuses bytes that do not hash to it.
    /// Written to a temporary file and renamed, so a reader never sees half a blob.
    pub fn put(&self, digest: &Digest, bytes: &[u8]) -> Result<()> {
        let actual = Digest::of(bytes);
        if actual != *digest {
            bail!("refusing to cache {actual} as {digest}");
        }
        let path = self.path(digest);
        if path.is_file() {
            return Ok(());
        }
        std::fs::create_dir_all(&self.dir)
            .with_context(|| format!("cannot create {}", self.dir.display()))?;
        // Unique per process and call: two wedges sharing a data dir may pull the
        // same blob at once.
        let temp = self.dir.join(format!(
            "{}.{}.{}.partial",
            digest.hex(),
            std::process::id(),
            unique()
        ));
        let write = || -> std::io::Result<()> {
            let mut file = std::fs::File::create(&temp)?;
            file.write_all(bytes)?;
            file.sync_all()?;
            std::fs::rename(&temp, &path)
        };
        write().map_err(|err| {
            let _ = std::fs::remove_file(&temp);
            anyhow::Error::from(err).context(format!("cannot write {}", path.display()))
        })
    }
}

fn unique() -> u64 {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn temp_cache(tag: &str) -> (BlobCache, PathBuf) {
        let dir = std::env::temp_dir().join(format!(
            "wedge-oci-cache-{}-{tag}-{}",
            std::process::id(),
            unique()
        ));
        let _ = std::fs::remove_dir_all(&dir);
        (BlobCache::new(&dir), dir)
    }

    #[test]
    fn keeps_blobs_by_digest() {
        let (cache, dir) = temp_cache("keeps");
        let digest = Digest::of(b"component bytes");
        assert_eq!(cache.get(&digest), None);
        cache.put(&digest, b"component bytes").unwrap();
        assert_eq!(cache.get(&digest).as_deref(), Some(&b"component bytes"[..]));
        assert_eq!(
            cache.path(&digest),
            dir.join("oci/sha256").join(digest.hex())
        );
        // No temporary file is left behind.
        let files = std::fs::read_dir(dir.join("oci/sha256")).unwrap().count();
        assert_eq!(files, 1);
        let _ = std::fs::remove_dir_all(dir);
    }

    #[test]
    fn refuses_to_store_bytes_under_another_digest() {
        let (cache, dir) = temp_cache("refuses");
        let digest = Digest::of(b"the real component");
        let err = cache.put(&digest, b"something else").unwrap_err();
        assert!(err.to_string().contains(&digest.to_string()), "{err}");
        assert_eq!(cache.get(&digest), None);
        let _ = std::fs::remove_dir_all(dir);
    }

    #[test]
    fn a_blob_changed_on_disk_is_dropped_not_served() {
        let (cache, dir) = temp_cache("tampered");
        let digest = Digest::of(b"the real component");
        cache.put(&digest, b"the real component").unwrap();
        std::fs::write(cache.path(&digest), b"the tampered one").unwrap();
        assert_eq!(cache.get(&digest), None);
        assert!(!cache.path(&digest).exists(), "the bad blob is removed");
        // And it can be cached again.
        cache.put(&digest, b"the real component").unwrap();
        assert!(cache.get(&digest).is_some());
        let _ = std::fs::remove_dir_all(dir);
    }
}
