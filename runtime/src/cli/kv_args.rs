//! `--kv` and the key-value quotas: the served app's wasi:keyvalue store
//! (`[app.keyvalue]` of a wedge.toml), defaults taken from [`KeyValue`] (and shown
//! in `--help`).

use std::path::PathBuf;
use std::time::Duration;

use super::value_parsers::{parse_positive_duration, parse_positive_size};
use crate::host::keyvalue::{BackendChoice, KeyValue};
use crate::host::limits::parse_size;
use wedge_config::keyvalue::{self, DEFAULT_BUCKET};

/// The app's key-value store (wasi:keyvalue).
#[derive(clap::Args, Clone)]
#[command(next_help_heading = "Key-value store")]
pub struct KvArgs {
    /// Where the app's keys live: `embedded` (a crash-safe file in the data dir's
    /// kv/), `redis://HOST:PORT` or `rediss://HOST:PORT` (Redis or Valkey, shared by
    /// every wedge pointed at it), `env:NAME` (the URL wedge's environment variable
    /// NAME holds), or `none`.
    #[arg(id = "kv", long = "kv", value_name = "BACKEND", default_value = "embedded",
          value_parser = BackendChoice::parse)]
    pub backend: BackendChoice,

    /// When an `embedded` write is acknowledged: `os`, once the OS has it (it
    /// survives a crash of wedge; a power cut may lose the writes of the last
    /// --kv-sync-interval), or `disk`, once an fsync has put it on disk (it
    /// survives a power cut too).
    #[arg(long, value_name = "WHEN", default_value = "os", value_parser = keyvalue::Durability::parse)]
    pub kv_durability: keyvalue::Durability,

    /// A bucket name the guest may open; repeat for more; `*` allows any name.
    #[arg(id = "kv_bucket", long = "kv-bucket", value_name = "NAME", default_value = DEFAULT_BUCKET,
          value_parser = keyvalue::bucket_name)]
    pub buckets: Vec<String>,

    /// Keys the app may keep, all its buckets together.
    #[arg(long, value_name = "N", default_value_t = keyvalue::DEFAULT_MAX_KEYS)]
    pub kv_max_keys: u64,

    /// The longest key.
    #[arg(long, value_name = "SIZE", default_value = "1KiB", value_parser = parse_positive_size)]
    pub kv_max_key_size: u64,

    /// The largest value.
    #[arg(long, value_name = "SIZE", default_value = "1MiB", value_parser = parse_size)]
    pub kv_max_value_size: u64,

    /// Bytes of keys and values the app may keep, all its buckets together.
    #[arg(long, value_name = "SIZE", default_value = "100MiB", value_parser = parse_size)]
    pub kv_max_bytes: u64,

    /// Operations at once, all the app's instances together; more fail at once.
    #[arg(long, value_name = "N", default_value_t = keyvalue::DEFAULT_MAX_IN_FLIGHT,
          value_parser = clap::value_parser!(u32).range(1..))]
    pub kv_max_in_flight: u32,

    /// How long one operation may take before the guest gets an error.
    #[arg(long, value_name = "DURATION", default_value = "5s", value_parser = parse_positive_duration::<Duration>)]
    pub kv_timeout: Duration,

    /// How often an `os` file is synced to disk: the most a power cut may lose.
    #[arg(long, value_name = "DURATION", default_value = "1s", value_parser = parse_positive_duration::<Duration>)]
    pub kv_sync_interval: Duration,

    /// Bytes of keys and values the app may write a second, averaged; past it
    /// writes fail until it has written less.
    #[arg(long, value_name = "SIZE", default_value = "4MiB", value_parser = parse_positive_size)]
    pub kv_max_write_rate: u64,

    /// Key-value handles (open buckets, compare-and-swap handles) one instance
    /// may hold at once.
    #[arg(long, value_name = "N", default_value_t = keyvalue::DEFAULT_MAX_HANDLES,
          value_parser = clap::value_parser!(u32).range(1..))]
    pub kv_max_handles: u32,

    /// Keys one batch operation (get-many, set-many, delete-many) may name.
    #[arg(long, value_name = "N", default_value_t = keyvalue::DEFAULT_MAX_BATCH,
          value_parser = clap::value_parser!(u32).range(1..))]
    pub kv_max_batch: u32,

    /// A PEM file of the certificate authorities a `rediss://` server's certificate
    /// must chain to, instead of the well-known roots (a Redis behind a private CA).
    #[arg(long, value_name = "FILE")]
    pub kv_ca: Option<PathBuf>,
}

impl KvArgs {
    pub fn settings(&self) -> KeyValue {
        KeyValue {
            backend: self.backend.clone(),
            durability: self.kv_durability,
            buckets: self.buckets.clone(),
            max_keys: self.kv_max_keys,
            max_key_size: self.kv_max_key_size,
            max_value_size: self.kv_max_value_size,
            max_bytes: self.kv_max_bytes,
            max_in_flight: self.kv_max_in_flight,
            timeout: self.kv_timeout,
            sync_interval: self.kv_sync_interval,
            max_write_rate: self.kv_max_write_rate,
            max_handles: self.kv_max_handles,
            max_batch: self.kv_max_batch,
            ca: self.kv_ca.clone(),
        }
    }
}
