//! `spin:key-value/key-value@3.0.0`, what Spin's Rust SDK 7 `spin_sdk::key_value`
//! imports: a WASI 0.3 interface (async functions; `get-keys` answers a stream of
//! keys and a future of the outcome). Spin's "stores" are the app's buckets: a
//! label opens the bucket of that name, under the same settings, quotas, errors and
//! metrics as `wasi:keyvalue`. The WIT is the Spin SDK's copy, in
//! `wit/deps/spin-key-value`.
//!
//! The functions are async on the guest's side: each borrows the store's state only
//! to read what it needs (the app's store, its log, the bucket's name), then awaits
//! the backend with the instance free to run its other tasks.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use tokio::sync::oneshot;
use wasmtime::StoreContextMut;
use wasmtime::component::{
    Accessor, Destination, FutureReader, Linker, Resource, StreamProducer, StreamReader,
    StreamResult, VecBuffer,
};

use super::backend::ListFrom;
use super::{AppStore, HasKv, KvError, KvView, OpenBucket};
use crate::host::guest_log::GuestOutput;

mod generated {
    wasmtime::component::bindgen!({
        inline: "
            package wedge:spin-key-value;
            world imports { import spin:key-value/key-value@3.0.0; }
        ",
        path: "../wit/deps/spin-key-value",
        imports: { default: trappable },
        with: {
            "spin:key-value/key-value.store": crate::host::keyvalue::OpenBucket,
        },
    });
}

use generated::spin::key_value::key_value;

pub(super) fn add_to_linker<T: Send + 'static>(
    linker: &mut Linker<T>,
    view: fn(&mut T) -> KvView<'_>,
) -> wasmtime::Result<()> {
    key_value::add_to_linker::<T, HasKv>(linker, view)
}

fn wit(error: KvError) -> key_value::Error {
    match error {
        KvError::NoSuchStore => key_value::Error::NoSuchStore,
        KvError::AccessDenied => key_value::Error::AccessDenied,
        KvError::Other(why) => key_value::Error::Other(why),
    }
}

type Answer<T> = wasmtime::Result<Result<T, key_value::Error>>;

/// What an operation needs once it no longer borrows the instance's state: the
/// app's store, its log and the bucket's name.
struct Opened {
    store: Arc<AppStore>,
    log: Arc<GuestOutput>,
    bucket: String,
}

fn opened<T>(
    accessor: &Accessor<T, HasKv>,
    bucket: &Resource<OpenBucket>,
) -> wasmtime::Result<Opened> {
    accessor.with(|mut access| {
        let view = access.get();
        Ok(Opened {
            bucket: view.bucket_name(bucket)?,
            store: view.store.clone(),
            log: view.log.clone(),
        })
    })
}

impl key_value::Host for KvView<'_> {}

impl key_value::HostStore for KvView<'_> {
    fn drop(&mut self, bucket: Resource<OpenBucket>) -> wasmtime::Result<()> {
        self.drop_handle(bucket)?;
        Ok(())
    }
}

impl<T> key_value::HostStoreWithStore<T> for HasKv {
    async fn open(accessor: &Accessor<T, Self>, label: String) -> Answer<Resource<OpenBucket>> {
        accessor.with(|mut access| Ok(access.get().open_bucket(label)?.map_err(wit)))
    }

    async fn get(
        accessor: &Accessor<T, Self>,
        bucket: Resource<OpenBucket>,
        key: String,
    ) -> Answer<Option<Vec<u8>>> {
        let Opened { store, log, bucket } = opened(accessor, &bucket)?;
        Ok(store.get(&log, &bucket, &key).await.map_err(wit))
    }

    async fn set(
        accessor: &Accessor<T, Self>,
        bucket: Resource<OpenBucket>,
        key: String,
        value: Vec<u8>,
    ) -> Answer<()> {
        let Opened { store, log, bucket } = opened(accessor, &bucket)?;
        let pairs = vec![(key, value)];
        Ok(store.set_many(&log, &bucket, pairs).await.map_err(wit))
    }

