//! Writes and their transactions: a batch of writes applied and committed in one
//! transaction, each checked against the app's quotas and totals.

use std::collections::BTreeMap;
use std::sync::Mutex;

use rusqlite::{Connection, OptionalExtension, params};
use tokio::sync::oneshot;

use super::super::backend::{Failure, Outcome, Quota, add, stored_number};
use super::{MAX_ASYNC_THREAD_BYTES, get_value, put_value, stored_len};

/// Writes one transaction takes at most (a group's, a `disk` batch's): each waits for
/// its commit.
pub(super) const MAX_BATCH: usize = 256;

/// Bytes of keys and values past which a transaction takes no more writes, so that
/// one transaction adds about that much to the WAL (plus one write).
pub(super) const MAX_BATCH_BYTES: u64 = 4 << 20;

/// Whether a transaction of `writes` is small enough to commit on an async thread
/// ([`MAX_ASYNC_THREAD_BYTES`]); a purge never is.
pub(super) fn small_enough_for_async_thread(writes: &[Write]) -> bool {
    let purges = writes.iter().any(|w| matches!(w.change, Change::Purge));
    !purges && writes.iter().map(Write::bytes).sum::<u64>() <= MAX_ASYNC_THREAD_BYTES
}

/// A write, its bucket and the quota it must stay within.
pub(super) struct Write {
    pub(super) bucket: String,
    pub(super) change: Change,
    pub(super) quota: Quota,
}

impl Write {
    /// The bytes of keys and values it writes, about.
    fn bytes(&self) -> u64 {
        let bytes: usize = match &self.change {
            Change::Set(pairs) => pairs.iter().map(|(k, v)| k.len() + v.len()).sum(),
            Change::Delete(keys) => keys.iter().map(String::len).sum(),
            Change::Increment(key, _) => key.len() + 20,
            Change::Swap { key, value, .. } => key.len() + value.len(),
            Change::Purge => 0,
        };
        bytes as u64
    }
}

/// A write for its group's commit or the writer thread, and where its outcome goes.
pub(super) struct Job {
    pub(super) write: Write,
    pub(super) done: Answer,
}

pub(super) enum Change {
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

pub(super) enum Done {
    Nothing,
    Number(i64),
    Swapped(bool),
}

/// `first` and the jobs `next` gives after it, up to [`MAX_BATCH`] writes or
/// [`MAX_BATCH_BYTES`] bytes (plus one write): the writes, and where each one's
/// outcome goes.
pub(super) fn batch(
    first: Job,
    mut next: impl FnMut() -> Option<Job>,
) -> (Vec<Write>, Vec<Answer>) {
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
pub(super) type Answer = oneshot::Sender<Outcome<Done>>;

/// Answers a batch's writes with their outcomes, or every one with the failure of
/// their transaction.
pub(super) fn answer(answers: Vec<Answer>, committed: Outcome<Vec<Outcome<Done>>>) {
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

/// Applies `writes` in one transaction: each write's own outcome (a write past a
/// quota changes nothing), or a storage failure that fails them all (the
/// transaction rolled back: a write that met a lock may be tried again). The
/// totals committed go to `committed`.
pub(super) fn commit(
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
pub(in crate::host::keyvalue) struct Totals {
    pub(in crate::host::keyvalue) keys: u64,
    pub(in crate::host::keyvalue) bytes: u64,
}

impl Totals {
    pub(super) fn read(conn: &Connection) -> rusqlite::Result<Totals> {
        conn.prepare_cached("SELECT keys, bytes FROM totals WHERE id = 0")?
            .query_row([], |row| {
                Ok(Totals {
                    keys: row.get::<_, i64>(0)?.max(0) as u64,
                    bytes: row.get::<_, i64>(1)?.max(0) as u64,
                })
            })
    }

    pub(in crate::host::keyvalue) fn write(&self, conn: &Connection) -> rusqlite::Result<()> {
        let clamp = |n: u64| i64::try_from(n).unwrap_or(i64::MAX);
        conn.prepare_cached("UPDATE totals SET keys = ?1, bytes = ?2 WHERE id = 0")?
            .execute(params![clamp(self.keys), clamp(self.bytes)])
            .map(drop)
    }

    /// The totals once `key` goes from `old` (its value's length, if present) to `new`.
    pub(in crate::host::keyvalue) fn with(
        self,
        key: &str,
        old: Option<usize>,
        new: Option<usize>,
    ) -> Totals {
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
