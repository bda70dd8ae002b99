//! The embedded backend: one SQLite file per app (`<data-dir>/kv/APP.sqlite3`) in
//! WAL mode: a table of every bucket's keys and a row of the app's totals (keys,
//! bytes) that quotas are checked against in each write's transaction.
//!
//! Reads run in the guest's host call (a query on the app's connection, about a
//! microsecond; counted as the guest's CPU time like any host work), on a blocking
//! thread for a batch carrying more than [`MAX_ASYNC_THREAD_BYTES`]. Writes depend
//! on the app's `durability`:
//! - `os` (the default): grouped ([`Group`]): the writes that arrive in one turn of
//!   the event loop, or while the file's previous transaction was committed, share
//!   one transaction appended to the WAL with `synchronous=NORMAL`, committed by
//!   one task at a time (on an async thread when it is small, on a blocking
//!   thread when it carries more than 64 KiB: another app's requests on that
//!   thread must not wait for megabytes to be copied), and each is acknowledged
//!   once the OS has that transaction, no fsync, so it survives a crash of wedge.
//!   (A commit is most of a write's cost, two `pwrite`s and the WAL index's
//!   insert: grouped, concurrent writers share one.) A thread of the file
//!   checkpoints the WAL every `sync_interval` (an fsync of the WAL, then of the
//!   file): a power cut may lose that last interval of writes, never the file's
//!   consistency (SQLite's WAL checksums drop a torn tail).
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

mod committers;
mod connection;
mod sync;
mod transaction;
mod wal;

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use rusqlite::{Connection, OptionalExtension, params};
use tokio::sync::oneshot;

pub use wedge_config::keyvalue::Durability;

use self::committers::{Group, Stopper, not_committed, write_loop};
use self::connection::{MAY_WAIT, is_busy};
use self::sync::sync_loop;
use self::transaction::{Change, Done, Job, Write};
use self::wal::WalSize;
use super::backend::{Backend, Bucket, Failure, ListFrom, Outcome, Quota, batch_too_big};

pub(super) use self::connection::connect;
#[cfg(test)]
pub(super) use self::sync::sync_now;
pub(super) use self::transaction::Totals;
pub(super) use self::wal::wal_limit;

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

/// Bytes of keys and values one operation may copy on an async thread: a commit
/// (a group's transaction) or a batch read carrying more runs on a blocking thread,
/// for copying megabytes there held up every other app's requests on that thread
/// (a 15 MiB `get-many` about 60 ms). A lone `get` stays on the async thread: its
/// value is at most `max_value_size`, and a read there needs no thread hop.
pub(super) const MAX_ASYNC_THREAD_BYTES: u64 = 64 << 10;

/// How an app's file is written: when a write is acknowledged, and how often an
/// `os` file is synced (the most a power cut may lose: Redis' `appendfsync
/// everysec` makes the same trade at a second).
#[derive(Debug, Clone, Copy)]
pub(super) struct FileSettings {
    pub durability: Durability,
    pub sync_interval: Duration,
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
    /// Grouped by the file's commit task (on the async thread of the write that
    /// started it), committed on `conn`; `syncer` makes them durable on disk.
    Grouped {
        group: Arc<Group>,
        dirty: Arc<AtomicBool>,
        syncer: Stopper<()>,
    },
    /// Batched by the writer thread, each batch committed with an fsync.
    Batched { writer: Stopper<Job> },
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
        self.on_blocking_thread(op).await
    }

    /// `op` on the app's connection on a blocking thread, which waits for the
    /// connection and the file's lock.
    async fn on_blocking_thread<T: Send + 'static>(
        self: &Arc<File>,
        op: impl FnOnce(&File, &Connection) -> rusqlite::Result<T> + Send + 'static,
    ) -> Outcome<T> {
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

fn get_value(conn: &Connection, bucket: &str, key: &str) -> rusqlite::Result<Option<Vec<u8>>> {
    conn.prepare_cached("SELECT value FROM kv WHERE bucket = ?1 AND key = ?2")?
        .query_row(params![bucket, key], |row| row.get(0))
        .optional()
}

/// What a batch read found.
enum BatchRead {
    Values(Vec<Option<Vec<u8>>>),
    /// The values come to more than the caller has room for.
    TooBig,
    /// More than may be copied where it was asked: to be read on a blocking thread.
    Large,
}

/// The values of `keys`, sized first (no value copied) and read after, in one read
/// transaction: none if they come to more than `max_bytes` (`TooBig`) or than
/// `copy_limit` (`Large`).
fn read_batch(
    conn: &Connection,
    name: &str,
    keys: &[String],
    max_bytes: u64,
    copy_limit: u64,
) -> rusqlite::Result<BatchRead> {
    let txn = conn.unchecked_transaction()?;
    let mut bytes = 0u64;
    for key in keys {
        bytes += stored_len(&txn, name, key)?.unwrap_or(0) as u64;
        if bytes > max_bytes {
            return Ok(BatchRead::TooBig);
        }
    }
    if bytes > copy_limit {
        return Ok(BatchRead::Large);
    }
    let values = keys.iter().map(|key| get_value(&txn, name, key));
    values
        .collect::<rusqlite::Result<_>>()
        .map(BatchRead::Values)
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
        let batch = Arc::new((bucket.name.to_string(), keys.to_vec()));
        let small = batch.clone();
        let read = self.read(move |conn| {
            let (name, keys) = &*small;
            read_batch(conn, name, keys, max_bytes, MAX_ASYNC_THREAD_BYTES)
        });
        let read = match read.await? {
            BatchRead::Large => {
                let large = move |_: &File, conn: &Connection| {
                    let (name, keys) = &*batch;
                    read_batch(conn, name, keys, max_bytes, u64::MAX)
                };
                self.file.on_blocking_thread(large).await?
            }
            read => read,
        };
        match read {
            BatchRead::Values(values) => Ok(values),
            BatchRead::TooBig | BatchRead::Large => Err(batch_too_big(max_bytes)),
        }
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
