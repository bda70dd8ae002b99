//! `wasi:keyvalue@0.2.0-draft2`, the version Spin's Rust SDK (7.x, its
//! `wasi:keyvalue/imports` world), wasmCloud and `wedge_sdk::kv` import: store,
//! atomics (`increment` by an s64, compare-and-swap through a `cas` handle) and
//! batch, with the last key of a page as the `list-keys` cursor. The WIT is the
//! Spin SDK's copy, in `wit/deps/keyvalue-draft2`.

use wasmtime::component::{Linker, Resource};

use super::backend::ListFrom;
use super::{HasKv, KvError, KvView, OpenBucket};

mod generated {
    wasmtime::component::bindgen!({
        path: "../wit/deps/keyvalue-draft2",
        world: "wasi:keyvalue/imports",
        imports: { default: async | trappable },
        with: {
            "wasi:keyvalue/store.bucket": crate::host::keyvalue::OpenBucket,
            "wasi:keyvalue/atomics.cas": super::Cas,
        },
    });
}

use generated::wasi::keyvalue::{atomics, batch, store};

/// A compare-and-swap under way: the key and the value it held when the handle was
/// made, which a `swap` must still find there.
pub struct Cas {
    bucket: String,
    key: String,
    current: Option<Vec<u8>>,
}

pub(super) fn add_to_linker<T: Send + 'static>(
    linker: &mut Linker<T>,
    view: fn(&mut T) -> KvView<'_>,
) -> wasmtime::Result<()> {
    store::add_to_linker::<T, HasKv>(linker, view)?;
    atomics::add_to_linker::<T, HasKv>(linker, view)?;
    batch::add_to_linker::<T, HasKv>(linker, view)
}

fn wit(error: KvError) -> store::Error {
    match error {
        KvError::NoSuchStore => store::Error::NoSuchStore,
        KvError::AccessDenied => store::Error::AccessDenied,
        KvError::Other(why) => store::Error::Other(why),
    }
}

type Answer<T> = wasmtime::Result<Result<T, store::Error>>;

impl KvView<'_> {
    /// A new `cas` handle on `key` holding its value now.
    async fn cas(&mut self, bucket: String, key: String) -> Answer<Resource<Cas>> {
        let current = match self.store.get(self.log, &bucket, &key).await {
            Ok(current) => current,
            Err(error) => return Ok(Err(wit(error))),
        };
        // The handle keeps the value: copied where the instance's host memory counts
        // it (Redis' answer was allocated by the connection's task, uncounted), so
        // that thousands of handles on a large value pass its budget, not the host's;
        // refused before it would pass it (an error, where the copy trapped).
        let room = self.host_memory.room();
        if let Some(value) = current.as_deref().filter(|v| v.len() as u64 > room) {
            return Ok(Err(wit(KvError::Other(format!(
                "the value is {} bytes: more than the {room} bytes of host memory the \
                 instance has left for a compare-and-swap handle (host_memory)",
                value.len()
            )))));
        }
        let current = self
            .host_memory
            .charged(|| current.as_deref().map(<[u8]>::to_vec));
        let cas = Cas {
            bucket,
            key,
            current,
        };
        Ok(self.push_handle(cas)?.map_err(wit))
    }
}

impl store::Host for KvView<'_> {
    async fn open(&mut self, identifier: String) -> Answer<Resource<OpenBucket>> {
        Ok(self.open_bucket(identifier)?.map_err(wit))
    }
}

