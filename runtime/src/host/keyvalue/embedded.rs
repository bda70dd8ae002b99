//! The embedded backend: one SQLite file per app (`<data-dir>/kv/APP.sqlite3`) in
//! WAL mode: a table of every bucket's keys and a row of the app's totals (keys,
//! bytes) that quotas are checked against in each write's transaction.
//!
//! Reads run in the guest's host call (a query on the app's connection, about a
//! microsecond; counted as the guest's CPU time like any host work). Writes depend on
//! the app's `durability`:
//! - `os` (the default): grouped on the async thread ([`Group`]): the writes that
//!   arrive in one turn of the event loop share one transaction appended to the WAL
//!   with `synchronous=NORMAL`, and each is acknowledged once the OS has that
//!   transaction, no fsync, so it survives a crash of wedge. (A commit is most of a
//!   write's cost, two `pwrite`s and the WAL index's insert: grouped, concurrent
//!   writers share one.) A thread of the file checkpoints the WAL every
//!   `sync_interval` (an fsync of the WAL, then of the file): a power cut may lose
//!   that last interval of writes, never the file's consistency (SQLite's WAL
//!   checksums drop a torn tail).
//! - `disk`: the file's writer thread takes every write queued when it is free into
//!   one transaction, committed with `synchronous=FULL` (an fsync of the WAL) before
//!   any of them is acknowledged: concurrent writers share an fsync instead of
//!   queueing for one each, and an fsync never holds an async thread.
//!
//! A transaction is begun and committed in one go, never held open across an
//! await: a read sees committed writes only, and a write not yet acknowledged is not
//! seen (its group's commit has not run yet).
//!
//! What runs on an async thread never waits there for a lock: an operation (or a
//! group's commit) that finds the file's connection or its lock taken (a sync under
//! way, a slow disk) is handed to a blocking thread, which waits; other apps'
//! requests on the async thread go on meanwhile.
//!
//! Disk use is bounded: the WAL is synced early once it holds half of
//! [`wal_limit`] and writes are refused past it; freed pages go back to the disk
//! by incremental vacuum at syncs once they pile up.
//!
//! A file of wedge's first store (`APP.redb`) is imported on the first open
//! (redb_import.rs).

use std::cell::Cell;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, mpsc};
use std::time::Duration;

use async_trait::async_trait;
use rusqlite::{Connection, ErrorCode, OpenFlags, OptionalExtension, params};
use tokio::sync::oneshot;

pub use wedge_config::keyvalue::Durability;

use super::backend::{
    Backend, Bucket, Failure, ListFrom, Outcome, Quota, add, batch_too_big, stored_number,
};

/// Writes one transaction takes at most (a group's, a `disk` batch's): each waits for
/// its commit.
const MAX_BATCH: usize = 256;
/// Bytes of keys and values past which a transaction takes no more writes, so that
/// one transaction adds about that much to the WAL (plus one write).
const MAX_BATCH_BYTES: u64 = 4 << 20;
/// The least a file's WAL may hold before writes are refused ([`wal_limit`]); also
/// what SQLite truncates a WAL it starts over to (`journal_size_limit`).
const MIN_WAL_LIMIT: u64 = 4 << 20;
/// Free pages a sync gives back to the disk at once (incremental vacuum), so that
/// moving them adds a bounded amount to the WAL.
const VACUUM_STEP: i64 = 2048;
/// Free pages that make a sync vacuum: at least this many, and a quarter of the file.
const VACUUM_MIN_FREE: i64 = 256;
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

/// How an app's file is written: when a write is acknowledged, and how often an
/// `os` file is synced (the most a power cut may lose: Redis' `appendfsync
/// everysec` makes the same trade at a second).
#[derive(Debug, Clone, Copy)]
pub(super) struct FileSettings {
    pub durability: Durability,
    pub sync_interval: Duration,
}

/// The most an app's WAL may hold before its writes are refused until a sync has
/// emptied it: its `max_bytes`, at least [`MIN_WAL_LIMIT`]. A sync starts early once
/// it holds half of that, so a writer faster than the sync interval meets the
/// limit only while the disk is slower than it writes; the WAL then holds at most
/// this plus one write (itself within `max_bytes`).
pub(super) fn wal_limit(quota: Quota) -> u64 {
    quota.max_bytes.max(MIN_WAL_LIMIT)
}

