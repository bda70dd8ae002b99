//! The embedded backend: one SQLite file per app (`<data-dir>/kv/APP.sqlite3`) in
//! WAL mode: a table of every bucket's keys and a row of the app's totals (keys,
//! bytes) that quotas are checked against in each write's transaction.
//!
//! Reads run in the guest's host call (a query on the app's connection, about a
//! microsecond; counted as the guest's CPU time like any host work). Writes depend on
//! the app's `durability`:
//! - `os` (the default): in the host call too, one transaction appended to the WAL
//!   with `synchronous=NORMAL`: acknowledged once the OS has it, no fsync, so it
//!   survives a crash of wedge. A thread of the file checkpoints the WAL every
//!   [`SYNC_INTERVAL`] (an fsync of the WAL, then of the file): a power cut may lose
//!   that last interval of writes, never the file's consistency (SQLite's WAL
//!   checksums drop a torn tail).
//! - `disk`: the file's writer thread takes every write queued when it is free into
//!   one transaction, committed with `synchronous=FULL` (an fsync of the WAL) before
//!   any of them is acknowledged: concurrent writers share an fsync instead of
//!   queueing for one each, and an fsync never holds an async thread.
//!
//! A file of wedge's first store (`APP.redb`) is imported on the first open
//! (redb_import.rs).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, mpsc};
use std::time::Duration;

use async_trait::async_trait;
use rusqlite::{Connection, OpenFlags, OptionalExtension, params};
use tokio::sync::oneshot;

pub use wedge_config::keyvalue::Durability;

use super::backend::{
    Backend, Bucket, Failure, ListFrom, Outcome, Quota, add, batch_too_big, stored_number,
};

/// How often a file written with `durability = "os"` is synced to disk: the most a
/// power cut may lose (Redis' `appendfsync everysec` makes the same trade).
pub(super) const SYNC_INTERVAL: Duration = Duration::from_secs(1);
/// Writes one `disk` transaction takes at most: each waits for the fsync of its batch.
const MAX_BATCH: usize = 256;
/// How long opening a file waits for another process's lock on it (another wedge
/// on the same data dir) before it fails.
const BUSY_TIMEOUT: Duration = Duration::from_secs(1);

pub(super) const SCHEMA: &str = "
    CREATE TABLE IF NOT EXISTS kv (
        bucket TEXT NOT NULL, key TEXT NOT NULL, value BLOB NOT NULL,
        PRIMARY KEY (bucket, key)
    ) WITHOUT ROWID;
    CREATE TABLE IF NOT EXISTS totals (
        id INTEGER PRIMARY KEY CHECK (id = 0), keys INTEGER NOT NULL, bytes INTEGER NOT NULL
    );
    INSERT OR IGNORE INTO totals VALUES (0, 0, 0);
";

/// One app's file.
pub(super) struct Embedded {
    /// Reads, and `os` writes: held for one statement or transaction at a time.
    conn: Mutex<Connection>,
    writes: Writes,
    /// The app's totals as the last commit left them (the metrics read them after
    /// every write: this spares them a query).
    totals: Arc<Mutex<Option<Totals>>>,
}

/// Where writes are committed.
enum Writes {
    /// In the caller, on `conn`; `syncer` makes them durable on disk.
    Inline {
        dirty: Arc<AtomicBool>,
        _syncer: Stopper<()>,
    },
    /// Batched by the writer thread, each batch committed with an fsync.
    Batched { writer: Stopper<Job> },
}