impl store::HostBucket for KvView<'_> {
    async fn get(&mut self, bucket: Resource<OpenBucket>, key: String) -> Answer<Option<Vec<u8>>> {
        let name = self.bucket_name(&bucket)?;
        Ok(self.store.get(self.log, &name, &key).await.map_err(wit))
    }

    async fn set(
        &mut self,
        bucket: Resource<OpenBucket>,
        key: String,
        value: Vec<u8>,
    ) -> Answer<()> {
        let name = self.bucket_name(&bucket)?;
        let pairs = vec![(key, value)];
        Ok(self
            .store
            .set_many(self.log, &name, pairs)
            .await
            .map_err(wit))
    }

    async fn delete(&mut self, bucket: Resource<OpenBucket>, key: String) -> Answer<()> {
        let name = self.bucket_name(&bucket)?;
        let keys = vec![key];
        Ok(self
            .store
            .delete_many(self.log, &name, keys)
            .await
            .map_err(wit))
    }

    async fn exists(&mut self, bucket: Resource<OpenBucket>, key: String) -> Answer<bool> {
        let name = self.bucket_name(&bucket)?;
        Ok(self.store.exists(self.log, &name, &key).await.map_err(wit))
    }

    async fn list_keys(
        &mut self,
        bucket: Resource<OpenBucket>,
        cursor: Option<String>,
    ) -> Answer<store::KeyResponse> {
        let name = self.bucket_name(&bucket)?;
        let from = cursor.map_or(ListFrom::Start, ListFrom::After);
        let listed = self.store.list_keys(self.log, &name, from).await;
        Ok(listed.map_err(wit).map(|(keys, more)| {
            let cursor = more.then(|| keys.last().cloned()).flatten();
            store::KeyResponse { keys, cursor }
        }))
    }

    async fn drop(&mut self, bucket: Resource<OpenBucket>) -> wasmtime::Result<()> {
        self.drop_handle(bucket)?;
        Ok(())
    }
}

impl atomics::Host for KvView<'_> {
    async fn increment(
        &mut self,
        bucket: Resource<OpenBucket>,
        key: String,
        delta: i64,
    ) -> Answer<i64> {
        let name = self.bucket_name(&bucket)?;
        Ok(self
            .store
            .increment(self.log, &name, key, delta)
            .await
            .map_err(wit))
    }

    async fn swap(
        &mut self,
        cas: Resource<Cas>,
        value: Vec<u8>,
    ) -> wasmtime::Result<Result<(), atomics::CasError>> {
        let Cas {
            bucket,
            key,
            current,
        } = self.drop_handle(cas)?;
        let swapped = self
            .store
            .swap(self.log, &bucket, key.clone(), current, value)
            .await;
        match swapped {
            Ok(true) => Ok(Ok(())),
            Ok(false) => Ok(Err(match self.cas(bucket, key).await? {
                Ok(retry) => atomics::CasError::CasFailed(retry),
                Err(error) => atomics::CasError::StoreError(error),
            })),
            Err(error) => Ok(Err(atomics::CasError::StoreError(wit(error)))),
        }
    }
}

impl atomics::HostCas for KvView<'_> {
    async fn new(&mut self, bucket: Resource<OpenBucket>, key: String) -> Answer<Resource<Cas>> {
        let name = self.bucket_name(&bucket)?;
        self.cas(name, key).await
    }

    async fn current(&mut self, cas: Resource<Cas>) -> Answer<Option<Vec<u8>>> {
        Ok(Ok(self.table.get(&cas)?.current.clone()))
    }

    async fn drop(&mut self, cas: Resource<Cas>) -> wasmtime::Result<()> {
        self.drop_handle(cas)?;
        Ok(())
    }
}

impl batch::Host for KvView<'_> {
    async fn get_many(
        &mut self,
        bucket: Resource<OpenBucket>,
        keys: Vec<String>,
    ) -> Answer<Vec<(String, Option<Vec<u8>>)>> {
        let name = self.bucket_name(&bucket)?;
        let room = self.host_memory.room();
        let values = self.store.get_many(self.log, &name, &keys, room).await;
        Ok(values
            .map_err(wit)
            .map(|values| keys.into_iter().zip(values).collect()))
    }

    async fn set_many(
        &mut self,
        bucket: Resource<OpenBucket>,
        key_values: Vec<(String, Vec<u8>)>,
    ) -> Answer<()> {
        let name = self.bucket_name(&bucket)?;
        Ok(self
            .store
            .set_many(self.log, &name, key_values)
            .await
            .map_err(wit))
    }

    async fn delete_many(&mut self, bucket: Resource<OpenBucket>, keys: Vec<String>) -> Answer<()> {
        let name = self.bucket_name(&bucket)?;
        Ok(self
            .store
            .delete_many(self.log, &name, keys)
            .await
            .map_err(wit))
    }
}
