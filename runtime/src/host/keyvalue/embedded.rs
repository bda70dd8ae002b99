//! The embedded backend: one redb file per app (`<data-dir>/kv/APP.redb`), a table
//! per bucket and one for the app's totals (keys, bytes) that quotas are checked
//! against.
//!
//! Reads run in the guest's host call (a read transaction is a snapshot, a few
//! microseconds; counted as the guest's CPU time like any host work). Writes go to
//! the file's one writer thread, which takes every write queued when it is free into
//! one transaction and commits it with `Durability::Immediate` (fsync) before any
//! of them is acknowledged: an acknowledged write survives a crash of wedge, and
//! concurrent writers share an fsync instead of queueing for one each.

use std::collections::BTreeMap;
use std::ops::Bound;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, mpsc};

use async_trait::async_trait;
use redb::{
    Database, ReadOnlyTable, ReadableDatabase, ReadableTable, Table, TableDefinition, TableError,
};
use tokio::sync::oneshot;

use super::backend::{
    Backend, Bucket, Failure, ListFrom, Outcome, Quota, add, batch_too_big, stored_number,
};

/// The app's totals: `keys` and `bytes` (keys' and values' lengths).
const TOTALS: TableDefinition<&str, u64> = TableDefinition::new("wedge:totals");
/// Writes one transaction takes at most: each waits for the fsync of its batch.
const MAX_BATCH: usize = 256;

/// One app's file.
pub(super) struct Embedded {
    db: Arc<Database>,
    /// Set by the writer when a write failed in storage (a full disk, an I/O
    /// error): redb then refuses every write until the file is opened again.
    broken: Arc<AtomicBool>,
    writes: mpsc::Sender<Job>,
    writer: Option<std::thread::JoinHandle<()>>,
}

/// Closes the file before returning: the writer finishes the batch it holds and
/// lets go of the database, so the file can be opened again (or removed) at once.
impl Drop for Embedded {
    fn drop(&mut self) {
        let (closed, _) = mpsc::channel();
        drop(std::mem::replace(&mut self.writes, closed));
        if let Some(writer) = self.writer.take() {
            let _ = writer.join();
        }
    }
}

/// A write for the writer thread, and where its outcome goes.
struct Job {
    bucket: String,
    write: Write,
    quota: Quota,
    done: oneshot::Sender<Outcome<Done>>,
}

enum Write {
    Set(Vec<(String, Vec<u8>)>),
    Delete(Vec<String>),
    Increment(String, i64),
    Swap {
        key: String,
        expected: Option<Vec<u8>>,
        value: Vec<u8>,
    },
    /// Every bucket's table dropped: in a transaction of its own.
    Purge,
}

enum Done {
    Nothing,
    Number(i64),
    Swapped(bool),
}

fn table_name(bucket: &str) -> String {
    format!("bucket:{bucket}")
}

/// The writer answered a write with another's outcome (never: `apply` answers each
/// kind with its own).
fn mismatched() -> Failure {
    Failure::Backend("the writer thread answered another kind of write".into())
}

fn storage(err: impl std::fmt::Display) -> Failure {
    Failure::Backend(err.to_string())
}

impl Embedded {
    /// Opens (or creates) the file at `path` and starts its writer thread. Off the
    /// async threads: opening a file that was not closed cleanly repairs it first.
    pub(super) async fn open(path: PathBuf) -> Outcome<Arc<dyn Backend>> {
        let opened = tokio::task::spawn_blocking(move || {
            if let Some(dir) = path.parent() {
                std::fs::create_dir_all(dir)
                    .map_err(|err| format!("cannot create {}: {err}", dir.display()))?;
            }
            let db = Database::create(&path)
                .map_err(|err| format!("cannot open {}: {err}", path.display()))?;
            let db = Arc::new(db);
            let (writes, jobs) = mpsc::channel();
            let broken = Arc::new(AtomicBool::new(false));
            let (writer, broke) = (db.clone(), broken.clone());
            let writer = std::thread::Builder::new()
                .name("wedge-kv-writer".into())
                .spawn(move || write_loop(&writer, &broke, jobs))
                .map_err(|err| format!("cannot start a writer thread: {err}"))?;
            Ok::<_, String>(Embedded {
                db,
                broken,
                writes,
                writer: Some(writer),
            })
        })
        .await
        .map_err(storage)?
        .map_err(Failure::Backend)?;
        Ok(Arc::new(opened))
    }

