//! State for handlers: `wasi:keyvalue`, per app. The bindings of each version a
//! toolchain imports (`draft`: wasmtime's `wasi:keyvalue@0.2.0-draft`; `draft2`: the
//! `@0.2.0-draft2` Spin's SDK and wasmCloud import; `spin`: Spin's own
//! `spin:key-value@3.0.0`, async, of Spin SDK 7) go through one [`AppStore`],
//! which applies the app's settings (buckets, key and value sizes, operations in
//! flight, a time bound per operation) and hands the rest to a [`Backend`]: a
//! crash-safe file per app (`embedded`) or a Redis/Valkey server shared by apps and
//! by wedges (`redis`). Quotas
//! on the app's keys and bytes are the backend's to check, in the write's own
//! transaction. Whatever fails is an error value for the guest, never a trap.

mod backend;
mod draft;
mod draft2;
mod embedded;
mod opening;
mod redb_import;
mod redis;
mod spin;
#[cfg(test)]
mod tests;
mod view;
mod write_budget;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, Weak};
use std::time::Instant;

use tokio::sync::{Semaphore, SemaphorePermit};

pub use wedge_config::keyvalue::{Backend as BackendChoice, Durability, KeyValue};

use self::backend::{Backend, Bucket, Failure, ListFrom, Quota};
use self::opening::Shared;
use self::redis::TrustedCa;
use self::view::HasKv;
pub use self::view::OpenBucket;
pub(crate) use self::view::{KvHandles, KvView, add_to_linker};
use self::write_budget::WriteBudget;
use super::guest_log::GuestOutput;
use crate::metrics::{AppMetrics, KvOperation, KvOutcome};

/// Keys one `list-keys` call returns at most; the cursor gives the rest.
const LIST_PAGE: usize = 1000;

/// What an operation the backend did not answer within `timeout` fails with.
fn timed_out(timeout: std::time::Duration) -> Failure {
    Failure::Backend(format!(
        "no answer within {} (timeout)",
        humantime::format_duration(timeout)
    ))
}

fn is_write(operation: KvOperation) -> bool {
    matches!(
        operation,
        KvOperation::Set | KvOperation::Delete | KvOperation::Increment | KvOperation::Swap
    )
}

/// A key-value setting an app's store cannot be made with: its key in
/// `[app.keyvalue]`, its flag, and why.
#[derive(Debug)]
pub struct BadSetting {
    pub key: &'static str,
    pub flag: &'static str,
    pub why: String,
}

impl BadSetting {
    fn backend(why: String) -> BadSetting {
        BadSetting {
            key: "backend",
            flag: "--kv",
            why,
        }
    }

    fn ca(why: String) -> BadSetting {
        BadSetting {
            key: "ca",
            flag: "--kv-ca",
            why,
        }
    }
}

/// Why an operation failed, as every `wasi:keyvalue` version's `error` says it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum KvError {
    NoSuchStore,
    AccessDenied,
    Other(String),
}

/// The process's key-value stores: one backend per embedded file or Redis server,
/// opened on first use and shared by the apps (and app versions) that name it.
pub struct KeyValueHost {
    /// `<data-dir>/kv`: the embedded files, one per app.
    dir: PathBuf,
    opened: Mutex<HashMap<String, Weak<Shared>>>,
}

impl KeyValueHost {
    pub fn new(data_dir: &Path) -> Arc<KeyValueHost> {
        Arc::new(KeyValueHost {
            dir: data_dir.join("kv"),
            opened: Mutex::default(),
        })
    }

    /// App `app`'s store with `settings`, counted in `metrics`; an `env:NAME` backend
    /// is read from the environment now, and a `ca` file read and checked now, or
    /// the setting at fault and why. Versions of an app share its backend.
    pub fn store(
        &self,
        app: &str,
        settings: &KeyValue,
        metrics: Arc<AppMetrics>,
    ) -> Result<Arc<AppStore>, BadSetting> {
        let settings = KeyValue {
            backend: settings.backend.resolve().map_err(BadSetting::backend)?,
            ..settings.clone()
        };
        let ca = self::redis::trusted_ca(&settings).map_err(BadSetting::ca)?;
        let shared = match &settings.backend {
            BackendChoice::None => None,
            _ => Some(self.shared(app, &settings, ca)),
        };
        Ok(Arc::new(AppStore {
            app: app.into(),
            in_flight: Semaphore::new(settings.max_in_flight as usize),
            written: WriteBudget::new(settings.max_write_rate),
            settings,
            shared,
            metrics,
        }))
    }