    async fn delete(
        accessor: &Accessor<T, Self>,
        bucket: Resource<OpenBucket>,
        key: String,
    ) -> Answer<()> {
        let Opened { store, log, bucket } = opened(accessor, &bucket)?;
        let keys = vec![key];
        Ok(store.delete_many(&log, &bucket, keys).await.map_err(wit))
    }

    async fn exists(
        accessor: &Accessor<T, Self>,
        bucket: Resource<OpenBucket>,
        key: String,
    ) -> Answer<bool> {
        let Opened { store, log, bucket } = opened(accessor, &bucket)?;
        Ok(store.exists(&log, &bucket, &key).await.map_err(wit))
    }

    async fn get_keys(
        accessor: &Accessor<T, Self>,
        bucket: Resource<OpenBucket>,
    ) -> wasmtime::Result<(
        StreamReader<String>,
        FutureReader<Result<(), key_value::Error>>,
    )> {
        let opened = opened(accessor, &bucket)?;
        let (outcome_tx, outcome_rx) = oneshot::channel();
        let pages = KeyPages {
            opened: Arc::new(opened),
            from: Some(ListFrom::Start),
            page: None,
            outcome: Some(outcome_tx),
        };
        // The guest may drop the stream before its end: the outcome is then Ok.
        let outcome = async move { Ok::<_, wasmtime::Error>(outcome_rx.await.unwrap_or(Ok(()))) };
        accessor.with(|mut access| {
            let keys = StreamReader::new(&mut access, pages)?;
            let outcome = FutureReader::new(&mut access, outcome)?;
            Ok((keys, outcome))
        })
    }
}

type Page = Pin<Box<dyn Future<Output = Result<(Vec<String>, bool), KvError>> + Send>>;

/// `get-keys`' stream: the bucket's keys a page (`list_keys`) at a time, each page
/// read when the guest reads on, so a bucket of many keys is never held whole.
/// Each page is one operation (counted, bounded in time); an error ends the stream
/// and is the outcome the future gives.
struct KeyPages {
    opened: Arc<Opened>,
    /// Where the next page starts; `None` once the last one was given.
    from: Option<ListFrom>,
    /// The page being read.
    page: Option<Page>,
    outcome: Option<oneshot::Sender<Result<(), key_value::Error>>>,
}

impl KeyPages {
    fn finish(&mut self, outcome: Result<(), key_value::Error>) -> StreamResult {
        if let Some(tx) = self.outcome.take() {
            let _ = tx.send(outcome);
        }
        StreamResult::Dropped
    }
}

impl<D> StreamProducer<D> for KeyPages {
    type Item = String;
    type Buffer = VecBuffer<String>;

    fn poll_produce<'a>(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        _store: StoreContextMut<'a, D>,
        mut destination: Destination<'a, String, VecBuffer<String>>,
        finish: bool,
    ) -> Poll<wasmtime::Result<StreamResult>> {
        let this = &mut *self;
        if this.page.is_none() {
            let Some(from) = this.from.clone() else {
                return Poll::Ready(Ok(this.finish(Ok(()))));
            };
            let opened = this.opened.clone();
            this.page = Some(Box::pin(async move {
                let Opened { store, log, bucket } = &*opened;
                store.list_keys(log, bucket, from).await
            }));
        }
        let page = this.page.as_mut().expect("a page is being read");
        match page.as_mut().poll(cx) {
            Poll::Pending if finish => {
                // Cancelled: the same page is read again on the next read (reading
                // has no effect to undo).
                this.page = None;
                Poll::Ready(Ok(StreamResult::Cancelled))
            }
            Poll::Pending => Poll::Pending,
            Poll::Ready(Err(error)) => {
                this.page = None;
                Poll::Ready(Ok(this.finish(Err(wit(error)))))
            }
            Poll::Ready(Ok((keys, more))) => {
                this.page = None;
                this.from = more
                    .then(|| keys.last().cloned().map(ListFrom::After))
                    .flatten();
                let last = this.from.is_none();
                destination.set_buffer(keys.into());
                if last {
                    return Poll::Ready(Ok(this.finish(Ok(()))));
                }
                Poll::Ready(Ok(StreamResult::Completed))
            }
        }
    }
}