    /// The bucket's table in a read snapshot; `None` if nothing was ever written to it.
    fn read_table(
        &self,
        bucket: Bucket<'_>,
    ) -> Outcome<Option<ReadOnlyTable<&'static str, &'static [u8]>>> {
        let txn = self.db.begin_read().map_err(storage)?;
        let name = table_name(bucket.name);
        match txn.open_table(TableDefinition::<&str, &[u8]>::new(&name)) {
            Ok(table) => Ok(Some(table)),
            Err(TableError::TableDoesNotExist(_)) => Ok(None),
            Err(err) => Err(storage(err)),
        }
    }

    async fn write(&self, bucket: Bucket<'_>, write: Write, quota: Quota) -> Outcome<Done> {
        let (done, outcome) = oneshot::channel();
        let job = Job {
            bucket: bucket.name.to_string(),
            write,
            quota,
            done,
        };
        self.writes
            .send(job)
            .map_err(|_| Failure::Backend("the writer thread has stopped".into()))?;
        outcome
            .await
            .map_err(|_| Failure::Backend("the writer thread has stopped".into()))?
    }
}

#[async_trait]
impl Backend for Embedded {
    async fn get(&self, bucket: Bucket<'_>, key: &str) -> Outcome<Option<Vec<u8>>> {
        let Some(table) = self.read_table(bucket)? else {
            return Ok(None);
        };
        let value = table.get(key).map_err(storage)?;
        Ok(value.map(|v| v.value().to_vec()))
    }

    async fn get_many(
        &self,
        bucket: Bucket<'_>,
        keys: &[String],
        max_bytes: u64,
    ) -> Outcome<Vec<Option<Vec<u8>>>> {
        let Some(table) = self.read_table(bucket)? else {
            return Ok(vec![None; keys.len()]);
        };
        // Sized first (a read of the page that holds each, no copy), copied after.
        let mut found = Vec::with_capacity(keys.len());
        let mut bytes = 0u64;
        for key in keys {
            let value = table.get(key.as_str()).map_err(storage)?;
            bytes += value.as_ref().map_or(0, |v| v.value().len() as u64);
            if bytes > max_bytes {
                return Err(batch_too_big(max_bytes));
            }
            found.push(value);
        }
        Ok(found
            .into_iter()
            .map(|value| value.map(|v| v.value().to_vec()))
            .collect())
    }

    async fn exists(&self, bucket: Bucket<'_>, key: &str) -> Outcome<bool> {
        let Some(table) = self.read_table(bucket)? else {
            return Ok(false);
        };
        Ok(table.get(key).map_err(storage)?.is_some())
    }

    async fn list_keys(
        &self,
        bucket: Bucket<'_>,
        from: ListFrom,
        limit: usize,
    ) -> Outcome<Vec<String>> {
        let Some(table) = self.read_table(bucket)? else {
            return Ok(Vec::new());
        };
        let (start, skip) = match &from {
            ListFrom::Start => (Bound::Unbounded, 0),
            ListFrom::After(key) => (Bound::Excluded(key.as_str()), 0),
            ListFrom::Offset(n) => (Bound::Unbounded, usize::try_from(*n).unwrap_or(usize::MAX)),
        };
        let bounds: (Bound<&str>, Bound<&str>) = (start, Bound::Unbounded);
        let range = table.range(bounds).map_err(storage)?;
        let mut keys = Vec::new();
        for entry in range.skip(skip).take(limit) {
            let (key, _) = entry.map_err(storage)?;
            keys.push(key.value().to_string());
        }
        Ok(keys)
    }

