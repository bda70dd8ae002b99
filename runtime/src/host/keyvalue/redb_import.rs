//! wedge's first embedded store kept an app's keys in a redb file, `kv/APP.redb`: a
//! table per bucket (`bucket:NAME`, keys to values) and one of the app's totals
//! (`wedge:totals`). The first time the app's store opens and finds that file but
//! no `APP.sqlite3`, every bucket's keys are copied into a new SQLite file; the old
//! file is then renamed `APP.redb.imported` and kept.

use std::error::Error;
use std::path::Path;

use redb::{Database, ReadableDatabase, ReadableTable, TableDefinition, TableHandle};
use rusqlite::Connection;

use super::embedded::{SCHEMA, Totals, put_value};

/// The old file's tables of buckets: `bucket:NAME`.
const BUCKET_TABLE: &str = "bucket:";
/// The old file's totals: recounted from its keys rather than trusted.
const TOTALS_TABLE: &str = "wedge:totals";

/// Imports the redb file beside `sqlite` (the app's SQLite file) if there is one and
/// `sqlite` is not there yet. The new file is built aside and renamed into place
/// whole, so an import that fails (or a crash) leaves no SQLite file and the old
/// file untouched: the next open tries again.
pub(super) fn import_old_file(sqlite: &Path) -> Result<(), String> {
    let old = sqlite.with_extension("redb");
    let exists = |path: &Path| {
        path.try_exists()
            .map_err(|err| format!("cannot look for {}: {err}", path.display()))
    };
    if !exists(&old)? {
        return Ok(());
    }
    if exists(sqlite)? {
        tracing::warn!(
            "{} is ignored: the app's keys are in {}",
            old.display(),
            sqlite.display()
        );
        return Ok(());
    }
    let building = sqlite.with_extension("sqlite3.importing");
    let cannot =
        |err: &dyn std::fmt::Display| format!("cannot import {} into SQLite: {err}", old.display());
    // What a crash left of an earlier attempt: incomplete, never put in place.
    if let Err(err) = std::fs::remove_file(&building)
        && err.kind() != std::io::ErrorKind::NotFound
    {
        return Err(cannot(&err));
    }
    let keys = copy_into(&old, &building).map_err(|err| {
        let _ = std::fs::remove_file(&building);
        cannot(&err)
    })?;
    let kept = sqlite.with_extension("redb.imported");
    let dir = sqlite.parent().unwrap_or(Path::new("."));
    std::fs::rename(&building, sqlite)
        .and_then(|()| sync_dir(dir))
        .and_then(|()| std::fs::rename(&old, &kept))
        .and_then(|()| sync_dir(dir))
        .map_err(|err| cannot(&err))?;
    tracing::info!(
        "imported {keys} keys from {} into {} (the old file is kept as {})",
        old.display(),
        sqlite.display(),
        kept.display()
    );
    Ok(())
}

/// Copies every bucket's keys of the redb file `old` into a new SQLite file
/// `building`, with their totals, in one transaction; the number of keys.
fn copy_into(old: &Path, building: &Path) -> Result<u64, Box<dyn Error>> {
    // Read-write, as the old store opened it: a file not closed cleanly (wedge
    // killed) is repaired first, which a read-only open refuses to do.
    let old = Database::open(old)?;
    let read = old.begin_read()?;
    let conn = Connection::open(building)?;
    // The journal in memory: a failed import deletes the whole file anyway. The
    // commit is fsynced before the file is renamed into place.
    conn.pragma_update_and_check(None, "journal_mode", "MEMORY", |_| Ok(()))?;
    conn.pragma_update(None, "synchronous", "FULL")?;
    // As a file wedge makes (embedded.rs `connect`): set before its first table.
    conn.pragma_update(None, "auto_vacuum", "INCREMENTAL")?;
    let txn = conn.unchecked_transaction()?;
    txn.execute_batch(SCHEMA)?;
    let mut totals = Totals { keys: 0, bytes: 0 };
    for table in read.list_tables()? {
        let name = table.name();
        if name == TOTALS_TABLE {
            continue;
        }
        let bucket = name
            .strip_prefix(BUCKET_TABLE)
            .ok_or_else(|| format!("it has a table `{name}` that wedge did not write"))?;
        let table = read.open_table(TableDefinition::<&str, &[u8]>::new(name))?;
        for entry in table.iter()? {
            let (key, value) = entry?;
            let (key, value) = (key.value(), value.value());
            put_value(&txn, bucket, key, value)?;
            totals = totals.with(key, None, Some(value.len()));
        }
    }
    totals.write(&txn)?;
    txn.commit()?;
    conn.close().map_err(|(_, err)| err)?;
    Ok(totals.keys)
}

/// Makes the renames in `dir` durable.
fn sync_dir(dir: &Path) -> std::io::Result<()> {
    std::fs::File::open(dir)?.sync_all()
}