/// A thread of the file, stopped and joined when this is dropped: its channel's
/// sender goes first, which tells it to finish.
struct Stopper<T> {
    sender: Option<mpsc::Sender<T>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl<T> Stopper<T> {
    fn spawn(
        name: &str,
        body: impl FnOnce(mpsc::Receiver<T>) + Send + 'static,
    ) -> Result<Stopper<T>, String>
    where
        T: Send + 'static,
    {
        let (sender, receiver) = mpsc::channel();
        let thread = std::thread::Builder::new()
            .name(name.into())
            .spawn(move || body(receiver))
            .map_err(|err| format!("cannot start a thread: {err}"))?;
        Ok(Stopper {
            sender: Some(sender),
            thread: Some(thread),
        })
    }

    fn send(&self, item: T) -> Outcome<()> {
        self.sender
            .as_ref()
            .and_then(|sender| sender.send(item).ok())
            .ok_or_else(|| Failure::Backend("the writer thread has stopped".into()))
    }
}

/// Closes the file's threads before the file: the writer finishes the batch it
/// holds, the syncer syncs once more.
impl<T> Drop for Stopper<T> {
    fn drop(&mut self) {
        drop(self.sender.take());
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// A write, its bucket and the quota it must stay within.
struct Write {
    bucket: String,
    change: Change,
    quota: Quota,
}

/// A write for the writer thread, and where its outcome goes.
struct Job {
    write: Write,
    done: oneshot::Sender<Outcome<Done>>,
}

enum Change {
    Set(Vec<(String, Vec<u8>)>),
    Delete(Vec<String>),
    Increment(String, i64),
    Swap {
        key: String,
        expected: Option<Vec<u8>>,
        value: Vec<u8>,
    },
    /// Every bucket's keys.
    Purge,
}

enum Done {
    Nothing,
    Number(i64),
    Swapped(bool),
}

/// A write was answered with another kind's outcome (never: `apply` answers each
/// kind with its own).
fn mismatched() -> Failure {
    Failure::Backend("a write was answered with another kind of outcome".into())
}

fn storage(err: impl std::fmt::Display) -> Failure {
    Failure::Backend(err.to_string())
}

const UNLIMITED: Quota = Quota {
    max_keys: u64::MAX,
    max_bytes: u64::MAX,
};

/// Waits for a lock held in this process (the syncer's checkpoint) or by another
/// wedge, in steps of [`BUSY_STEP`] up to about [`BUSY_TIMEOUT`]. SQLite's own
/// timeout sleeps 1, 2, 5, 10… ms between tries, so an async thread whose write met
/// a checkpoint of a millisecond or two slept ten or more, and every app on that
/// thread waited with it.
fn retry_briefly(tries: i32) -> bool {
    if tries >= BUSY_TRIES {
        return false;
    }
    std::thread::sleep(BUSY_STEP);
    true
}

/// How long a connection waits between two tries of a lock.
const BUSY_STEP: Duration = Duration::from_micros(100);
const BUSY_TRIES: i32 = (BUSY_TIMEOUT.as_micros() / BUSY_STEP.as_micros()) as i32;

/// A connection to the file at `path` in WAL mode, fsyncing as `synchronous` says
/// (`NORMAL`: at checkpoints only; `FULL`: at every commit too), checkpointing by
/// itself or not. On SQLite's `unix-excl` VFS: the first connection locks the file
/// for this process (another wedge opening it fails after [`BUSY_TIMEOUT`]), and
/// the connections of this process coordinate in memory, so a transaction makes
/// no lock syscalls (the default VFS makes about four `fcntl`s a transaction) and
/// the WAL's index is in memory, not in a `-shm` file.
pub(super) fn connect(
    path: &Path,
    synchronous: &str,
    checkpoints: bool,
) -> rusqlite::Result<Connection> {
    let conn = Connection::open_with_flags_and_vfs(path, OpenFlags::default(), "unix-excl")?;
    conn.busy_handler(Some(retry_briefly))?;
    conn.pragma_update_and_check(None, "journal_mode", "WAL", |_| Ok(()))?;
    conn.pragma_update(None, "synchronous", synchronous)?;
    if !checkpoints {
        conn.pragma_update(None, "wal_autocheckpoint", 0)?;
    }
    Ok(conn)
}

impl Embedded {
    /// Opens (or creates) the file at `path` and starts its thread. Off the async
    /// threads: opening a file whose WAL was not checkpointed replays it first.
    pub(super) async fn open(path: PathBuf, durability: Durability) -> Outcome<Arc<dyn Backend>> {
        let opened = tokio::task::spawn_blocking(move || Embedded::open_now(&path, durability))
            .await
            .map_err(storage)?
            .map_err(Failure::Backend)?;
        Ok(Arc::new(opened))
    }

    fn open_now(path: &Path, durability: Durability) -> Result<Embedded, String> {
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)
                .map_err(|err| format!("cannot create {}: {err}", dir.display()))?;
        }
        super::redb_import::import_old_file(path)?;
        let cannot = |err: rusqlite::Error| format!("cannot open {}: {err}", path.display());
        let conn = connect(path, "NORMAL", false).map_err(cannot)?;
        conn.execute_batch(SCHEMA).map_err(cannot)?;
        let totals = Arc::new(Mutex::new(None));
        let writes = match durability {
            Durability::Os => {
                let syncing = connect(path, "NORMAL", false).map_err(cannot)?;
                let dirty = Arc::new(AtomicBool::new(false));
                let flag = dirty.clone();
                let syncer = Stopper::spawn("wedge-kv-sync", move |stop| {
                    sync_loop(&syncing, &flag, &stop)
                })?;
                Writes::Inline {
                    dirty,
                    _syncer: syncer,
                }
            }
            Durability::Disk => {
                let writing = connect(path, "FULL", true).map_err(cannot)?;
                let committed = totals.clone();
                let writer = Stopper::spawn("wedge-kv-writer", move |jobs| {
                    write_loop(&writing, &committed, jobs)
                })?;
                Writes::Batched { writer }
            }
        };
        Ok(Embedded {
            conn: Mutex::new(conn),
            writes,
            totals,
        })
    }

