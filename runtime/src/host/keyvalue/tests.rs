//! The store's rules over a backend that never answers, and the embedded backend
//! on a real file.

use std::future::pending;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;

use super::backend::{Backend, Bucket, Failure, ListFrom, Outcome, Quota};
use super::embedded::{self, Durability, Embedded, FileSettings};
use super::{AppStore, KeyValue, KvError};
use crate::host::guest_log::GuestOutput;
use crate::host::limits::guest_output::OutputBudget;
use crate::metrics::AppMetrics;

/// A backend that never answers (a server gone silent).
struct Silent;

#[async_trait]
impl Backend for Silent {
    async fn get(&self, _: Bucket<'_>, _: &str) -> Outcome<Option<Vec<u8>>> {
        pending().await
    }
    async fn get_many(&self, _: Bucket<'_>, _: &[String], _: u64) -> Outcome<Vec<Option<Vec<u8>>>> {
        pending().await
    }
    async fn exists(&self, _: Bucket<'_>, _: &str) -> Outcome<bool> {
        pending().await
    }
    async fn list_keys(&self, _: Bucket<'_>, _: ListFrom, _: usize) -> Outcome<Vec<String>> {
        pending().await
    }
    async fn set_many(&self, _: Bucket<'_>, _: Vec<(String, Vec<u8>)>, _: Quota) -> Outcome<()> {
        pending().await
    }
    async fn delete_many(&self, _: Bucket<'_>, _: Vec<String>) -> Outcome<()> {
        pending().await
    }
    async fn increment(&self, _: Bucket<'_>, _: String, _: i64, _: Quota) -> Outcome<i64> {
        pending().await
    }
    async fn swap(
        &self,
        _: Bucket<'_>,
        _: String,
        _: Option<Vec<u8>>,
        _: Vec<u8>,
        _: Quota,
    ) -> Outcome<bool> {
        pending().await
    }
    async fn purge(&self, _: &str) -> Outcome<()> {
        pending().await
    }
}

fn log() -> GuestOutput {
    GuestOutput::new(
        "test".into(),
        OutputBudget::new(0, 0),
        AppMetrics::detached(),
    )
}

fn other(result: Result<impl std::fmt::Debug, KvError>) -> String {
    match result {
        Err(KvError::Other(why)) => why,
        other => panic!("not an `other` error: {other:?}"),
    }
}

#[tokio::test(start_paused = true)]
async fn an_operation_past_its_timeout_fails_and_frees_its_place() {
    let settings = KeyValue {
        timeout: Duration::from_millis(300),
        max_in_flight: 1,
        ..KeyValue::default()
    };
    let store = AppStore::over(Arc::new(Silent), settings);
    let why = other(store.get(&log(), "default", "k").await);
    assert_eq!(
        why,
        "the key-value store failed: no answer within 300ms (timeout)"
    );
    // Its place in flight was given back: the next one times out too, not refused.
    let why = other(store.increment(&log(), "default", "k".into(), 1).await);
    assert!(why.ends_with("(timeout)"), "{why}");
}

#[tokio::test(start_paused = true)]
async fn operations_past_max_in_flight_fail_at_once() {
    let settings = KeyValue {
        max_in_flight: 2,
        ..KeyValue::default()
    };
    let store = Arc::new(AppStore::over(Arc::new(Silent), settings));
    let held: Vec<_> = (0..2)
        .map(|_| {
            let store = store.clone();
            tokio::spawn(async move { store.exists(&log(), "default", "k").await })
        })
        .collect();
    // Let both take their places (the paused clock does not move meanwhile).
    tokio::task::yield_now().await;
    let why = other(store.get(&log(), "default", "k").await);
    assert_eq!(
        why,
        "2 key-value operations of this app are in flight already (max_in_flight)"
    );
    for task in held {
        task.abort();
    }
}