    /// Removes every key app `app` keeps in the backend `settings` names (an app
    /// removed with `--purge`). An embedded file never made stays unmade.
    pub async fn purge(&self, app: &str, settings: &KeyValue) -> anyhow::Result<()> {
        let settings = &KeyValue {
            backend: settings.backend.resolve().map_err(anyhow::Error::msg)?,
            ..settings.clone()
        };
        let shared = match &settings.backend {
            BackendChoice::None => return Ok(()),
            _ => {
                let ca = self::redis::trusted_ca(settings).map_err(anyhow::Error::msg)?;
                self.shared(app, settings, ca)
            }
        };
        if shared.choice == BackendChoice::Embedded && !shared.path.exists() {
            return Ok(());
        }
        let purged = async { shared.backend(None).await?.purge(app).await };
        let purged = tokio::time::timeout(settings.timeout, purged).await;
        match purged {
            Ok(Ok(())) => Ok(()),
            Ok(Err(failure)) => {
                let why = failure.why();
                anyhow::bail!(
                    "purging the key-value store of `{app}` ({}): {why}",
                    settings.backend
                )
            }
            Err(_) => anyhow::bail!(
                "purging the key-value store of `{app}` ({}): no answer within {}",
                settings.backend,
                humantime::format_duration(settings.timeout)
            ),
        }
    }

    /// The backend `settings` name for app `app`: its own file, or the connection to
    /// a Redis server that the apps with the same `timeout` and `ca` share (the
    /// timeout is the connection's own bound on an answer, which frees what a
    /// silent server holds).
    fn shared(&self, app: &str, settings: &KeyValue, ca: Option<TrustedCa>) -> Arc<Shared> {
        let id = match &settings.backend {
            BackendChoice::Redis(url) => {
                let ca = ca.as_ref().map(TrustedCa::fingerprint);
                format!("{} {:?} {ca:?}", url.as_str(), settings.timeout)
            }
            _ => format!(
                "embedded:{app} {} {:?}",
                settings.durability, settings.sync_interval
            ),
        };
        let mut opened = crate::sync::lock(&self.opened);
        opened.retain(|_, shared| shared.strong_count() > 0);
        if let Some(shared) = opened.get(&id).and_then(Weak::upgrade) {
            return shared;
        }
        let shared = Arc::new(Shared {
            choice: settings.backend.clone(),
            path: self.dir.join(format!("{app}.sqlite3")),
            durability: settings.durability,
            sync_interval: settings.sync_interval,
            timeout: settings.timeout,
            ca,
            current: Mutex::default(),
            failed: Mutex::default(),
            opening: tokio::sync::Mutex::default(),
        });
        opened.insert(id, Arc::downgrade(&shared));
        shared
    }
}

/// One app's store: its settings, its backend, its operations in flight.
pub struct AppStore {
    app: Arc<str>,
    settings: KeyValue,
    /// `None`: the app has no store (`backend = "none"`).
    shared: Option<Arc<Shared>>,
    in_flight: Semaphore,
    written: WriteBudget,
    metrics: Arc<AppMetrics>,
}

impl AppStore {
    /// `why` as the guest may read it: the host's directories (the data dir, in
    /// the embedded store's messages) are no tenant's business, so its app's file
    /// is named `$DATA_DIR/kv/FILE`; the log keeps the whole path.
    fn for_guest(&self, why: &str) -> String {
        let dir = self.shared.as_ref().and_then(|s| s.path.parent());
        match dir.map(|d| d.display().to_string()) {
            Some(dir) if !dir.is_empty() => why.replace(&dir, "$DATA_DIR/kv"),
            _ => why.to_string(),
        }
    }
}

impl AppStore {
    /// A store that refuses every bucket: an app loaded without key-value settings.
    pub fn none() -> Arc<AppStore> {
        Arc::new(AppStore {
            app: "".into(),
            settings: KeyValue {
                backend: BackendChoice::None,
                ..KeyValue::default()
            },
            shared: None,
            in_flight: Semaphore::new(1),
            written: WriteBudget::new(1),
            metrics: AppMetrics::detached(),
        })
    }

    /// A store over `backend`, already open (tests).
    #[cfg(test)]
    fn over(backend: Arc<dyn Backend>, settings: KeyValue) -> AppStore {
        AppStore {
            app: "test".into(),
            in_flight: Semaphore::new(settings.max_in_flight as usize),
            written: WriteBudget::new(settings.max_write_rate),
            shared: Some(Arc::new(Shared {
                choice: settings.backend.clone(),
                path: PathBuf::new(),
                durability: settings.durability,
                sync_interval: settings.sync_interval,
                timeout: settings.timeout,
                ca: None,
                current: Mutex::new(Some(backend)),
                failed: Mutex::default(),
                opening: tokio::sync::Mutex::default(),
            })),
            settings,
            metrics: AppMetrics::detached(),
        }
    }