    /// `read` on the app's connection.
    fn read<T>(&self, read: impl FnOnce(&Connection) -> rusqlite::Result<T>) -> Outcome<T> {
        read(&crate::sync::lock(&self.conn)).map_err(storage)
    }

    async fn write(&self, bucket: Bucket<'_>, change: Change, quota: Quota) -> Outcome<Done> {
        let write = Write {
            bucket: bucket.name.to_string(),
            change,
            quota,
        };
        match &self.writes {
            Writes::Inline { dirty, .. } => {
                let conn = crate::sync::lock(&self.conn);
                let outcome = commit(&conn, &self.totals, std::slice::from_ref(&write))?;
                dirty.store(true, Ordering::Relaxed);
                outcome.into_iter().next().ok_or_else(mismatched)?
            }
            Writes::Batched { writer } => {
                let (done, outcome) = oneshot::channel();
                writer.send(Job { write, done })?;
                outcome
                    .await
                    .map_err(|_| Failure::Backend("the writer thread has stopped".into()))?
            }
        }
    }
}

fn get_value(conn: &Connection, bucket: &str, key: &str) -> rusqlite::Result<Option<Vec<u8>>> {
    conn.prepare_cached("SELECT value FROM kv WHERE bucket = ?1 AND key = ?2")?
        .query_row(params![bucket, key], |row| row.get(0))
        .optional()
}

fn stored_len(conn: &Connection, bucket: &str, key: &str) -> rusqlite::Result<Option<usize>> {
    conn.prepare_cached("SELECT length(value) FROM kv WHERE bucket = ?1 AND key = ?2")?
        .query_row(params![bucket, key], |row| row.get(0))
        .optional()
}

pub(super) fn put_value(
    conn: &Connection,
    bucket: &str,
    key: &str,
    value: &[u8],
) -> rusqlite::Result<()> {
    conn.prepare_cached("INSERT OR REPLACE INTO kv (bucket, key, value) VALUES (?1, ?2, ?3)")?
        .execute(params![bucket, key, value])
        .map(drop)
}

#[async_trait]
impl Backend for Embedded {
    async fn get(&self, bucket: Bucket<'_>, key: &str) -> Outcome<Option<Vec<u8>>> {
        self.read(|conn| get_value(conn, bucket.name, key))
    }

    async fn get_many(
        &self,
        bucket: Bucket<'_>,
        keys: &[String],
        max_bytes: u64,
    ) -> Outcome<Vec<Option<Vec<u8>>>> {
        let conn = crate::sync::lock(&self.conn);
        // Sized first (no value copied), read after: in one read transaction.
        let txn = conn.unchecked_transaction().map_err(storage)?;
        let mut bytes = 0u64;
        for key in keys {
            let len = stored_len(&txn, bucket.name, key).map_err(storage)?;
            bytes += len.unwrap_or(0) as u64;
            if bytes > max_bytes {
                return Err(batch_too_big(max_bytes));
            }
        }
        keys.iter()
            .map(|key| get_value(&txn, bucket.name, key).map_err(storage))
            .collect()
    }