/// One app's file.
pub(super) struct Embedded {
    file: Arc<File>,
    writes: Writes,
}

/// What operations on the file share, on any thread.
struct File {
    /// Reads, and `os` writes: held for one statement or transaction at a time.
    conn: Mutex<Connection>,
    /// The app's totals as the last commit left them (the metrics read them after
    /// every write: this spares them a query).
    totals: Arc<Mutex<Option<Totals>>>,
    wal: Arc<WalSize>,
}

/// Where writes are committed.
enum Writes {
    /// Grouped on the caller's async thread, committed on `conn`; `syncer` makes
    /// them durable on disk.
    Grouped {
        group: Arc<Group>,
        dirty: Arc<AtomicBool>,
        syncer: Stopper<()>,
    },
    /// Batched by the writer thread, each batch committed with an fsync.
    Batched { writer: Stopper<Job> },
}

/// How much the file's WAL holds, as the last commit or sync left it.
struct WalSize {
    bytes: AtomicU64,
    /// An early sync was asked for and has not ended yet.
    sync_asked: AtomicBool,
    /// Bytes one WAL frame takes: a page and its header.
    frame: u64,
    /// The WAL's file.
    path: PathBuf,
}

impl WalSize {
    fn bytes(&self) -> u64 {
        self.bytes.load(Ordering::Relaxed)
    }

    /// Whether the WAL holds more than `limit` bytes: as the last commit left it,
    /// and (then) as its file is now, which a sync since may have emptied.
    fn over(&self, limit: u64) -> bool {
        if self.bytes() <= limit {
            return false;
        }
        let len = std::fs::metadata(&self.path).map_or(0, |meta| meta.len());
        self.bytes.store(len, Ordering::Relaxed);
        len > limit
    }

    fn set_frames(&self, frames: i64) {
        let frames = u64::try_from(frames).unwrap_or(0);
        self.bytes.store(frames * self.frame, Ordering::Relaxed);
    }
}

thread_local! {
    /// The frames of the WAL the last commit on this thread left (SQLite's WAL
    /// hook, which takes no context, leaves them here for the committer).
    static WAL_FRAMES: Cell<i64> = const { Cell::new(0) };
    /// Whether a connection used on this thread may wait for a lock: not in a
    /// host call on an async thread, whose operation goes to a blocking thread
    /// instead.
    static MAY_WAIT: Cell<bool> = const { Cell::new(true) };
}

