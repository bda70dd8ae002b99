//! Syncs of an `os` file: checkpoints that put the WAL into the file and empty it,
//! and the incremental vacuum that gives freed pages back to the disk.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::time::Duration;

use rusqlite::Connection;

use super::wal::WalSize;

/// Free pages a sync gives back to the disk at once (incremental vacuum), so that
/// moving them adds a bounded amount to the WAL.
const VACUUM_STEP: i64 = 2048;

/// Free pages that make a sync vacuum: at least this many, and a quarter of the file.
const VACUUM_MIN_FREE: i64 = 256;

/// The syncer of an `os` file: every `interval` in which something was written, and
/// at once when a writer asks (its WAL passed half of [`wal_limit`]), a sync
/// ([`sync_now`]); once more when the file closes. A failed one (a full disk) is
/// tried again next time: the writes stay in the WAL meanwhile.
pub(super) fn sync_loop(
    conn: &Connection,
    interval: Duration,
    dirty: &AtomicBool,
    wal: &WalSize,
    asked: &mpsc::Receiver<()>,
) {
    loop {
        match asked.recv_timeout(interval) {
            Ok(()) => dirty.store(true, Ordering::Relaxed),
            Err(mpsc::RecvTimeoutError::Timeout) => {}
            Err(mpsc::RecvTimeoutError::Disconnected) => break,
        }
        // A failed sync leaves the file dirty, so it is tried again next time even
        // if nothing more is written; so do free pages left for the next step.
        if dirty.swap(false, Ordering::Relaxed)
            && (!sync_now(conn) || matches!(free_pages_piled_up(conn), Ok(Some(_))))
        {
            dirty.store(true, Ordering::Relaxed);
        }
        wal.sync_asked.store(false, Ordering::Relaxed);
    }
    sync_now(conn);
}

/// One sync, `true` if it succeeded. First, once free pages pile up (deleted
/// data), up to [`VACUUM_STEP`] of them are given back to the disk (incremental
/// vacuum: the file shrinks at the checkpoint). Then `PASSIVE` checkpoints (the WAL
/// fsynced, copied into the file, the file fsynced) copy what the WAL holds without
/// stopping writers, until a few pages are left; then a `TRUNCATE` one copies those
/// and empties the WAL, holding writers off only for that remainder. `PASSIVE`
/// alone never lets the WAL start over while writes keep coming (each checkpoint
/// ends behind the newest frame): a guest incrementing one key without pause grew
/// it by 1 GB in 30 s.
pub(in crate::host::keyvalue) fn sync_now(conn: &Connection) -> bool {
    if let Err(err) = vacuum_some(conn) {
        sync_failed(conn, err);
    }
    for _ in 0..MAX_PASSIVE_ROUNDS {
        match checkpoint(conn, "PASSIVE") {
            Ok((log, copied)) if log - copied > SMALL_REMAINDER_FRAMES => continue,
            Ok(_) => break,
            Err(err) => return sync_failed(conn, err),
        }
    }
    match checkpoint(conn, "TRUNCATE") {
        Ok(_) => true,
        Err(err) => sync_failed(conn, err),
    }
}

/// Gives up to [`VACUUM_STEP`] free pages back once there are at least
/// [`VACUUM_MIN_FREE`] and they are a quarter of the file (a file made before
/// incremental vacuum has none to give: the pragma does nothing there).
fn vacuum_some(conn: &Connection) -> rusqlite::Result<()> {
    let Some(free) = free_pages_piled_up(conn)? else {
        return Ok(());
    };
    // One row a page freed: it runs as long as it is stepped.
    let mut vacuum = conn.prepare(&format!(
        "PRAGMA incremental_vacuum({})",
        free.min(VACUUM_STEP)
    ))?;
    let mut freed = vacuum.query([])?;
    while freed.next()?.is_some() {}
    Ok(())
}

/// The file's free pages, if they are enough to vacuum.
fn free_pages_piled_up(conn: &Connection) -> rusqlite::Result<Option<i64>> {
    let count = |pragma| conn.pragma_query_value(None, pragma, |row| row.get::<_, i64>(0));
    let (free, pages) = (count("freelist_count")?, count("page_count")?);
    Ok((free >= VACUUM_MIN_FREE && free * 4 >= pages).then_some(free))
}

/// Logs a failed sync with the file's path; `false`.
fn sync_failed(conn: &Connection, err: rusqlite::Error) -> bool {
    let path = conn.path().unwrap_or("a key-value file");
    tracing::warn!("syncing {path}: {err}");
    false
}

/// Passive checkpoints a sync may run before its `TRUNCATE` one.
const MAX_PASSIVE_ROUNDS: usize = 4;

/// WAL frames (pages) left uncopied that a `TRUNCATE` checkpoint may copy while
/// writers wait.
const SMALL_REMAINDER_FRAMES: i64 = 64;

/// A checkpoint in `mode`: the WAL's frames, and how many of them are now copied.
fn checkpoint(conn: &Connection, mode: &str) -> rusqlite::Result<(i64, i64)> {
    conn.query_row(&format!("PRAGMA wal_checkpoint({mode})"), [], |row| {
        Ok((row.get(1)?, row.get(2)?))
    })
}