    async fn exists(&self, bucket: Bucket<'_>, key: &str) -> Outcome<bool> {
        self.read(|conn| Ok(stored_len(conn, bucket.name, key)?.is_some()))
    }

    async fn list_keys(
        &self,
        bucket: Bucket<'_>,
        from: ListFrom,
        limit: usize,
    ) -> Outcome<Vec<String>> {
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let name = bucket.name;
        self.read(|conn| match &from {
            ListFrom::After(key) => conn
                .prepare_cached(
                    "SELECT key FROM kv WHERE bucket = ?1 AND key > ?2 ORDER BY key LIMIT ?3",
                )?
                .query_map(params![name, key, limit], |row| row.get(0))?
                .collect(),
            ListFrom::Start | ListFrom::Offset(_) => {
                let skip = match from {
                    ListFrom::Offset(n) => i64::try_from(n).unwrap_or(i64::MAX),
                    _ => 0,
                };
                conn.prepare_cached(
                    "SELECT key FROM kv WHERE bucket = ?1 ORDER BY key LIMIT ?2 OFFSET ?3",
                )?
                .query_map(params![name, limit, skip], |row| row.get(0))?
                .collect()
            }
        })
    }

    async fn set_many(
        &self,
        bucket: Bucket<'_>,
        pairs: Vec<(String, Vec<u8>)>,
        quota: Quota,
    ) -> Outcome<()> {
        self.write(bucket, Change::Set(pairs), quota)
            .await
            .map(drop)
    }

    async fn delete_many(&self, bucket: Bucket<'_>, keys: Vec<String>) -> Outcome<()> {
        self.write(bucket, Change::Delete(keys), UNLIMITED)
            .await
            .map(drop)
    }

    async fn increment(
        &self,
        bucket: Bucket<'_>,
        key: String,
        delta: i64,
        quota: Quota,
    ) -> Outcome<i64> {
        match self
            .write(bucket, Change::Increment(key, delta), quota)
            .await?
        {
            Done::Number(n) => Ok(n),
            _ => Err(mismatched()),
        }
    }

    async fn swap(
        &self,
        bucket: Bucket<'_>,
        key: String,
        expected: Option<Vec<u8>>,
        value: Vec<u8>,
        quota: Quota,
    ) -> Outcome<bool> {
        let swap = Change::Swap {
            key,
            expected,
            value,
        };
        match self.write(bucket, swap, quota).await? {
            Done::Swapped(swapped) => Ok(swapped),
            _ => Err(mismatched()),
        }
    }

    async fn purge(&self, app: &str) -> Outcome<()> {
        let bucket = Bucket { app, name: "" };
        self.write(bucket, Change::Purge, UNLIMITED).await.map(drop)
    }

