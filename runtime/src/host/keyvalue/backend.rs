//! What a key-value backend does, whatever holds the data: the bindings of each
//! `wasi:keyvalue` version call this, never a backend directly.

use async_trait::async_trait;

/// Where an operation's keys live: an app's bucket. A backend keeps every app's keys
/// apart (a file per app, or a prefix per app on a shared server).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Bucket<'a> {
    pub app: &'a str,
    pub name: &'a str,
}

/// The app's quotas a write must stay within, all its buckets together. A backend
/// checks them in the same transaction as the write, so concurrent writers (other
/// instances, other wedge processes on one Redis) cannot overshoot them together.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Quota {
    pub max_keys: u64,
    /// Keys' and values' bytes.
    pub max_bytes: u64,
}

/// Where a page of `list-keys` starts: after a key (the newer draft's string cursor)
/// or after a number of keys (the older draft's integer cursor).
#[derive(Debug, Clone)]
pub(crate) enum ListFrom {
    Start,
    After(String),
    Offset(u64),
}

/// Why an operation failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Failure {
    /// A write would take the app past a quota: the message names it.
    Quota(String),
    /// A stored value is not what the operation needs (`increment` on text that is
    /// not a number, a sum that overflows).
    Value(String),
    /// The backend itself failed (a disk error, Redis unreachable): logged.
    Backend(String),
    /// The backend failed to open and is not tried again yet: logged once, when
    /// it first failed, as a `Backend` failure.
    Failing(String),
}

impl Failure {
    /// What failed, in words.
    pub(crate) fn why(&self) -> &str {
        match self {
            Failure::Quota(why) | Failure::Value(why) | Failure::Backend(why) => why,
            Failure::Failing(why) => why,
        }
    }
}

pub(crate) type Outcome<T> = Result<T, Failure>;

/// A store of keys by app and bucket. Values are bytes; `increment` keeps a
/// decimal number as text (as Redis' INCRBY does), so either backend reads the
/// other's counters the same way.
#[async_trait]
pub(crate) trait Backend: Send + Sync {
    async fn get(&self, bucket: Bucket<'_>, key: &str) -> Outcome<Option<Vec<u8>>>;

    /// The values of `keys`, or a [`Failure::Quota`] without reading them when
    /// together they are more than `max_bytes`: a guest asking for one large
    /// value many times over must not make the host hold them all.
    async fn get_many(
        &self,
        bucket: Bucket<'_>,
        keys: &[String],
        max_bytes: u64,
    ) -> Outcome<Vec<Option<Vec<u8>>>>;

    async fn exists(&self, bucket: Bucket<'_>, key: &str) -> Outcome<bool>;

    /// Up to `limit` keys in key order, from `from` on.
    async fn list_keys(
        &self,
        bucket: Bucket<'_>,
        from: ListFrom,
        limit: usize,
    ) -> Outcome<Vec<String>>;

    /// Sets every pair, or none of them if that would pass `quota`.
    async fn set_many(
        &self,
        bucket: Bucket<'_>,
        pairs: Vec<(String, Vec<u8>)>,
        quota: Quota,
    ) -> Outcome<()>;

    async fn delete_many(&self, bucket: Bucket<'_>, keys: Vec<String>) -> Outcome<()>;

    /// Adds `delta` to the number stored at `key` (none: 0) and returns the sum.
    async fn increment(
        &self,
        bucket: Bucket<'_>,
        key: String,
        delta: i64,
        quota: Quota,
    ) -> Outcome<i64>;

    /// Sets `key` to `value` if it still holds `expected` (`None`: absent); whether it did.
    async fn swap(
        &self,
        bucket: Bucket<'_>,
        key: String,
        expected: Option<Vec<u8>>,
        value: Vec<u8>,
        quota: Quota,
    ) -> Outcome<bool>;

    /// Removes every key of app `app`, in every bucket.
    async fn purge(&self, app: &str) -> Outcome<()>;

    /// The app's keys and bytes now, where the backend keeps them apart from other
    /// apps' cheaply (the embedded file); `None` elsewhere.
    async fn totals(&self, _app: &str) -> Outcome<Option<(u64, u64)>> {
        Ok(None)
    }
}

/// A batch's values came to more than `max_bytes`.
pub(crate) fn batch_too_big(max_bytes: u64) -> Failure {
    Failure::Quota(format!(
        "the values asked for come to more than the {max_bytes} bytes of host memory \
         the instance has left (host_memory)"
    ))
}

/// The number `increment` finds stored at a key.
pub(crate) fn stored_number(value: Option<&[u8]>) -> Outcome<i64> {
    let Some(value) = value else { return Ok(0) };
    std::str::from_utf8(value)
        .ok()
        .and_then(|text| text.parse::<i64>().ok())
        .ok_or_else(|| {
            Failure::Value("the value is not a decimal number: cannot increment it".into())
        })
}

/// `number + delta`, or why not.
pub(crate) fn add(number: i64, delta: i64) -> Outcome<i64> {
    number
        .checked_add(delta)
        .ok_or_else(|| Failure::Value("the sum overflows a 64-bit integer".into()))
}
