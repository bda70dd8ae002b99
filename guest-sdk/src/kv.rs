//! The app's key-value store, through the standard `wasi:keyvalue` interface
//! (`wasi:keyvalue@0.2.0-draft2`, the version Spin's SDK and wasmCloud import too).
//!
//! On wedge each app has its own store: a crash-safe file by default, or Redis /
//! Valkey when replicas share state (`[app.keyvalue]` in `wedge.toml`, `--kv` on
//! the command line). Apps never see each other's keys. A store has buckets; an
//! app may open those its settings name (`default` unless they say otherwise).
//!
//! ```no_run
//! use wedge_sdk::{Error, Request, Response, kv};
//!
//! async fn handle(_req: Request) -> Result<Response, Error> {
//!     let store = kv::Store::open_default()?;
//!     let hits = store.increment("hits", 1)?;
//!     Ok(Response::text(format!("{hits} hits\n")))
//! }
//!
//! wedge_sdk::export_handler!(handle);
//! ```
//!
//! Every operation returns an [`Error`] of kind [`ErrorKind::KeyValue`] when the
//! store refuses it (a bucket the app may not open, a value past the app's
//! `max_value_size`, its `max_keys` or `max_bytes` reached, too many operations in
//! flight) or fails (the backend did not answer within the app's `timeout`); the
//! message says which. Values are bytes; [`Store::increment`] keeps a decimal number
//! as text, and with the `json` feature [`Store::get_json`] and [`Store::set_json`]
//! keep serde values as JSON.

use std::cell::RefCell;
use std::rc::Rc;

use crate::{Error, ErrorKind};

// Only these interfaces: wasi:http and the rest come from wstd's bindings.
#[path = "kv_bindings.rs"]
#[rustfmt::skip]
mod bindings;

use bindings::wasi::keyvalue::{atomics, batch, store};

/// The bucket [`Store::open_default`] opens, and the one an app may open when its
/// settings name none.
pub const DEFAULT_BUCKET: &str = "default";

/// How many times [`Store::update`] tries when other writers keep changing the key.
const UPDATE_TRIES: usize = 16;

thread_local! {
    /// The bucket this instance opened last, kept open for its later requests:
    /// opening and dropping a bucket are host calls, two of the three an operation
    /// would otherwise cost, and a reused instance would make them on every request.
    /// One only: kept buckets are key-value handles the instance holds
    /// (`max_handles`), so an app that opens many (a client choosing the name)
    /// must not pile them up; opening another one lets the kept one go.
    static KEPT: RefCell<Option<(String, Rc<store::Bucket>)>> = const { RefCell::new(None) };
}

/// An open bucket of the app's store.
pub struct Store {
    bucket: Rc<store::Bucket>,
}

impl Store {
    /// Opens the bucket `name`; an error if the app may not open it. The instance
    /// keeps the bucket it opened last: opening it again, on this request or a later
    /// one the instance serves, costs no call to the host.
    pub fn open(name: &str) -> Result<Store, Error> {
        KEPT.with_borrow_mut(|kept| {
            if let Some((kept_name, bucket)) = kept.as_ref()
                && kept_name == name
            {
                return Ok(Store {
                    bucket: bucket.clone(),
                });
            }
            // The kept bucket goes first (unless a `Store` still holds it), so the
            // new one never needs a handle more than before.
            *kept = None;
            let bucket = Rc::new(store::open(name).map_err(kv_error)?);
            *kept = Some((name.to_string(), bucket.clone()));
            Ok(Store { bucket })
        })
    }

    /// Opens the `default` bucket.
    pub fn open_default() -> Result<Store, Error> {
        Self::open(DEFAULT_BUCKET)
    }

    /// The value at `key`, or `None`.
    pub fn get(&self, key: &str) -> Result<Option<Vec<u8>>, Error> {
        self.bucket.get(key).map_err(kv_error)
    }

    /// The value at `key` as UTF-8 text, or `None`; an error if it is not text.
    pub fn get_text(&self, key: &str) -> Result<Option<String>, Error> {
        self.get(key)?.map(text).transpose()
    }

    /// Sets `key` to `value`, replacing what it held.
    pub fn set(&self, key: &str, value: impl AsRef<[u8]>) -> Result<(), Error> {
        self.bucket.set(key, value.as_ref()).map_err(kv_error)
    }

