//! `wasi:keyvalue@0.2.0-draft`, the version wasmtime's own host
//! (`wasmtime-wasi-keyvalue` 48, `wasmtime serve -S keyvalue`) implements: store,
//! atomics (`increment` by a u64) and batch, with an integer `list-keys` cursor
//! (how many keys to skip). The WIT is that crate's, in `wit/deps/keyvalue-draft`.

use wasmtime::component::{Linker, Resource};

use super::backend::ListFrom;
use super::{HasKv, KvError, KvView, OpenBucket};

mod generated {
    wasmtime::component::bindgen!({
        path: "../wit/deps/keyvalue-draft",
        world: "wasi:keyvalue/imports",
        imports: { default: async | trappable },
        with: {
            "wasi:keyvalue/store.bucket": crate::host::keyvalue::OpenBucket,
        },
    });
}

use generated::wasi::keyvalue::{atomics, batch, store};

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
        cursor: Option<u64>,
    ) -> Answer<store::KeyResponse> {
        let name = self.bucket_name(&bucket)?;
        let skip = cursor.unwrap_or(0);
        let listed = self
            .store
            .list_keys(self.log, &name, ListFrom::Offset(skip))
            .await;
        Ok(listed.map_err(wit).map(|(keys, more)| {
            let cursor = more.then(|| skip + keys.len() as u64);
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
        delta: u64,
    ) -> Answer<u64> {
        let name = self.bucket_name(&bucket)?;
        let Ok(delta) = i64::try_from(delta) else {
            return Ok(Err(store::Error::Other(
                "the delta is past 2^63 - 1".into(),
            )));
        };
        let sum = self.store.increment(self.log, &name, key, delta).await;
        Ok(sum.map_err(wit).and_then(|sum| {
            u64::try_from(sum)
                .map_err(|_| store::Error::Other(format!("the value is negative ({sum})")))
        }))
    }
}

impl batch::Host for KvView<'_> {
    async fn get_many(
        &mut self,
        bucket: Resource<OpenBucket>,
        keys: Vec<String>,
    ) -> Answer<Vec<Option<(String, Vec<u8>)>>> {
        let name = self.bucket_name(&bucket)?;
        let room = self.host_memory.room();
        let values = self.store.get_many(self.log, &name, &keys, room).await;
        Ok(values.map_err(wit).map(|values| {
            let found = keys.into_iter().zip(values);
            found.map(|(key, value)| value.map(|v| (key, v))).collect()
        }))
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