    async fn totals(&self, _app: &str) -> Outcome<Option<(u64, u64)>> {
        let committed = *crate::sync::lock(&self.totals);
        let totals = match committed {
            Some(totals) => totals,
            None => self.read(Totals::read)?,
        };
        Ok(Some((totals.keys, totals.bytes)))
    }
}

/// The syncer of an `os` file: every [`SYNC_INTERVAL`] in which something was
/// written, a sync ([`sync_now`]); once more when the file closes. A failed one (a
/// full disk) is tried again next time: the writes stay in the WAL meanwhile.
fn sync_loop(conn: &Connection, dirty: &AtomicBool, stop: &mpsc::Receiver<()>) {
    while let Err(mpsc::RecvTimeoutError::Timeout) = stop.recv_timeout(SYNC_INTERVAL) {
        // A failed sync leaves the file dirty, so it is tried again next time even
        // if nothing more is written.
        if dirty.swap(false, Ordering::Relaxed) && !sync_now(conn) {
            dirty.store(true, Ordering::Relaxed);
        }
    }
    sync_now(conn);
}

/// One sync of an `os` file, `true` if it succeeded: `PASSIVE` checkpoints (the WAL
/// fsynced, copied into the file, the file fsynced) copy what the WAL holds without
/// stopping writers, until a few pages are left; then a `TRUNCATE` one copies those
/// and empties the WAL, holding writers (on the async threads) off only for that
/// remainder. `PASSIVE` alone never lets the WAL start over while writes keep coming
/// (each checkpoint ends behind the newest frame): a guest incrementing one key
/// without pause grew it by 1 GB in 30 s.
pub(super) fn sync_now(conn: &Connection) -> bool {
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

/// The writer thread of a `disk` file: every write queued when it is free goes into
/// one transaction, committed before any of them is answered. Ends when the backend
/// is dropped.
fn write_loop(conn: &Connection, totals: &Mutex<Option<Totals>>, jobs: mpsc::Receiver<Job>) {
    while let Ok(first) = jobs.recv() {
        let mut batch = vec![first];
        while batch.len() < MAX_BATCH
            && let Ok(job) = jobs.try_recv()
        {
            batch.push(job);
        }
        let (writes, answers): (Vec<Write>, Vec<_>) =
            batch.into_iter().map(|job| (job.write, job.done)).unzip();
        match commit(conn, totals, &writes) {
            Ok(outcomes) => {
                for (done, outcome) in answers.into_iter().zip(outcomes) {
                    let _ = done.send(outcome);
                }
            }
            Err(failure) => {
                for done in answers {
                    let _ = done.send(Err(failure.clone()));
                }
            }
        }
    }
}

/// Applies `writes` in one transaction: each write's own outcome (a write past a
/// quota changes nothing), or a storage failure that fails them all. The totals
/// committed go to `committed`.
fn commit(
    conn: &Connection,
    committed: &Mutex<Option<Totals>>,
    writes: &[Write],
) -> Outcome<Vec<Outcome<Done>>> {
    run(conn, "BEGIN IMMEDIATE").map_err(storage)?;
    let applied = apply_all(conn, writes).and_then(|applied| {
        run(conn, "COMMIT")?;
        Ok(applied)
    });
    match applied {
        Ok((outcomes, totals)) => {
            *crate::sync::lock(committed) = Some(totals);
            Ok(outcomes)
        }
        Err(err) => {
            // Whatever failed (a full disk, even the commit), the transaction ends.
            if !conn.is_autocommit() {
                let _ = run(conn, "ROLLBACK");
            }
            Err(storage(err))
        }
    }
}

/// Runs `sql` (no rows) as a cached statement: `Connection::transaction` would
/// parse its `BEGIN` and `COMMIT` anew each time.
fn run(conn: &Connection, sql: &str) -> rusqlite::Result<()> {
    conn.prepare_cached(sql)?.execute([]).map(drop)
}

/// `writes` applied in the open transaction, and the totals they leave.
fn apply_all(
    conn: &Connection,
    writes: &[Write],
) -> rusqlite::Result<(Vec<Outcome<Done>>, Totals)> {
    let mut totals = Totals::read(conn)?;
    let mut outcomes = Vec::with_capacity(writes.len());
    for write in writes {
        outcomes.push(apply(conn, &mut totals, write)?);
    }
    totals.write(conn)?;
    Ok((outcomes, totals))
}

/// The app's key count and bytes, as the totals row holds them.
#[derive(Clone, Copy)]
pub(super) struct Totals {
    pub(super) keys: u64,
    pub(super) bytes: u64,
}

impl Totals {
    fn read(conn: &Connection) -> rusqlite::Result<Totals> {
        conn.prepare_cached("SELECT keys, bytes FROM totals WHERE id = 0")?
            .query_row([], |row| {
                Ok(Totals {
                    keys: row.get::<_, i64>(0)?.max(0) as u64,
                    bytes: row.get::<_, i64>(1)?.max(0) as u64,
                })
            })
    }

    pub(super) fn write(&self, conn: &Connection) -> rusqlite::Result<()> {
        let clamp = |n: u64| i64::try_from(n).unwrap_or(i64::MAX);
        conn.prepare_cached("UPDATE totals SET keys = ?1, bytes = ?2 WHERE id = 0")?
            .execute(params![clamp(self.keys), clamp(self.bytes)])
            .map(drop)
    }

    /// The totals once `key` goes from `old` (its value's length, if present) to `new`.
    pub(super) fn with(self, key: &str, old: Option<usize>, new: Option<usize>) -> Totals {
        let size = |len: Option<usize>| len.map_or(0, |n| (key.len() + n) as u64);
        Totals {
            keys: self.keys + u64::from(new.is_some()) - u64::from(old.is_some()),
            bytes: self.bytes + size(new) - size(old),
        }
    }

    /// These totals, if a write may take the app from `before` to them.
    /// A write that adds keys or bytes may not end past a quota; one that frees
    /// some always may, even while the app is over it (quotas lowered since).
    fn within(self, before: Totals, quota: Quota) -> Outcome<Totals> {
        if self.keys > before.keys && self.keys > quota.max_keys {
            return Err(Failure::Quota(format!(
                "the app keeps at most {} keys (max_keys)",
                quota.max_keys
            )));
        }
        if self.bytes > before.bytes && self.bytes > quota.max_bytes {
            return Err(Failure::Quota(format!(
                "the app keeps at most {} bytes of keys and values (max_bytes)",
                quota.max_bytes
            )));
        }
        Ok(self)
    }
}

/// One write: `Ok(Err(..))` for a write refused (a quota, a value), `Err` for a
/// storage failure.
fn apply(txn: &Connection, totals: &mut Totals, write: &Write) -> rusqlite::Result<Outcome<Done>> {
    let (bucket, quota) = (write.bucket.as_str(), write.quota);
    match &write.change {
        Change::Set(pairs) => {
            // The last value of a key given twice wins, and counts once.
            let pairs: BTreeMap<&str, &[u8]> = pairs
                .iter()
                .map(|(k, v)| (k.as_str(), v.as_slice()))
                .collect();
            let mut after = *totals;
            for (key, value) in &pairs {
                after = after.with(key, stored_len(txn, bucket, key)?, Some(value.len()));
            }
            if let Err(refused) = after.within(*totals, quota) {
                return Ok(Err(refused));
            }
            for (key, value) in pairs {
                put_value(txn, bucket, key, value)?;
            }
            *totals = after;
        }
        Change::Delete(keys) => {
            let mut delete = txn.prepare_cached(
                "DELETE FROM kv WHERE bucket = ?1 AND key = ?2 RETURNING length(value)",
            )?;
            for key in keys {
                let old: Option<usize> = delete
                    .query_row(params![bucket, key], |row| row.get(0))
                    .optional()?;
                if old.is_some() {
                    *totals = totals.with(key, old, None);
                }
            }
        }
        Change::Increment(key, delta) => {
            let old = get_value(txn, bucket, key)?;
            let sum = match stored_number(old.as_deref()).and_then(|n| add(n, *delta)) {
                Ok(sum) => sum,
                Err(refused) => return Ok(Err(refused)),
            };
            let text = sum.to_string();
            let after = totals.with(key, old.map(|v| v.len()), Some(text.len()));
            if let Err(refused) = after.within(*totals, quota) {
                return Ok(Err(refused));
            }
            put_value(txn, bucket, key, text.as_bytes())?;
            *totals = after;
            return Ok(Ok(Done::Number(sum)));
        }
        Change::Swap {
            key,
            expected,
            value,
        } => {
            let old = get_value(txn, bucket, key)?;
            if old != *expected {
                return Ok(Ok(Done::Swapped(false)));
            }
            let after = totals.with(key, old.map(|v| v.len()), Some(value.len()));
            if let Err(refused) = after.within(*totals, quota) {
                return Ok(Err(refused));
            }
            put_value(txn, bucket, key, value)?;
            *totals = after;
            return Ok(Ok(Done::Swapped(true)));
        }
        Change::Purge => {
            txn.execute("DELETE FROM kv", [])?;
            *totals = Totals { keys: 0, bytes: 0 };
        }
    }
    Ok(Ok(Done::Nothing))
}