    /// Removes `key`; nothing happens if it is absent.
    pub fn delete(&self, key: &str) -> Result<(), Error> {
        self.bucket.delete(key).map_err(kv_error)
    }

    /// Whether `key` holds a value.
    pub fn exists(&self, key: &str) -> Result<bool, Error> {
        self.bucket.exists(key).map_err(kv_error)
    }

    /// One page of keys, in key order, from after `cursor` (`None`: the first page),
    /// and the cursor of the next page (`None`: that was the last).
    pub fn keys_page(&self, cursor: Option<&str>) -> Result<(Vec<String>, Option<String>), Error> {
        let page = self.bucket.list_keys(cursor).map_err(kv_error)?;
        Ok((page.keys, page.cursor))
    }

    /// Every key of the bucket, page after page.
    pub fn keys(&self) -> Result<Vec<String>, Error> {
        all_pages(|cursor| self.keys_page(cursor))
    }

    /// Adds `delta` to the number at `key` (absent counts as 0) and returns the
    /// sum, atomically: concurrent increments, from any instance or (with Redis)
    /// any wedge, are never lost.
    pub fn increment(&self, key: &str, delta: i64) -> Result<i64, Error> {
        atomics::increment(&self.bucket, key, delta).map_err(kv_error)
    }

    /// Sets `key` to `new` if it holds `expected` now (`None`: if it is absent);
    /// whether it did.
    pub fn compare_and_swap(
        &self,
        key: &str,
        expected: Option<&[u8]>,
        new: impl AsRef<[u8]>,
    ) -> Result<bool, Error> {
        let cas = atomics::Cas::new(&self.bucket, key).map_err(kv_error)?;
        if cas.current().map_err(kv_error)?.as_deref() != expected {
            return Ok(false);
        }
        swapped(atomics::swap(cas, new.as_ref()))
    }

    /// Replaces the value at `key` with `change(current)` atomically: if another
    /// writer changed the key in between, `change` runs again on its value (up to 16
    /// times, then an error). Returns the value written.
    pub fn update(
        &self,
        key: &str,
        mut change: impl FnMut(Option<&[u8]>) -> Vec<u8>,
    ) -> Result<Vec<u8>, Error> {
        let mut cas = atomics::Cas::new(&self.bucket, key).map_err(kv_error)?;
        for _ in 0..UPDATE_TRIES {
            let new = change(cas.current().map_err(kv_error)?.as_deref());
            match atomics::swap(cas, &new) {
                Ok(()) => return Ok(new),
                Err(atomics::CasError::CasFailed(retry)) => cas = retry,
                Err(atomics::CasError::StoreError(error)) => return Err(kv_error(error)),
            }
        }
        Err(Error::new(
            ErrorKind::KeyValue,
            format!("`{key}` kept changing: gave up after {UPDATE_TRIES} tries"),
        ))
    }

    /// The values of `keys`, in their order (`None` for an absent key).
    pub fn get_many(&self, keys: &[&str]) -> Result<Vec<Option<Vec<u8>>>, Error> {
        let keys: Vec<String> = keys.iter().map(|k| k.to_string()).collect();
        let found = batch::get_many(&self.bucket, &keys).map_err(kv_error)?;
        Ok(found.into_iter().map(|(_, value)| value).collect())
    }

    /// Sets every pair, or (past a quota) none of them.
    pub fn set_many(&self, pairs: &[(&str, &[u8])]) -> Result<(), Error> {
        let pairs: Vec<(String, Vec<u8>)> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_vec()))
            .collect();
        batch::set_many(&self.bucket, &pairs).map_err(kv_error)
    }

    /// Removes every key of `keys` present.
    pub fn delete_many(&self, keys: &[&str]) -> Result<(), Error> {
        let keys: Vec<String> = keys.iter().map(|k| k.to_string()).collect();
        batch::delete_many(&self.bucket, &keys).map_err(kv_error)
    }

    /// The value at `key` read as JSON into a `T`, or `None`; a `500` if it is not
    /// such JSON.
    #[cfg(feature = "json")]
    pub fn get_json<T: serde::de::DeserializeOwned>(&self, key: &str) -> Result<Option<T>, Error> {
        self.get(key)?
            .map(|bytes| from_json(key, &bytes))
            .transpose()
    }

    /// Sets `key` to `value` written as JSON.
    #[cfg(feature = "json")]
    pub fn set_json<T: serde::Serialize>(&self, key: &str, value: &T) -> Result<(), Error> {
        let bytes = serde_json::to_vec(value)
            .map_err(|e| Error::new(ErrorKind::KeyValue, format!("`{key}`: {e}")))?;
        self.set(key, bytes)
    }
}