    /// Checks that the guest may open bucket `name`: one the app's `buckets` allow,
    /// and (under `*`) a name the config would take, since backends put it in
    /// their keys: a separator in it would make two buckets' keys one.
    fn open(&self, name: &str) -> Result<(), KvError> {
        if self.shared.is_none() {
            return Err(KvError::AccessDenied);
        }
        let named = name != "*" && wedge_config::keyvalue::bucket_name(name).is_ok();
        if !named || !self.settings.allows_bucket(name) {
            return Err(KvError::NoSuchStore);
        }
        Ok(())
    }

    fn quota(&self) -> Quota {
        Quota {
            max_keys: self.settings.max_keys,
            max_bytes: self.settings.max_bytes,
        }
    }

    fn check_key(&self, key: &str) -> Result<(), KvError> {
        let max = self.settings.max_key_size;
        if key.len() as u64 > max {
            return Err(KvError::Other(format!(
                "the key is {} bytes long: keys are at most {max} bytes (max_key_size)",
                key.len()
            )));
        }
        Ok(())
    }

    /// A batch of `n` keys, if it names at most `max_batch`.
    fn check_batch(&self, n: usize) -> Result<(), KvError> {
        let max = self.settings.max_batch;
        if n as u64 > u64::from(max) {
            return Err(KvError::Other(format!(
                "the batch names {n} keys: a batch names at most {max} (max_batch)"
            )));
        }
        Ok(())
    }

    fn check_value(&self, value: &[u8]) -> Result<(), KvError> {
        let max = self.settings.max_value_size;
        if value.len() as u64 > max {
            return Err(KvError::Other(format!(
                "the value is {} bytes: values are at most {max} bytes (max_value_size)",
                value.len()
            )));
        }
        Ok(())
    }

    /// Runs `operation` (`op`) once `check` passed, within the app's operations in
    /// flight and its time bound; counts it. A backend fault is logged (within the
    /// app's log budget).
    async fn run<T, F>(
        &self,
        log: &GuestOutput,
        operation: KvOperation,
        check: Result<(), KvError>,
        op: impl FnOnce(Arc<dyn Backend>) -> F,
    ) -> Result<T, KvError>
    where
        F: Future<Output = Result<T, Failure>>,
    {
        let started = Instant::now();
        let outcome = match check.and_then(|()| self.admit()) {
            Err(refused) => Err((KvOutcome::Refused, refused)),
            Ok((shared, _in_flight)) => {
                let done = self.attempt(shared, log, operation, op).await;
                done.map_err(|failure| match failure {
                    Failure::Quota(why) | Failure::Value(why) => {
                        (KvOutcome::Refused, KvError::Other(why))
                    }
                    Failure::Backend(why) => {
                        let backend = &self.settings.backend;
                        log.warn(format_args!("key-value store ({backend}): {why}"));
                        let why = format!("the key-value store failed: {}", self.for_guest(&why));
                        (KvOutcome::Failed, KvError::Other(why))
                    }
                    Failure::Failing(why) => {
                        let why = format!("the key-value store failed: {}", self.for_guest(&why));
                        (KvOutcome::Failed, KvError::Other(why))
                    }
                })
            }
        };
        let counted = outcome
            .as_ref()
            .map_or_else(|(counted, _)| *counted, |_| KvOutcome::Ok);
        self.metrics
            .kv_operation(operation, counted, started.elapsed());
        outcome.map_err(|(_, error)| error)
    }

    /// The backend and a place in flight, or why not.
    fn admit(&self) -> Result<(&Shared, SemaphorePermit<'_>), KvError> {
        let Some(shared) = &self.shared else {
            return Err(KvError::AccessDenied);
        };
        let Ok(permit) = self.in_flight.try_acquire() else {
            return Err(KvError::Other(format!(
                "{} key-value operations of this app are in flight already (max_in_flight)",
                self.settings.max_in_flight
            )));
        };
        Ok((shared.as_ref(), permit))
    }

    /// `op` on the backend (opened if need be) within the app's `timeout`; after a
    /// write, the app's totals as the backend counts them.
    async fn attempt<T, F>(
        &self,
        shared: &Shared,
        log: &GuestOutput,
        operation: KvOperation,
        op: impl FnOnce(Arc<dyn Backend>) -> F,
    ) -> Result<T, Failure>
    where
        F: Future<Output = Result<T, Failure>>,
    {
        let timeout = self.settings.timeout;
        let attempt = async {
            let backend = shared.backend(Some(log)).await?;
            let done = op(backend.clone()).await?;
            if is_write(operation)
                && let Some((keys, bytes)) = backend.totals(&self.app).await?
            {
                self.metrics.kv_totals(keys, bytes);
            }
            Ok(done)
        };
        tokio::time::timeout(timeout, attempt)
            .await
            .unwrap_or_else(|_| Err(timed_out(timeout)))
    }

