//! What the bindings of every `wasi:keyvalue` version see: the instance's handles
//! (open buckets, compare-and-swap handles), counted against `max_handles`, and
//! its app's store.

use std::sync::Arc;

use wasmtime::component::{HasData, Linker, Resource, ResourceTable};

use super::{AppStore, KvError, draft, draft2, spin};
use crate::host::guest_log::GuestOutput;
use crate::host::limits::host_memory::HostMemoryBudget;

/// A bucket the guest opened (through any version: they are the same thing).
pub struct OpenBucket {
    name: String,
}

impl OpenBucket {
    fn new(name: String) -> OpenBucket {
        OpenBucket { name }
    }
}

impl KvView<'_> {
    pub(super) fn bucket_name(&self, bucket: &Resource<OpenBucket>) -> wasmtime::Result<String> {
        Ok(self.table.get(bucket)?.name.clone())
    }

    /// A handle on bucket `name`, if the app may open it and the instance may hold
    /// one more handle.
    pub(super) fn open_bucket(
        &mut self,
        name: String,
    ) -> wasmtime::Result<Result<Resource<OpenBucket>, KvError>> {
        if let Err(error) = self.store.open(&name) {
            return Ok(Err(error));
        }
        self.push_handle(OpenBucket::new(name))
    }

    /// `handle` in the instance's table, or an error once it holds `max_handles`
    /// key-value handles: each is host memory and a table slot, and without this a
    /// guest making them in a loop ran into the instance's `host_memory` (a trap).
    pub(super) fn push_handle<H: Send + 'static>(
        &mut self,
        handle: H,
    ) -> wasmtime::Result<Result<Resource<H>, KvError>> {
        let max = self.store.settings.max_handles;
        if self.handles.held >= max {
            return Ok(Err(KvError::Other(format!(
                "the instance holds {max} key-value handles already (max_handles): drop some"
            ))));
        }
        let pushed = self.table.push(handle)?;
        self.handles.held += 1;
        Ok(Ok(pushed))
    }

    /// Takes `handle` out of the instance's table.
    pub(super) fn drop_handle<H: 'static>(&mut self, handle: Resource<H>) -> wasmtime::Result<H> {
        let dropped = self.table.delete(handle)?;
        self.handles.held = self.handles.held.saturating_sub(1);
        Ok(dropped)
    }
}

/// The key-value handles (open buckets, compare-and-swap handles) an instance
/// holds, counted against its app's `max_handles`.
#[derive(Default)]
pub(crate) struct KvHandles {
    held: u32,
}

/// What the bindings of every version work with: the guest's resources, its app's
/// store, where to log a backend fault, and the instance's host-memory budget,
/// which bounds what a batch may make the host read for it and is charged with
/// what its handles hold.
pub(crate) struct KvView<'a> {
    pub table: &'a mut ResourceTable,
    pub store: &'a Arc<AppStore>,
    pub log: &'a Arc<GuestOutput>,
    pub host_memory: &'a HostMemoryBudget,
    pub handles: &'a mut KvHandles,
}

/// Links every `wasi:keyvalue` version wedge serves, each as `view` sees the store,
/// and (`concurrent`: the engine has component-model concurrency) Spin's
/// `spin:key-value@3.0.0`, whose functions are async in its WIT: wasmtime refuses
/// to define them on an engine without concurrency.
pub(crate) fn add_to_linker<T: Send + 'static>(
    linker: &mut Linker<T>,
    view: fn(&mut T) -> KvView<'_>,
    concurrent: bool,
) -> wasmtime::Result<()> {
    draft::add_to_linker(linker, view)?;
    draft2::add_to_linker(linker, view)?;
    if concurrent {
        spin::add_to_linker(linker, view)?;
    }
    Ok(())
}

/// The data the generated `add_to_linker`s hand their host functions.
pub(super) struct HasKv;

impl HasData for HasKv {
    type Data<'a> = KvView<'a>;
}
