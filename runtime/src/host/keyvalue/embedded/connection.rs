//! The app file's connections: SQLite's `unix-excl` VFS, WAL mode, and lock waits
//! only where waiting is allowed (never in a host call on an async thread).

use std::cell::Cell;
use std::path::Path;
use std::time::Duration;

use rusqlite::{Connection, ErrorCode, OpenFlags};

use super::wal::{MIN_WAL_LIMIT, note_wal_frames};

/// How long opening a file waits for another process's lock on it (another wedge
/// on the same data dir) before it fails.
const BUSY_TIMEOUT: Duration = Duration::from_secs(1);

/// Waits for a lock held in this process (the syncer's checkpoint) or by another
/// wedge, in steps of [`BUSY_STEP`] up to about [`BUSY_TIMEOUT`], where waiting is
/// allowed ([`MAY_WAIT`]): in a host call on an async thread it gives up at once,
/// and the operation is tried again on a blocking thread. (SQLite's own timeout
/// sleeps 1, 2, 5, 10… ms between tries.)
fn retry_briefly(tries: i32) -> bool {
    if tries >= BUSY_TRIES || !MAY_WAIT.with(Cell::get) {
        return false;
    }
    std::thread::sleep(BUSY_STEP);
    true
}

/// How long a connection waits between two tries of a lock.
const BUSY_STEP: Duration = Duration::from_micros(100);

const BUSY_TRIES: i32 = (BUSY_TIMEOUT.as_micros() / BUSY_STEP.as_micros()) as i32;

/// A connection to the file at `path` in WAL mode, fsyncing as `synchronous` says
/// (`NORMAL`: at checkpoints only; `FULL`: at every commit too), that never
/// checkpoints by itself (wedge's syncs do, [`sync_now`]). On SQLite's `unix-excl`
/// VFS: the first connection locks the file for this process (another wedge
/// opening it fails after [`BUSY_TIMEOUT`]), and the connections of this process
/// coordinate in memory, so a transaction makes no lock syscalls (the default VFS
/// makes about four `fcntl`s a transaction) and the WAL's index is in memory, not
/// in a `-shm` file. A new file vacuums incrementally (`auto_vacuum` can only be
/// set before its first table: a file made by an older wedge keeps its free pages
/// until a `VACUUM`).
pub(in crate::host::keyvalue) fn connect(
    path: &Path,
    synchronous: &str,
) -> rusqlite::Result<Connection> {
    let conn = Connection::open_with_flags_and_vfs(path, OpenFlags::default(), "unix-excl")?;
    conn.busy_handler(Some(retry_briefly))?;
    conn.pragma_update(None, "auto_vacuum", "INCREMENTAL")?;
    conn.pragma_update_and_check(None, "journal_mode", "WAL", |_| Ok(()))?;
    conn.pragma_update(None, "synchronous", synchronous)?;
    conn.pragma_update(None, "journal_size_limit", MIN_WAL_LIMIT as i64)?;
    // Replaces SQLite's own checkpoints after a commit (`wal_autocheckpoint`).
    conn.wal_hook(Some(note_wal_frames));
    Ok(conn)
}

/// Whether `err` is a lock another connection holds.
pub(super) fn is_busy(err: &rusqlite::Error) -> bool {
    matches!(
        err.sqlite_error_code(),
        Some(ErrorCode::DatabaseBusy | ErrorCode::DatabaseLocked)
    )
}

thread_local! {
    /// Whether a connection used on this thread may wait for a lock: not in a
    /// host call on an async thread, whose operation goes to a blocking thread
    /// instead.
    pub(super) static MAY_WAIT: Cell<bool> = const { Cell::new(true) };
}