    fn bucket<'a>(&'a self, name: &'a str) -> Bucket<'a> {
        Bucket {
            app: &self.app,
            name,
        }
    }

    pub(crate) async fn get(
        &self,
        log: &GuestOutput,
        bucket: &str,
        key: &str,
    ) -> Result<Option<Vec<u8>>, KvError> {
        let check = self.check_key(key);
        self.run(log, KvOperation::Get, check, |b| async move {
            b.get(self.bucket(bucket), key).await
        })
        .await
    }

    /// The values of `keys`, refused if they come to more than `room` bytes.
    pub(crate) async fn get_many(
        &self,
        log: &GuestOutput,
        bucket: &str,
        keys: &[String],
        room: u64,
    ) -> Result<Vec<Option<Vec<u8>>>, KvError> {
        let check = self
            .check_batch(keys.len())
            .and_then(|()| keys.iter().try_for_each(|key| self.check_key(key)));
        self.run(log, KvOperation::Get, check, |b| async move {
            b.get_many(self.bucket(bucket), keys, room).await
        })
        .await
    }

    pub(crate) async fn exists(
        &self,
        log: &GuestOutput,
        bucket: &str,
        key: &str,
    ) -> Result<bool, KvError> {
        let check = self.check_key(key);
        self.run(log, KvOperation::Exists, check, |b| async move {
            b.exists(self.bucket(bucket), key).await
        })
        .await
    }

    /// A page of keys from `from` on, and whether more may follow.
    pub(crate) async fn list_keys(
        &self,
        log: &GuestOutput,
        bucket: &str,
        from: ListFrom,
    ) -> Result<(Vec<String>, bool), KvError> {
        let keys = self
            .run(log, KvOperation::ListKeys, Ok(()), |b| async move {
                b.list_keys(self.bucket(bucket), from, LIST_PAGE).await
            })
            .await?;
        let more = keys.len() == LIST_PAGE;
        Ok((keys, more))
    }

    pub(crate) async fn set_many(
        &self,
        log: &GuestOutput,
        bucket: &str,
        pairs: Vec<(String, Vec<u8>)>,
    ) -> Result<(), KvError> {
        let check = self
            .check_batch(pairs.len())
            .and_then(|()| {
                pairs.iter().try_for_each(|(key, value)| {
                    self.check_key(key)?;
                    self.check_value(value)
                })
            })
            .and_then(|()| {
                let bytes = pairs.iter().map(|(k, v)| (k.len() + v.len()) as u64).sum();
                self.written.charge(bytes)
            });
        let quota = self.quota();
        self.run(log, KvOperation::Set, check, |b| async move {
            b.set_many(self.bucket(bucket), pairs, quota).await
        })
        .await
    }

    pub(crate) async fn delete_many(
        &self,
        log: &GuestOutput,
        bucket: &str,
        keys: Vec<String>,
    ) -> Result<(), KvError> {
        let check = self
            .check_batch(keys.len())
            .and_then(|()| keys.iter().try_for_each(|key| self.check_key(key)));
        self.run(log, KvOperation::Delete, check, |b| async move {
            b.delete_many(self.bucket(bucket), keys).await
        })
        .await
    }

    pub(crate) async fn increment(
        &self,
        log: &GuestOutput,
        bucket: &str,
        key: String,
        delta: i64,
    ) -> Result<i64, KvError> {
        // A sum is at most 20 digits.
        let check = self
            .check_key(&key)
            .and_then(|()| self.written.charge(key.len() as u64 + 20));
        let quota = self.quota();
        self.run(log, KvOperation::Increment, check, |b| async move {
            b.increment(self.bucket(bucket), key, delta, quota).await
        })
        .await
    }

    /// Sets `key` to `value` if it still holds `expected`; whether it did.
    pub(crate) async fn swap(
        &self,
        log: &GuestOutput,
        bucket: &str,
        key: String,
        expected: Option<Vec<u8>>,
        value: Vec<u8>,
    ) -> Result<bool, KvError> {
        let check = self
            .check_key(&key)
            .and_then(|()| self.check_value(&value))
            .and_then(|()| self.written.charge((key.len() + value.len()) as u64));
        let quota = self.quota();
        self.run(log, KvOperation::Swap, check, |b| async move {
            b.swap(self.bucket(bucket), key, expected, value, quota)
                .await
        })
        .await
    }
}