#[tokio::test]
async fn keys_values_and_buckets_past_the_settings_are_refused_before_the_backend() {
    let settings = KeyValue {
        max_key_size: 4,
        max_value_size: 8,
        buckets: vec!["default".into(), "b".into()],
        ..KeyValue::default()
    };
    let store = AppStore::over(Arc::new(Silent), settings);
    assert_eq!(store.open("b"), Ok(()));
    assert_eq!(store.open("other"), Err(KvError::NoSuchStore));
    let why = other(store.get(&log(), "b", "12345").await);
    assert_eq!(
        why,
        "the key is 5 bytes long: keys are at most 4 bytes (max_key_size)"
    );
    let why = other(
        store
            .set_many(&log(), "b", vec![("k".into(), vec![0; 9])])
            .await,
    );
    assert_eq!(
        why,
        "the value is 9 bytes: values are at most 8 bytes (max_value_size)"
    );
    let none = AppStore::none();
    assert_eq!(none.open("default"), Err(KvError::AccessDenied));
}

fn temp_file(tag: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("wedge-kv-unit-{}-{tag}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    dir.join("app.sqlite3")
}

fn bucket(name: &str) -> Bucket<'_> {
    Bucket { app: "app", name }
}

/// A file written as `durability` says, synced every second.
fn every_second(durability: Durability) -> FileSettings {
    FileSettings {
        durability,
        sync_interval: Duration::from_secs(1),
    }
}

/// Each test of the embedded file runs with writes inline and batched.
const BOTH: [Durability; 2] = [Durability::Os, Durability::Disk];

const ROOMY: Quota = Quota {
    max_keys: 100,
    max_bytes: 1 << 20,
};

#[tokio::test(flavor = "multi_thread")]
async fn the_embedded_file_keeps_values_counters_and_buckets_apart() {
    for durability in BOTH {
        keeps_values_counters_and_buckets_apart(durability).await;
    }
}

async fn keeps_values_counters_and_buckets_apart(durability: Durability) {
    let path = temp_file(&format!("basics-{durability}"));
    let db = Embedded::open(path.clone(), every_second(durability))
        .await
        .unwrap();
    let (a, b) = (bucket("a"), bucket("b"));
    assert_eq!(db.get(a, "k").await, Ok(None));
    db.set_many(a, vec![("k".into(), b"one".to_vec())], ROOMY)
        .await
        .unwrap();
    assert_eq!(db.get(a, "k").await, Ok(Some(b"one".to_vec())));
    assert_eq!(db.get(b, "k").await, Ok(None), "buckets are apart");
    assert_eq!(db.increment(a, "n".into(), 5, ROOMY).await, Ok(5));
    assert_eq!(db.increment(a, "n".into(), -7, ROOMY).await, Ok(-2));
    assert_eq!(db.get(a, "n").await, Ok(Some(b"-2".to_vec())));
    let why = db.increment(a, "k".into(), 1, ROOMY).await.unwrap_err();
    assert!(
        format!("{why:?}").contains("not a decimal number"),
        "{why:?}"
    );
    // Compare-and-swap: from absent, then from what is there, never from a stale value.
    assert_eq!(
        db.swap(b, "c".into(), None, b"1".to_vec(), ROOMY).await,
        Ok(true)
    );
    assert_eq!(
        db.swap(b, "c".into(), None, b"2".to_vec(), ROOMY).await,
        Ok(false)
    );
    let from_one = db.swap(b, "c".into(), Some(b"1".to_vec()), b"2".to_vec(), ROOMY);
    assert_eq!(from_one.await, Ok(true));
    assert_eq!(db.get(b, "c").await, Ok(Some(b"2".to_vec())));
    db.delete_many(a, vec!["k".into(), "absent".into()])
        .await
        .unwrap();
    assert_eq!(db.exists(a, "k").await, Ok(false));
    assert_eq!(db.totals("app").await, Ok(Some((2, 5)))); // n=-2, c=2
    drop(db);
    // What was acknowledged is in the file.
    let db = Embedded::open(path, every_second(durability))
        .await
        .unwrap();
    assert_eq!(db.get(a, "n").await, Ok(Some(b"-2".to_vec())));
    assert_eq!(db.get(b, "c").await, Ok(Some(b"2".to_vec())));
    // Purged: every bucket empty, the totals back to nothing, the file usable.
    db.purge("app").await.unwrap();
    assert_eq!(db.get(a, "n").await, Ok(None));
    assert!(
        db.list_keys(b, ListFrom::Start, 10)
            .await
            .unwrap()
            .is_empty()
    );
    assert_eq!(db.totals("app").await, Ok(Some((0, 0))));
    assert_eq!(db.increment(a, "n".into(), 1, ROOMY).await, Ok(1));
}