    async fn set_many(
        &self,
        bucket: Bucket<'_>,
        pairs: Vec<(String, Vec<u8>)>,
        quota: Quota,
    ) -> Outcome<()> {
        self.write(bucket, Write::Set(pairs), quota).await.map(drop)
    }

    async fn delete_many(&self, bucket: Bucket<'_>, keys: Vec<String>) -> Outcome<()> {
        let quota = Quota {
            max_keys: u64::MAX,
            max_bytes: u64::MAX,
        };
        self.write(bucket, Write::Delete(keys), quota)
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
            .write(bucket, Write::Increment(key, delta), quota)
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
        let swap = Write::Swap {
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
        let unlimited = Quota {
            max_keys: u64::MAX,
            max_bytes: u64::MAX,
        };
        self.write(bucket, Write::Purge, unlimited).await.map(drop)
    }

    fn is_broken(&self) -> bool {
        self.broken.load(Ordering::Relaxed)
    }

    async fn totals(&self, _app: &str) -> Outcome<Option<(u64, u64)>> {
        let txn = self.db.begin_read().map_err(storage)?;
        let totals = match txn.open_table(TOTALS) {
            Ok(table) => {
                let get = |name| -> Outcome<u64> {
                    Ok(table.get(name).map_err(storage)?.map_or(0, |v| v.value()))
                };
                (get("keys")?, get("bytes")?)
            }
            Err(TableError::TableDoesNotExist(_)) => (0, 0),
            Err(err) => return Err(storage(err)),
        };
        Ok(Some(totals))
    }
}

/// The writer thread: every write queued when it is free goes into one transaction,
/// committed before any of them is answered. Ends when the backend is dropped. A
/// transaction that fails in storage marks the file `broken`.
fn write_loop(db: &Database, broken: &AtomicBool, jobs: mpsc::Receiver<Job>) {
    let mut next = None;
    while let Some(first) = next.take().or_else(|| jobs.recv().ok()) {
        if let Write::Purge = first.write {
            let _ = first
                .done
                .send(noted(broken, purge(db)).map(|()| Done::Nothing));
            continue;
        }
        let mut batch = vec![first];
        while batch.len() < MAX_BATCH
            && let Ok(job) = jobs.try_recv()
        {
            if let Write::Purge = job.write {
                next = Some(job);
                break;
            }
            batch.push(job);
        }
        match noted(broken, commit(db, &batch)) {
            Ok(outcomes) => {
                for (job, outcome) in batch.into_iter().zip(outcomes) {
                    let _ = job.done.send(outcome);
                }
            }
            Err(failure) => {
                for job in batch {
                    let _ = job.done.send(Err(failure.clone()));
                }
            }
        }
    }
}

/// `outcome`, having marked the file `broken` if it is a storage failure.
fn noted<T>(broken: &AtomicBool, outcome: Outcome<T>) -> Outcome<T> {
    if let Err(Failure::Backend(_)) = &outcome {
        broken.store(true, Ordering::Relaxed);
    }
    outcome
}

/// Drops every table of the file (its buckets and its totals) in one transaction.
fn purge(db: &Database) -> Outcome<()> {
    let txn = db.begin_write().map_err(storage)?;
    let tables: Vec<_> = txn.list_tables().map_err(storage)?.collect();
    for table in tables {
        txn.delete_table(table).map_err(storage)?;
    }
    txn.commit().map_err(storage)
}

/// Applies `batch` in one transaction: each write's own outcome (a write past a quota
/// changes nothing), or a storage failure that fails them all.
fn commit(db: &Database, batch: &[Job]) -> Outcome<Vec<Outcome<Done>>> {
    let txn = db.begin_write().map_err(storage)?;
    let mut outcomes = Vec::with_capacity(batch.len());
    {
        let mut totals_table = txn.open_table(TOTALS).map_err(storage)?;
        let mut totals = Totals::read(&totals_table)?;
        for job in batch {
            let name = table_name(&job.bucket);
            let mut table = txn
                .open_table(TableDefinition::<&str, &[u8]>::new(&name))
                .map_err(storage)?;
            outcomes.push(apply(&mut table, &mut totals, job)?);
        }
        totals.write(&mut totals_table)?;
    }
    txn.commit().map_err(storage)?;
    Ok(outcomes)
}

/// The app's key count and bytes, as the totals table holds them.
#[derive(Clone, Copy)]
struct Totals {
    keys: u64,
    bytes: u64,
}

impl Totals {
    fn read(table: &Table<&str, u64>) -> Outcome<Totals> {
        let get = |name| -> Outcome<u64> {
            Ok(table.get(name).map_err(storage)?.map_or(0, |v| v.value()))
        };
        Ok(Totals {
            keys: get("keys")?,
            bytes: get("bytes")?,
        })
    }