fn note_wal_frames(_: &rusqlite::hooks::Wal, frames: std::ffi::c_int) -> rusqlite::Result<()> {
    WAL_FRAMES.with(|last| last.set(i64::from(frames)));
    Ok(())
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

impl Write {
    /// The bytes of keys and values it writes, about.
    fn bytes(&self) -> u64 {
        let keys = |keys: &mut dyn Iterator<Item = usize>| keys.sum::<usize>() as u64;
        match &self.change {
            Change::Set(pairs) => keys(&mut pairs.iter().map(|(k, v)| k.len() + v.len())),
            Change::Delete(keys_) => keys(&mut keys_.iter().map(String::len)),
            Change::Increment(key, _) => key.len() as u64 + 20,
            Change::Swap { key, value, .. } => (key.len() + value.len()) as u64,
            Change::Purge => 0,
        }
    }
}

/// A write for its group's commit or the writer thread, and where its outcome goes.
struct Job {
    write: Write,
    done: Answer,
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
pub(super) fn connect(path: &Path, synchronous: &str) -> rusqlite::Result<Connection> {
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
fn is_busy(err: &rusqlite::Error) -> bool {
    matches!(
        err.sqlite_error_code(),
        Some(ErrorCode::DatabaseBusy | ErrorCode::DatabaseLocked)
    )
}

impl File {
    /// `op` on the app's connection: at once when the connection and the file's
    /// lock are free, else on a blocking thread, which waits for them (another
    /// app's request on this async thread must not wait with it).
    async fn on_conn<T: Send + 'static>(
        self: &Arc<File>,
        op: impl Fn(&File, &Connection) -> rusqlite::Result<T> + Send + 'static,
    ) -> Outcome<T> {
        if let Ok(conn) = self.conn.try_lock() {
            MAY_WAIT.with(|may| may.set(false));
            let done = op(self, &conn);
            MAY_WAIT.with(|may| may.set(true));
            match done {
                Err(err) if is_busy(&err) => {}
                done => return done.map_err(storage),
            }
        }
        let file = self.clone();
        tokio::task::spawn_blocking(move || op(&file, &crate::sync::lock(&file.conn)))
            .await
            .map_err(storage)?
            .map_err(storage)
    }
}

impl Embedded {
    /// Opens (or creates) the file at `path` and starts its thread. Off the async
    /// threads: opening a file whose WAL was not checkpointed replays it first.
    pub(super) async fn open(path: PathBuf, settings: FileSettings) -> Outcome<Arc<dyn Backend>> {
        let opened = tokio::task::spawn_blocking(move || Embedded::open_now(&path, settings))
            .await
            .map_err(storage)?
            .map_err(Failure::Backend)?;
        Ok(Arc::new(opened))
    }

    pub(super) fn open_now(path: &Path, settings: FileSettings) -> Result<Embedded, String> {
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)
                .map_err(|err| format!("cannot create {}: {err}", dir.display()))?;
        }
        super::redb_import::import_old_file(path)?;
        let cannot = |err: rusqlite::Error| format!("cannot open {}: {err}", path.display());
        let conn = connect(path, "NORMAL").map_err(cannot)?;
        conn.execute_batch(SCHEMA).map_err(cannot)?;
        let page: u64 = conn
            .pragma_query_value(None, "page_size", |row| row.get(0))
            .map_err(cannot)?;
        let wal = Arc::new(WalSize {
            bytes: AtomicU64::new(0),
            sync_asked: AtomicBool::new(false),
            frame: page + 24,
            path: PathBuf::from(format!("{}-wal", path.display())),
        });
        let totals = Arc::new(Mutex::new(None));
        let writes = match settings.durability {
            Durability::Os => {
                let syncing = connect(path, "NORMAL").map_err(cannot)?;
                let dirty = Arc::new(AtomicBool::new(false));
                let (flag, size) = (dirty.clone(), wal.clone());
                let interval = settings.sync_interval;
                let syncer = Stopper::spawn("wedge-kv-sync", move |asked| {
                    sync_loop(&syncing, interval, &flag, &size, &asked)
                })?;
                Writes::Grouped {
                    group: Arc::default(),
                    dirty,
                    syncer,
                }
            }
            Durability::Disk => {
                let writing = connect(path, "FULL").map_err(cannot)?;
                let (committed, size) = (totals.clone(), wal.clone());
                let writer = Stopper::spawn("wedge-kv-writer", move |jobs| {
                    write_loop(&writing, &committed, &size, jobs)
                })?;
                Writes::Batched { writer }
            }
        };
        Ok(Embedded {
            file: Arc::new(File {
                conn: Mutex::new(conn),
                totals,
                wal,
            }),
            writes,
        })
    }

    /// `read` on the app's connection ([`File::on_conn`]).
    async fn read<T: Send + 'static>(
        &self,
        read: impl Fn(&Connection) -> rusqlite::Result<T> + Send + 'static,
    ) -> Outcome<T> {
        self.file.on_conn(move |_, conn| read(conn)).await
    }

    async fn write(&self, bucket: Bucket<'_>, change: Change, quota: Quota) -> Outcome<Done> {
        let write = Write {
            bucket: bucket.name.to_string(),
            change,
            quota,
        };
        match &self.writes {
            Writes::Grouped {
                group,
                dirty,
                syncer,
            } => {
                let limit = wal_limit(quota);
                let (done, outcome) = oneshot::channel();
                group.join(&self.file, Job { write, done });
                let outcome = outcome.await.map_err(|_| not_committed())?;
                dirty.store(true, Ordering::Relaxed);
                let wal = &self.file.wal;
                if wal.bytes() > limit / 2 && !wal.sync_asked.swap(true, Ordering::Relaxed) {
                    let _ = syncer.send(());
                }
                outcome
            }
            Writes::Batched { writer } => {
                let (done, outcome) = oneshot::channel();
                writer.send(Job { write, done })?;
                outcome.await.map_err(|_| not_committed())?
            }
        }
    }
}