#[tokio::test(flavor = "multi_thread")]
async fn keys_are_listed_in_pages_by_either_cursor() {
    let db = Embedded::open(temp_file("list"), every_second(Durability::Os))
        .await
        .unwrap();
    let a = bucket("a");
    let pairs = (0..5).map(|n| (format!("k{n}"), vec![n as u8])).collect();
    db.set_many(a, pairs, ROOMY).await.unwrap();
    let page = |from| db.list_keys(a, from, 2);
    assert_eq!(page(ListFrom::Start).await.unwrap(), ["k0", "k1"]);
    assert_eq!(
        page(ListFrom::After("k1".into())).await.unwrap(),
        ["k2", "k3"]
    );
    assert_eq!(page(ListFrom::Offset(4)).await.unwrap(), ["k4"]);
    assert!(page(ListFrom::Offset(u64::MAX)).await.unwrap().is_empty());
    assert!(
        db.list_keys(bucket("empty"), ListFrom::Start, 2)
            .await
            .unwrap()
            .is_empty()
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn quotas_count_every_bucket_and_a_refused_write_changes_nothing() {
    for durability in BOTH {
        quotas_count_every_bucket(durability).await;
    }
}

async fn quotas_count_every_bucket(durability: Durability) {
    let db = Embedded::open(
        temp_file(&format!("quota-{durability}")),
        every_second(durability),
    )
    .await
    .unwrap();
    let quota = Quota {
        max_keys: 2,
        max_bytes: 8,
    };
    let (a, b) = (bucket("a"), bucket("b"));
    db.set_many(a, vec![("k".into(), b"1234".to_vec())], quota)
        .await
        .unwrap();
    db.set_many(b, vec![("k".into(), b"1".to_vec())], quota)
        .await
        .unwrap();
    // A third key, in any bucket, is past max_keys; the batch sets none of its pairs.
    let third = vec![("k".into(), b"2".to_vec()), ("x".into(), b"3".to_vec())];
    let why = db.set_many(b, third, quota).await.unwrap_err();
    assert!(
        format!("{why:?}").contains("at most 2 keys (max_keys)"),
        "{why:?}"
    );
    assert_eq!(db.get(b, "k").await, Ok(Some(b"1".to_vec())));
    // Bytes are keys' and values' lengths: 5 + 2 now; replacing a value counts its
    // new length, 5 + 4 = 9 > 8.
    let why = db
        .set_many(b, vec![("k".into(), b"123".to_vec())], quota)
        .await
        .unwrap_err();
    assert!(format!("{why:?}").contains("(max_bytes)"), "{why:?}");
    assert_eq!(db.increment(b, "k".into(), 10, quota).await, Ok(11)); // 5 + 3 = 8
    // Deleting gives room back.
    db.delete_many(a, vec!["k".into()]).await.unwrap();
    let room = db.set_many(a, vec![("z".into(), b"1234".to_vec())], quota);
    assert_eq!(room.await, Ok(()));
}

#[tokio::test(flavor = "multi_thread")]
async fn concurrent_increments_are_never_lost() {
    for durability in BOTH {
        increments_are_never_lost(durability).await;
    }
}

async fn increments_are_never_lost(durability: Durability) {
    let path = temp_file(&format!("concurrent-{durability}"));
    let db: Arc<dyn Backend> = Embedded::open(path, every_second(durability))
        .await
        .unwrap();
    let tasks: Vec<_> = (0..8)
        .map(|_| {
            let db = db.clone();
            tokio::spawn(async move {
                for _ in 0..25 {
                    db.increment(bucket("a"), "n".into(), 1, ROOMY)
                        .await
                        .unwrap();
                }
            })
        })
        .collect();
    for task in tasks {
        task.await.unwrap();
    }
    assert_eq!(db.get(bucket("a"), "n").await, Ok(Some(b"200".to_vec())));
}

/// The frames (pages) a file's write-ahead log holds: one a page a commit
/// changed, so fewer than the writes when writes share commits.
fn wal_frames(path: &std::path::Path) -> u64 {
    // A 32-byte header, then frames of a 4 KiB page and a 24-byte header each.
    wal_len(path).saturating_sub(32) / (4096 + 24)
}

/// Increments of one key by `writers` tasks spawned at once, each one write, on
/// the file at `path` (synced hourly, so its WAL keeps every frame): the frames
/// they added to the WAL, once each was acknowledged with its own sum.
async fn frames_of_concurrent_increments(path: &std::path::Path, writers: i64) -> u64 {
    let hourly = FileSettings {
        durability: Durability::Os,
        sync_interval: Duration::from_secs(3600),
    };
    let db = Embedded::open(path.to_path_buf(), hourly).await.unwrap();
    assert_eq!(db.increment(bucket("a"), "n".into(), 1, ROOMY).await, Ok(1));
    let before = wal_frames(path);
    // Polled anew (the write above woke this task from the one that committed it):
    // tokio runs at most three tasks from its LIFO slot in a row, and the writers
    // below start a row of their own.
    tokio::task::yield_now().await;
    let tasks: Vec<_> = (0..writers)
        .map(|_| {
            let db = db.clone();
            tokio::spawn(async move { db.increment(bucket("a"), "n".into(), 1, ROOMY).await })
        })
        .collect();
    let mut sums = Vec::new();
    for task in tasks {
        sums.push(task.await.unwrap().unwrap());
    }
    sums.sort();
    assert_eq!(sums, (2..=writers + 1).collect::<Vec<_>>());
    assert_eq!(db.get(bucket("a"), "n").await, Ok(Some(b"17".to_vec())));
    wal_frames(path) - before
}

/// Writes made in one turn of the event loop share one commit (`os`): 16 tasks
/// incrementing one key put two pages into the WAL (the key's, and the totals'
/// as the sum grew a digit), not a commit each. With a commit per write (before)
/// they put 16 pages there.
#[tokio::test(flavor = "current_thread")]
async fn writes_of_one_turn_share_one_commit() {
    let path = temp_file("group");
    assert_eq!(frames_of_concurrent_increments(&path, 16).await, 2);
}

/// The same on tokio's multi-thread scheduler, which runs a task spawned from a
/// task next (its LIFO slot): a group's commit waits for the ready tasks anyway.
/// Without `yield_now` in `commit_group` this failed: the writers took turns with
/// commits of their own. (A worker's periodic poll of the event loop may end a
/// group early: fewer than 8 frames, not 2.)
#[tokio::test(flavor = "multi_thread", worker_threads = 1)]
async fn writes_spawned_from_a_task_share_commits_on_the_multi_thread_scheduler() {
    let path = temp_file("group-lifo");
    // Spawned from a task on the worker, as a request's task spawns.
    let frames = tokio::spawn(async move { frames_of_concurrent_increments(&path, 16).await });
    let frames = frames.await.unwrap();
    assert!(frames < 8, "{frames} frames for 16 writes");
}

/// A bucket's keys and values.
type Pairs<'a> = &'a [(&'a str, &'a [u8])];

/// Writes `buckets` into a redb file at `path` as wedge's first store laid them out:
/// a table `bucket:NAME` of keys to values each, and `wedge:totals`.
fn write_first_store_file(path: &std::path::Path, buckets: &[(&str, Pairs)]) {
    use redb::TableDefinition;
    let db = redb::Database::create(path).unwrap();
    let txn = db.begin_write().unwrap();
    let (mut keys, mut bytes) = (0u64, 0u64);
    for (name, pairs) in buckets {
        let name = format!("bucket:{name}");
        let mut table = txn
            .open_table(TableDefinition::<&str, &[u8]>::new(&name))
            .unwrap();
        for (key, value) in *pairs {
            table.insert(*key, *value).unwrap();
            keys += 1;
            bytes += (key.len() + value.len()) as u64;
        }
    }
    let mut totals = txn
        .open_table(TableDefinition::<&str, u64>::new("wedge:totals"))
        .unwrap();
    totals.insert("keys", keys).unwrap();
    totals.insert("bytes", bytes).unwrap();
    drop(totals);
    txn.commit().unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn a_file_of_the_first_store_is_imported_once_and_kept() {
    let path = temp_file("import");
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    let (old, kept) = (
        path.with_extension("redb"),
        path.with_extension("redb.imported"),
    );
    // `hits` as the first store's `increment` left it: a decimal number as text.
    let default: Pairs = &[("greeting", b"hello"), ("hits", b"41")];
    let other: Pairs = &[("greeting", b"bonjour"), ("bin", &[0, 255, 1])];
    write_first_store_file(&old, &[("default", default), ("other", other)]);

    let db = Embedded::open(path.clone(), every_second(Durability::Os))
        .await
        .unwrap();
    let (a, b) = (bucket("default"), bucket("other"));
    assert_eq!(db.get(a, "greeting").await, Ok(Some(b"hello".to_vec())));
    assert_eq!(db.get(b, "greeting").await, Ok(Some(b"bonjour".to_vec())));
    assert_eq!(db.get(b, "bin").await, Ok(Some(vec![0, 255, 1])));
    let listed = db.list_keys(b, ListFrom::Start, 10).await.unwrap();
    assert_eq!(listed, ["bin", "greeting"]);
    // 8+5, 4+2, 8+7, 3+3 bytes of keys and values.
    assert_eq!(db.totals("app").await, Ok(Some((4, 40))));
    assert_eq!(db.increment(a, "hits".into(), 1, ROOMY).await, Ok(42));
    assert!(!old.exists(), "the old file is renamed");
    assert!(kept.exists(), "the old file is kept");
    let changed = vec![("greeting".into(), b"changed".to_vec())];
    db.set_many(a, changed, ROOMY).await.unwrap();
    drop(db);

    // With both files there, the SQLite one is used and the old one left alone.
    std::fs::rename(&kept, &old).unwrap();
    let db = Embedded::open(path, every_second(Durability::Os))
        .await
        .unwrap();
    assert_eq!(db.get(a, "greeting").await, Ok(Some(b"changed".to_vec())));
    assert_eq!(db.get(a, "hits").await, Ok(Some(b"42".to_vec())));
    assert_eq!(db.totals("app").await, Ok(Some((4, 42))));
    assert!(old.exists() && !kept.exists(), "not imported again");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_file_of_the_first_store_that_cannot_be_read_fails_the_store_and_stays() {
    let path = temp_file("import-broken");
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    let old = path.with_extension("redb");
    std::fs::write(&old, b"not a redb file").unwrap();
    for _ in 0..2 {
        let why = match Embedded::open(path.clone(), every_second(Durability::Os)).await {
            Err(Failure::Backend(why)) => why,
            Err(other) => panic!("not a backend failure: {other:?}"),
            Ok(_) => panic!("opened over a file it could not import"),
        };
        assert!(
            why.starts_with(&format!("cannot import {} into SQLite: ", old.display())),
            "{why}"
        );
        assert_eq!(std::fs::read(&old).unwrap(), b"not a redb file");
        // No SQLite file: the next open tries the import again, never starts empty.
        assert!(!path.exists());
        assert!(!path.with_extension("sqlite3.importing").exists());
    }
}

/// A sync of an `os` file leaves its write-ahead log empty, so writes that never
/// pause cannot grow it past what one sync interval writes. (With a `PASSIVE`
/// checkpoint alone the log kept its length here, and under a steady writer it
/// never started over: 1 GB in 30 s of increments.)
#[test]
fn a_sync_empties_the_write_ahead_log() {
    let path = temp_file("wal");
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    let conn = embedded::connect(&path, "NORMAL").unwrap();
    conn.execute_batch("CREATE TABLE t (v INTEGER)").unwrap();
    for v in 0..100 {
        conn.execute("INSERT INTO t VALUES (?1)", [v]).unwrap();
    }
    let wal = std::path::PathBuf::from(format!("{}-wal", path.display()));
    let wal_len = || std::fs::metadata(&wal).unwrap().len();
    assert!(wal_len() > 0);
    assert!(embedded::sync_now(&conn));
    assert_eq!(wal_len(), 0);
    let rows: i64 = conn
        .query_row("SELECT count(*) FROM t", [], |row| row.get(0))
        .unwrap();
    assert_eq!(rows, 100);
}

fn wal_len(path: &std::path::Path) -> u64 {
    let wal = std::path::PathBuf::from(format!("{}-wal", path.display()));
    std::fs::metadata(wal).map_or(0, |meta| meta.len())
}

/// A guest overwriting a large value without pause, its file synced once an hour:
/// its WAL never holds more than `wal_limit` (its `max_bytes`, at least 4 MiB) and
/// one write, whatever it writes (before, the WAL grew by every write until the
/// next sync: 318 MB in a second at `max_bytes` 2 MiB); the syncs that keep it
/// there start early, so the writes go on being acknowledged.
#[tokio::test(flavor = "multi_thread")]
async fn a_writer_faster_than_its_syncs_keeps_the_wal_within_its_limit() {
    for durability in BOTH {
        wal_stays_bounded(durability).await;
    }
}

async fn wal_stays_bounded(durability: Durability) {
    let path = temp_file(&format!("wal-bound-{durability}"));
    let hourly = FileSettings {
        durability,
        sync_interval: Duration::from_secs(3600),
    };
    let db = Embedded::open(path.clone(), hourly).await.unwrap();
    let quota = Quota {
        max_keys: 10,
        max_bytes: 256 * 1024,
    };
    let limit = embedded::wal_limit(quota);
    assert_eq!(limit, 4 << 20);
    // Each value other than the last: SQLite writes no page an overwrite leaves
    // as it was.
    let value = |n: u8| vec![n; 200 * 1024];
    // A write of 200 KiB takes 51 pages of 4 KiB and their 24-byte headers, and a
    // few more for the tree and the totals.
    let bound = limit + 64 * 4120;
    let (mut acknowledged, mut tries) = (0, 0);
    // 60 writes are 12 MiB: past the limit three times over.
    while acknowledged < 60 {
        tries += 1;
        assert!(tries < 1_000_000, "writes stayed refused: no early sync");
        let pair = vec![("k".into(), value(acknowledged))];
        match db.set_many(bucket("a"), pair, quota).await {
            Ok(()) => acknowledged += 1,
            Err(Failure::Quota(why)) => {
                assert!(why.contains("synced to disk"), "{why}");
                tokio::task::yield_now().await;
            }
            Err(other) => panic!("{other:?}"),
        }
        let len = wal_len(&path);
        assert!(len <= bound, "{durability}: the WAL holds {len} bytes");
    }
    assert_eq!(db.get(bucket("a"), "k").await, Ok(Some(value(59))));
}

/// Deleted data gives its pages back to the disk at the next sync (incremental
/// vacuum), once they are a quarter of the file; before, the file kept its size.
/// (More than one sync's step is given back by the next syncs: by hand, 20 MiB
/// deleted went back 8 MiB a second.)
#[test]
fn freed_pages_go_back_to_the_disk_at_a_sync() {
    let path = temp_file("vacuum");
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    let conn = embedded::connect(&path, "NORMAL").unwrap();
    conn.execute_batch("CREATE TABLE t (v BLOB)").unwrap();
    for _ in 0..256 {
        conn.execute("INSERT INTO t VALUES (zeroblob(8192))", [])
            .unwrap();
    }
    assert!(embedded::sync_now(&conn));
    let full = std::fs::metadata(&path).unwrap().len();
    assert!(full > 2 << 20, "{full}");
    conn.execute("DELETE FROM t", []).unwrap();
    assert!(embedded::sync_now(&conn));
    let emptied = std::fs::metadata(&path).unwrap().len();
    assert!(emptied < full / 8, "{emptied} of {full} bytes left");
}

/// One app's file locked by another connection (a sync that a slow disk holds, a
/// second process): its write waits on a blocking thread, and another app's
/// write on the same (only) async thread is answered meanwhile; once the lock is
/// released the waiting write lands. Before, the write waited in its host call,
/// sleeping the async thread in steps up to a second, then failed, and the other
/// app's write ran only after it.
#[tokio::test(flavor = "current_thread")]
async fn a_locked_file_does_not_hold_up_another_apps_writes() {
    let (stuck_path, free_path) = (temp_file("stuck"), temp_file("free"));
    let stuck: Arc<dyn Backend> =
        Arc::new(Embedded::open_now(&stuck_path, every_second(Durability::Os)).unwrap());
    let free = Embedded::open_now(&free_path, every_second(Durability::Os)).unwrap();
    let holder = embedded::connect(&stuck_path, "NORMAL").unwrap();
    holder.execute_batch("BEGIN IMMEDIATE").unwrap();

    let (started, running) = tokio::sync::oneshot::channel();
    let waiting = tokio::spawn(async move {
        started.send(()).unwrap();
        stuck
            .set_many(bucket("a"), vec![("k".into(), b"late".to_vec())], ROOMY)
            .await
    });
    // Resumes once the stuck write's task has run as far as it goes.
    running.await.unwrap();
    let answered = free.set_many(bucket("a"), vec![("k".into(), b"v".to_vec())], ROOMY);
    assert_eq!(answered.await, Ok(()));
    assert!(!waiting.is_finished(), "the stuck write ended first");
    holder.execute_batch("COMMIT").unwrap();
    assert_eq!(waiting.await.unwrap(), Ok(()));
}

/// A current-thread runtime with one blocking thread, for
/// [`answered_while_another_waits_for_a_blocking_thread`] to hold.
fn runtime_with_one_blocking_thread() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .max_blocking_threads(1)
        .build()
        .unwrap()
}

/// Two apps' files: the first (shared, for a spawned task) and the second.
fn two_apps(first: &str, second: &str) -> (Arc<dyn Backend>, Embedded) {
    let settings = every_second(Durability::Os);
    let first = Embedded::open_now(&temp_file(first), settings).unwrap();
    let second = Embedded::open_now(&temp_file(second), settings).unwrap();
    (Arc::new(first), second)
}

/// Holds the runtime's one blocking thread, starts `first` in a task and, once that
/// task has run as far as it goes, awaits `second` on this thread: `second` must be
/// answered while `first` still waits (for a blocking thread: it cannot end first).
/// Then frees the thread; both outcomes.
async fn answered_while_another_waits_for_a_blocking_thread<T: Send + 'static, S>(
    first: impl Future<Output = T> + Send + 'static,
    second: impl Future<Output = S>,
) -> (T, S) {
    let (release, gate) = std::sync::mpsc::channel::<()>();
    let blocking_thread_taken = tokio::task::spawn_blocking(move || gate.recv());
    let (started, running) = tokio::sync::oneshot::channel();
    let first = tokio::spawn(async move {
        started.send(()).unwrap();
        first.await
    });
    running.await.unwrap();
    let second = second.await;
    assert!(!first.is_finished(), "the large one was answered first");
    release.send(()).unwrap();
    blocking_thread_taken.await.unwrap().unwrap();
    (first.await.unwrap(), second)
}

/// A group carrying more than 64 KiB is committed on a blocking thread, so another
/// app's small write on the same async thread is answered while the large one
/// waits for its commit. (Committed on the async thread, as every group was, the
/// 512 KiB write was answered first: its commit held the thread, and the other app
/// waited.)
#[test]
fn a_large_commit_does_not_hold_up_another_apps_writes() {
    runtime_with_one_blocking_thread().block_on(async {
        let (large, small) = two_apps("large", "small");
        let value = vec![7; 512 << 10];
        let large_write = async move {
            large
                .set_many(bucket("a"), vec![("k".into(), value)], ROOMY)
                .await
        };
        let small_write = small.set_many(bucket("a"), vec![("k".into(), b"v".to_vec())], ROOMY);
        let (large, small) =
            answered_while_another_waits_for_a_blocking_thread(large_write, small_write).await;
        assert_eq!(small, Ok(()));
        assert_eq!(large, Ok(()));
    });
}

/// A batch read carrying more than 64 KiB runs on a blocking thread, so another
/// app's read on the same async thread is answered while the large one waits for
/// it. On the async thread, as every read was, a 15 MiB `get-many` held the thread
/// about 60 ms.
#[test]
fn a_large_batch_read_does_not_hold_up_another_apps_reads() {
    runtime_with_one_blocking_thread().block_on(async {
        let (large, small) = two_apps("large-read", "small-read");
        let pairs = vec![("k".into(), vec![7; 96 << 10])];
        assert_eq!(large.set_many(bucket("a"), pairs, ROOMY).await, Ok(()));
        let pairs = vec![("k".into(), b"v".to_vec())];
        assert_eq!(small.set_many(bucket("a"), pairs, ROOMY).await, Ok(()));
        let large_read = async move { large.get_many(bucket("a"), &["k".into()], 1 << 20).await };
        let small_read = small.get(bucket("a"), "k");
        let (large, small) =
            answered_while_another_waits_for_a_blocking_thread(large_read, small_read).await;
        assert_eq!(small, Ok(Some(b"v".to_vec())));
        assert_eq!(large, Ok(vec![Some(vec![7; 96 << 10])]));
    });
}

/// A file commits one group at a time: a write that comes while a commit waits for
/// the file joins the next group, which that commit takes once it is done, instead
/// of scheduling a commit of its own that would wait beside it (on a blocking
/// thread, for the connection: one more for each write that came, up to the app's
/// `max_in_flight`). Before, the second write here scheduled a second commit.
#[tokio::test(flavor = "current_thread")]
async fn a_write_that_comes_while_a_commit_waits_joins_the_next_group() {
    let path = temp_file("one-commit");
    let db: Arc<dyn Backend> =
        Arc::new(Embedded::open_now(&path, every_second(Durability::Os)).unwrap());
    let holder = embedded::connect(&path, "NORMAL").unwrap();
    holder.execute_batch("BEGIN IMMEDIATE").unwrap();
    let write = |value: &'static [u8]| {
        let db = db.clone();
        tokio::spawn(async move {
            let pairs = vec![("k".into(), value.to_vec())];
            db.set_many(bucket("a"), pairs, ROOMY).await
        })
    };
    let tasks = tokio::runtime::Handle::current().metrics();

    let first = write(b"1");
    // The write joins a group and schedules its commit; the commit yields once, then
    // finds the file locked and waits for it on a blocking thread.
    tokio::task::yield_now().await;
    tokio::task::yield_now().await;
    let before = tasks.num_alive_tasks();
    let second = write(b"2");
    tokio::task::yield_now().await;
    assert_eq!(
        tasks.num_alive_tasks(),
        before + 1,
        "the second write scheduled a commit"
    );

    holder.execute_batch("COMMIT").unwrap();
    assert_eq!(first.await.unwrap(), Ok(()));
    assert_eq!(second.await.unwrap(), Ok(()));
    assert_eq!(db.get(bucket("a"), "k").await, Ok(Some(b"2".to_vec())));
}

/// A write budget lets one second's worth through, then refuses while the app owes
/// and lets writes through again once time has paid the debt.
#[tokio::test(start_paused = true)]
async fn writes_past_the_write_rate_are_refused_until_time_pays_for_them() {
    let budget = super::WriteBudget::new(1000);
    assert_eq!(budget.charge(600), Ok(()));
    // Not in debt yet: passes, and owes 200.
    assert_eq!(budget.charge(600), Ok(()));
    let why = other(budget.charge(1));
    assert_eq!(
        why,
        "the app writes at most 1000 bytes of keys and values a second (max_write_rate)"
    );
    tokio::time::advance(Duration::from_millis(150)).await;
    assert!(budget.charge(1).is_err());
    tokio::time::advance(Duration::from_millis(100)).await;
    assert_eq!(budget.charge(1), Ok(()));
}

/// A store that cannot open waits 1 s, 2 s, 4 s… up to 30 s between tries.
#[test]
fn a_failed_opening_is_tried_again_after_a_doubling_wait() {
    let mut failed = super::opening::OpenFailed::after(None, "x".into());
    let mut waits = vec![failed.wait.as_secs()];
    for _ in 0..6 {
        failed = super::opening::OpenFailed::after(Some(&failed), "x".into());
        waits.push(failed.wait.as_secs());
    }
    assert_eq!(waits, [1, 2, 4, 8, 16, 30, 30]);
    assert_eq!(failed.tries, 7);
}

/// Operations of an app whose store cannot open fail at once, without trying to
/// open it again until the wait is over (the fault gone meanwhile, they still
/// fail), and the first failure alone is a `Backend` one, which is logged.
#[tokio::test(flavor = "multi_thread")]
async fn an_unopenable_store_fails_fast_until_its_wait_is_over() {
    let data = temp_file("unopenable").parent().unwrap().to_path_buf();
    std::fs::create_dir_all(&data).unwrap();
    std::fs::write(data.join("kv"), "not a directory").unwrap();
    let host = super::KeyValueHost::new(&data);
    let store = host
        .store("app", &KeyValue::default(), AppMetrics::detached())
        .unwrap();
    let first = other(store.get(&log(), "default", "k").await);
    assert!(
        first.starts_with("the key-value store failed: cannot create"),
        "{first}"
    );
    assert!(!first.contains("failed to open"), "{first}");
    std::fs::remove_file(data.join("kv")).unwrap();
    let fast = other(store.get(&log(), "default", "k").await);
    assert!(
        fast.contains("cannot create") && fast.contains("(failed to open 1 times; next try in "),
        "{fast}"
    );
}