    fn write(&self, table: &mut Table<&str, u64>) -> Outcome<()> {
        table.insert("keys", self.keys).map_err(storage)?;
        table.insert("bytes", self.bytes).map_err(storage)?;
        Ok(())
    }

    /// The totals once `key` goes from `old` (its value's length, if present) to `new`.
    fn with(self, key: &str, old: Option<usize>, new: Option<usize>) -> Totals {
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

type BucketTable<'t> = Table<'t, &'static str, &'static [u8]>;

fn stored_len(table: &BucketTable, key: &str) -> Outcome<Option<usize>> {
    Ok(table.get(key).map_err(storage)?.map(|v| v.value().len()))
}

/// One write: `Ok(Err(..))` for a write refused (a quota, a value), `Err` for a
/// storage failure.
fn apply(table: &mut BucketTable, totals: &mut Totals, job: &Job) -> Outcome<Outcome<Done>> {
    let quota = job.quota;
    match &job.write {
        Write::Set(pairs) => {
            // The last value of a key given twice wins, and counts once.
            let pairs: BTreeMap<&str, &[u8]> = pairs
                .iter()
                .map(|(k, v)| (k.as_str(), v.as_slice()))
                .collect();
            let mut after = *totals;
            for (key, value) in &pairs {
                after = after.with(key, stored_len(table, key)?, Some(value.len()));
            }
            if let Err(refused) = after.within(*totals, quota) {
                return Ok(Err(refused));
            }
            for (key, value) in pairs {
                table.insert(key, value).map_err(storage)?;
            }
            *totals = after;
        }
        Write::Delete(keys) => {
            for key in keys {
                if let Some(old) = table.remove(key.as_str()).map_err(storage)? {
                    *totals = totals.with(key, Some(old.value().len()), None);
                }
            }
        }
        Write::Increment(key, delta) => {
            let old = table
                .get(key.as_str())
                .map_err(storage)?
                .map(|v| v.value().to_vec());
            let sum = match stored_number(old.as_deref()).and_then(|n| add(n, *delta)) {
                Ok(sum) => sum,
                Err(refused) => return Ok(Err(refused)),
            };
            let text = sum.to_string();
            let after = totals.with(key, old.map(|v| v.len()), Some(text.len()));
            if let Err(refused) = after.within(*totals, quota) {
                return Ok(Err(refused));
            }
            table
                .insert(key.as_str(), text.as_bytes())
                .map_err(storage)?;
            *totals = after;
            return Ok(Ok(Done::Number(sum)));
        }
        Write::Purge => return Ok(Err(mismatched())),
        Write::Swap {
            key,
            expected,
            value,
        } => {
            let old = table
                .get(key.as_str())
                .map_err(storage)?
                .map(|v| v.value().to_vec());
            if old != *expected {
                return Ok(Ok(Done::Swapped(false)));
            }
            let after = totals.with(key, old.map(|v| v.len()), Some(value.len()));
            if let Err(refused) = after.within(*totals, quota) {
                return Ok(Err(refused));
            }
            table
                .insert(key.as_str(), value.as_slice())
                .map_err(storage)?;
            *totals = after;
            return Ok(Ok(Done::Swapped(true)));
        }
    }
    Ok(Ok(Done::Nothing))
}