/// The writes of an `os` file waiting for their group's commit.
#[derive(Default)]
struct Group {
    /// `None`: no commit is scheduled yet; the next write schedules one.
    waiting: Mutex<Option<Vec<Job>>>,
}

impl Group {
    /// Puts `job` into the next commit of `file`, scheduled on this async thread
    /// ([`commit_group`]) if `job` is its first write.
    fn join(self: &Arc<Group>, file: &Arc<File>, job: Job) {
        let mut waiting = crate::sync::lock(&self.waiting);
        if let Some(jobs) = waiting.as_mut() {
            jobs.push(job);
            return;
        }
        *waiting = Some(vec![job]);
        drop(waiting);
        let scheduled = Scheduled(Some(self.clone()));
        tokio::spawn(commit_group(file.clone(), scheduled));
    }
}

/// A group's scheduled commit. Dropped before it took the group's writes (its
/// runtime ending), it drops them, which fails them, and the next write schedules a
/// commit again.
struct Scheduled(Option<Arc<Group>>);

impl Scheduled {
    /// The group's writes; later ones make a new group.
    fn writes(mut self) -> Vec<Job> {
        let group = self.0.take();
        group
            .and_then(|group| crate::sync::lock(&group.waiting).take())
            .unwrap_or_default()
    }
}

impl Drop for Scheduled {
    fn drop(&mut self) {
        if let Some(group) = self.0.take() {
            drop(crate::sync::lock(&group.waiting).take());
        }
    }
}

/// Commits a group: once the tasks ready now have run, and those the next poll of
/// the event loop wakes, every write they made is taken into one transaction (up
/// to [`MAX_BATCH`] writes or [`MAX_BATCH_BYTES`] each, so one commit adds a
/// bounded amount to the WAL); each write is answered once its transaction is
/// committed, or failed with it. A group refused while the WAL is past the
/// writes' [`wal_limit`] is refused whole, checked under the connection so that
/// commits never pass it together.
async fn commit_group(file: Arc<File>, scheduled: Scheduled) {
    // `yield_now` defers this task past the event loop's next poll: a task spawned
    // from a task (as this one) may run next, before the other ready tasks (tokio's
    // multi-thread scheduler keeps it in its LIFO slot), which made groups of one.
    tokio::task::yield_now().await;
    let mut jobs = scheduled.writes().into_iter();
    while let Some(first) = jobs.next() {
        let (writes, answers) = batch(first, || jobs.next());
        let limit = writes.iter().map(|w| wal_limit(w.quota)).min().unwrap_or(0);
        let committed = file
            .on_conn(move |file, conn| {
                if file.wal.over(limit) {
                    return Ok(Err(wal_full(limit)));
                }
                let outcomes = commit(conn, &file.totals, &writes)?;
                file.wal.set_frames(WAL_FRAMES.with(Cell::get));
                Ok(Ok(outcomes))
            })
            .await;
        match committed {
            Ok(Err(refused)) => {
                let refused = answers.iter().map(|_| Err(refused.clone())).collect();
                answer(answers, Ok(refused));
            }
            Ok(Ok(outcomes)) => answer(answers, Ok(outcomes)),
            Err(failed) => answer(answers, Err(failed)),
        }
    }
}

/// `first` and the jobs `next` gives after it, up to [`MAX_BATCH`] writes or
/// [`MAX_BATCH_BYTES`] bytes (plus one write): the writes, and where each one's
/// outcome goes.
fn batch(first: Job, mut next: impl FnMut() -> Option<Job>) -> (Vec<Write>, Vec<Answer>) {
    let mut bytes = first.write.bytes();
    let mut jobs = vec![first];
    while jobs.len() < MAX_BATCH
        && bytes < MAX_BATCH_BYTES
        && let Some(job) = next()
    {
        bytes += job.write.bytes();
        jobs.push(job);
    }
    jobs.into_iter().map(|job| (job.write, job.done)).unzip()
}

/// Where a write's outcome goes.
type Answer = oneshot::Sender<Outcome<Done>>;

