//! The bound on a file's write-ahead log: how much it holds, and the limit past
//! which writes are refused until a sync has emptied it.

use std::cell::Cell;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use super::super::backend::{Failure, Quota};
use super::transaction::Write;

/// The least a file's WAL may hold before writes are refused ([`wal_limit`]); also
/// what SQLite truncates a WAL it starts over to (`journal_size_limit`).
pub(super) const MIN_WAL_LIMIT: u64 = 4 << 20;

/// The most an app's WAL may hold before its writes are refused until a sync has
/// emptied it: its `max_bytes`, at least [`MIN_WAL_LIMIT`]. A sync starts early once
/// it holds half of that, so a writer faster than the sync interval meets the
/// limit only while the disk is slower than it writes; the WAL then holds at most
/// this plus one write (itself within `max_bytes`).
pub(in crate::host::keyvalue) fn wal_limit(quota: Quota) -> u64 {
    quota.max_bytes.max(MIN_WAL_LIMIT)
}

/// The limit for a transaction of `writes`: the strictest of their apps' quotas.
pub(super) fn batch_wal_limit(writes: &[Write]) -> u64 {
    writes.iter().map(|w| wal_limit(w.quota)).min().unwrap_or(0)
}

/// How much the file's WAL holds, as the last commit or sync left it.
pub(super) struct WalSize {
    pub(super) bytes: AtomicU64,
    /// An early sync was asked for and has not ended yet.
    pub(super) sync_asked: AtomicBool,
    /// Bytes one WAL frame takes: a page and its header.
    pub(super) frame: u64,
    /// The WAL's file.
    pub(super) path: PathBuf,
}

impl WalSize {
    pub(super) fn bytes(&self) -> u64 {
        self.bytes.load(Ordering::Relaxed)
    }

    /// Whether the WAL holds more than `limit` bytes: as the last commit left it,
    /// and (then) as its file is now, which a sync since may have emptied.
    pub(super) fn over(&self, limit: u64) -> bool {
        if self.bytes() <= limit {
            return false;
        }
        let len = std::fs::metadata(&self.path).map_or(0, |meta| meta.len());
        self.bytes.store(len, Ordering::Relaxed);
        len > limit
    }

    pub(super) fn set_frames(&self, frames: i64) {
        let frames = u64::try_from(frames).unwrap_or(0);
        self.bytes.store(frames * self.frame, Ordering::Relaxed);
    }
}

pub(super) fn note_wal_frames(
    _: &rusqlite::hooks::Wal,
    frames: std::ffi::c_int,
) -> rusqlite::Result<()> {
    WAL_FRAMES.with(|last| last.set(i64::from(frames)));
    Ok(())
}

/// A write refused while the WAL is past [`wal_limit`].
pub(super) fn wal_full(limit: u64) -> Failure {
    Failure::Quota(format!(
        "the app writes faster than its file is synced to disk: its write-ahead log \
         holds more than {limit} bytes (max_bytes, at least {MIN_WAL_LIMIT}); writes \
         work again once it is synced"
    ))
}

thread_local! {
    /// The frames of the WAL the last commit on this thread left (SQLite's WAL
    /// hook, which takes no context, leaves them here for the committer).
    pub(super) static WAL_FRAMES: Cell<i64> = const { Cell::new(0) };
}