/// Whether a swap took place: a CAS that failed is `false`, a store error an `Err`.
fn swapped(result: Result<(), atomics::CasError>) -> Result<bool, Error> {
    match result {
        Ok(()) => Ok(true),
        Err(atomics::CasError::CasFailed(_)) => Ok(false),
        Err(atomics::CasError::StoreError(error)) => Err(kv_error(error)),
    }
}

/// Every key `page` gives, following its cursors to the last page.
fn all_pages(
    mut page: impl FnMut(Option<&str>) -> Result<(Vec<String>, Option<String>), Error>,
) -> Result<Vec<String>, Error> {
    let mut keys = Vec::new();
    let mut cursor = None;
    loop {
        let (mut more, next) = page(cursor.as_deref())?;
        keys.append(&mut more);
        match next {
            Some(next) if Some(&next) != cursor.as_ref() => cursor = Some(next),
            _ => return Ok(keys),
        }
    }
}

fn text(bytes: Vec<u8>) -> Result<String, Error> {
    String::from_utf8(bytes)
        .map_err(|_| Error::new(ErrorKind::KeyValue, "the value is not UTF-8 text"))
}

#[cfg(feature = "json")]
fn from_json<T: serde::de::DeserializeOwned>(key: &str, bytes: &[u8]) -> Result<T, Error> {
    serde_json::from_slice(bytes).map_err(|e| {
        Error::new(
            ErrorKind::KeyValue,
            format!("`{key}` holds no such JSON: {e}"),
        )
    })
}

fn kv_error(error: store::Error) -> Error {
    let message = match error {
        store::Error::NoSuchStore => "no such bucket: the app may not open it".to_string(),
        store::Error::AccessDenied => "the app has no key-value store".to_string(),
        store::Error::Other(message) => message,
    };
    Error::new(ErrorKind::KeyValue, message)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pages_are_followed_to_the_last_one() {
        let pages = [
            (vec!["a", "b"], Some("b")),
            (vec!["c"], Some("c")),
            (vec![], None),
        ];
        let mut asked = Vec::new();
        let keys = all_pages(|cursor| {
            asked.push(cursor.map(str::to_string));
            let (keys, next) = &pages[asked.len() - 1];
            let keys = keys.iter().map(|k| k.to_string()).collect();
            Ok((keys, next.map(str::to_string)))
        })
        .unwrap();
        assert_eq!(keys, ["a", "b", "c"]);
        assert_eq!(asked, [None, Some("b".into()), Some("c".into())]);
    }

    #[test]
    fn a_cursor_that_does_not_move_ends_the_listing() {
        let mut calls = 0;
        let keys = all_pages(|_| {
            calls += 1;
            Ok((vec!["x".to_string()], Some("x".to_string())))
        })
        .unwrap();
        assert_eq!((keys.len(), calls), (2, 2));
    }

    #[test]
    fn a_page_error_is_returned() {
        let error = all_pages(|_| Err(Error::new(ErrorKind::KeyValue, "down"))).unwrap_err();
        assert_eq!(
            (error.kind(), error.to_string().as_str()),
            (ErrorKind::KeyValue, "down")
        );
    }

    #[test]
    fn store_errors_name_what_was_refused() {
        let refused = kv_error(store::Error::NoSuchStore);
        assert_eq!(refused.kind(), ErrorKind::KeyValue);
        assert_eq!(refused.status(), 500);
        assert!(refused.to_string().contains("no such bucket"));
        let quota = kv_error(store::Error::Other(
            "the app keeps at most 2 keys (max_keys)".into(),
        ));
        assert_eq!(quota.to_string(), "the app keeps at most 2 keys (max_keys)");
        assert!(text(vec![0xff]).is_err());
        assert_eq!(text(b"ok".to_vec()).unwrap(), "ok");
    }

    #[cfg(feature = "json")]
    #[test]
    fn json_values_read_back_or_say_why_not() {
        let value: Vec<u32> = from_json("k", b"[1,2]").unwrap();
        assert_eq!(value, [1, 2]);
        let error = from_json::<Vec<u32>>("k", b"{").unwrap_err();
        assert!(
            error.to_string().starts_with("`k` holds no such JSON"),
            "{error}"
        );
    }
}