/// Answers a batch's writes with their outcomes, or every one with the failure of
/// their transaction.
fn answer(answers: Vec<Answer>, committed: Outcome<Vec<Outcome<Done>>>) {
    match committed {
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

/// What a write fails with when it was dropped uncommitted: its writer thread
/// stopped, or its group's commit ended with its runtime.
fn not_committed() -> Failure {
    Failure::Backend("the write was dropped before its commit (the store is closing)".into())
}

/// A write refused while the WAL is past [`wal_limit`].
fn wal_full(limit: u64) -> Failure {
    Failure::Quota(format!(
        "the app writes faster than its file is synced to disk: its write-ahead log \
         holds more than {limit} bytes (max_bytes, at least {MIN_WAL_LIMIT}); writes \
         work again once it is synced"
    ))
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
        let (name, key) = (bucket.name.to_string(), key.to_string());
        self.read(move |conn| get_value(conn, &name, &key)).await
    }

    async fn get_many(
        &self,
        bucket: Bucket<'_>,
        keys: &[String],
        max_bytes: u64,
    ) -> Outcome<Vec<Option<Vec<u8>>>> {
        let (name, keys) = (bucket.name.to_string(), keys.to_vec());
        let read = self.read(move |conn| {
            // Sized first (no value copied), read after: in one read transaction.
            let txn = conn.unchecked_transaction()?;
            let mut bytes = 0u64;
            for key in &keys {
                bytes += stored_len(&txn, &name, key)?.unwrap_or(0) as u64;
                if bytes > max_bytes {
                    return Ok(None);
                }
            }
            let values = keys.iter().map(|key| get_value(&txn, &name, key));
            values.collect::<rusqlite::Result<_>>().map(Some)
        });
        read.await?.ok_or_else(|| batch_too_big(max_bytes))
    }

    async fn exists(&self, bucket: Bucket<'_>, key: &str) -> Outcome<bool> {
        let (name, key) = (bucket.name.to_string(), key.to_string());
        self.read(move |conn| Ok(stored_len(conn, &name, &key)?.is_some()))
            .await
    }

    async fn list_keys(
        &self,
        bucket: Bucket<'_>,
        from: ListFrom,
        limit: usize,
    ) -> Outcome<Vec<String>> {
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let name = bucket.name.to_string();
        self.read(move |conn| match &from {
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
        .await
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
        let committed = *crate::sync::lock(&self.file.totals);
        let totals = match committed {
            Some(totals) => totals,
            None => self.read(Totals::read).await?,
        };
        Ok(Some((totals.keys, totals.bytes)))
    }
}

/// The syncer of an `os` file: every `interval` in which something was written, and
/// at once when a writer asks (its WAL passed half of [`wal_limit`]), a sync
/// ([`sync_now`]); once more when the file closes. A failed one (a full disk) is
/// tried again next time: the writes stay in the WAL meanwhile.
fn sync_loop(
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
pub(super) fn sync_now(conn: &Connection) -> bool {
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

/// The writer thread of a `disk` file: every write queued when it is free goes into
/// one transaction (up to [`MAX_BATCH`] writes or [`MAX_BATCH_BYTES`]), committed
/// before any of them is answered; a sync once the WAL holds half of
/// [`wal_limit`], so it never holds more than that and one batch. Ends when the
/// backend is dropped.
fn write_loop(
    conn: &Connection,
    totals: &Mutex<Option<Totals>>,
    wal: &WalSize,
    jobs: mpsc::Receiver<Job>,
) {
    while let Ok(first) = jobs.recv() {
        let (writes, answers) = batch(first, || jobs.try_recv().ok());
        answer(answers, commit(conn, totals, &writes).map_err(storage));
        wal.set_frames(WAL_FRAMES.with(Cell::get));
        let limit = writes.iter().map(|w| wal_limit(w.quota)).min().unwrap_or(0);
        if wal.bytes() > limit / 2 && sync_now(conn) {
            wal.set_frames(0);
        }
    }
}

/// Applies `writes` in one transaction: each write's own outcome (a write past a
/// quota changes nothing), or a storage failure that fails them all (the
/// transaction rolled back: a write that met a lock may be tried again). The
/// totals committed go to `committed`.
fn commit(
    conn: &Connection,
    committed: &Mutex<Option<Totals>>,
    writes: &[Write],
) -> rusqlite::Result<Vec<Outcome<Done>>> {
    run(conn, "BEGIN IMMEDIATE")?;
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
            Err(err)
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
