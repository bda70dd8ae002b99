//! Per-request store state: the WASI and wasi:http contexts, the memory
//! limiter and the CPU meter.

use std::sync::Arc;
use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering::Relaxed;
use std::time::{Duration, Instant};

use wasmtime::component::ResourceTable;
use wasmtime::{CallHook, ResourceLimiter, Store, StoreContextMut, UpdateDeadline};
use wasmtime_wasi::{WasiCtx, WasiCtxView, WasiView};
use wasmtime_wasi_config::WasiConfig;
use wasmtime_wasi_http::{WasiHttpCtx, WasiHttpCtxView, WasiHttpView};

use super::guest_log::{Channel, GuestLog};
use super::hooks::{GuestHooks, OutboundGate};
use super::limits::Limits;
use super::vars::GuestVars;

/// Everything a request's `Store` holds.
pub struct GuestState {
    wasi: WasiCtx,
    http: WasiHttpCtx,
    table: ResourceTable,
    hooks: GuestHooks,
    vars: GuestVars,
    pub(crate) limiter: MemoryLimiter,
    pub(crate) cpu: CpuMeter,
}

impl WasiView for GuestState {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView {
            ctx: &mut self.wasi,
            table: &mut self.table,
        }
    }
}

impl WasiHttpView for GuestState {
    fn http(&mut self) -> WasiHttpCtxView<'_> {
        WasiHttpCtxView {
            ctx: &mut self.http,
            table: &mut self.table,
            hooks: &mut self.hooks,
        }
    }
}

impl GuestState {
    /// The app's wasi:config/store values.
    pub(crate) fn config(&mut self) -> WasiConfig<'_> {
        WasiConfig::new(&self.vars.config)
    }
}

/// Denies linear-memory growth past the app's limit and remembers that it did,
/// so the resulting trap is reported as "memory limit exceeded".
pub struct MemoryLimiter {
    limit: u64,
    pub(crate) denied: bool,
}

impl MemoryLimiter {
    pub(crate) fn limit(&self) -> u64 {
        self.limit
    }
}

impl ResourceLimiter for MemoryLimiter {
    fn memory_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        let allowed = desired as u64 <= self.limit;
        if !allowed {
            self.denied = true;
        }
        Ok(allowed)
    }

    fn table_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        // Tables hold references, a few bytes each; bound them so a guest
        // cannot use them to get around the memory limit.
        Ok((desired as u64).saturating_mul(16) <= self.limit)
    }
}

/// The request's CPU time: time spent running guest code, measured at every
/// guest/host transition; host calls (where the guest waits on I/O, or the host
/// moves its bodies) do not count. Metering around whole polls of the call was
/// tried and is cheaper, but it counted the host's streaming work too: a proxy
/// moving 48 MiB hit a 1 s limit its guest code never came near.
pub struct CpuMeter {
    limit: Duration,
    use_: Arc<CpuUse>,
    pub(crate) exceeded: bool,
}

/// What the guest has used so far, written at transitions and read by the
/// store's epoch callback.
pub(crate) struct CpuUse {
    /// Nanoseconds of guest code run so far, the current stretch left out.
    used: AtomicU64,
    /// When the guest code now running was entered, in nanoseconds after
    /// `origin`; 0 while the host runs.
    running_since: AtomicU64,
    origin: Instant,
}

impl CpuUse {
    fn new() -> Self {
        CpuUse {
            used: AtomicU64::new(0),
            running_since: AtomicU64::new(0),
            origin: Instant::now(),
        }
    }

    fn now(&self) -> u64 {
        // +1 so a stretch starting at the origin is not read as "none running".
        self.origin.elapsed().as_nanos() as u64 + 1
    }

    fn start_running(&self) {
        self.running_since.store(self.now(), Relaxed);
    }

    fn stop_running(&self) {
        let since = self.running_since.swap(0, Relaxed);
        if since != 0 {
            self.used.fetch_add(self.now() - since, Relaxed);
        }
    }

    fn used_now(&self) -> Duration {
        let running = match self.running_since.load(Relaxed) {
            0 => 0,
            since => self.now().saturating_sub(since),
        };
        Duration::from_nanos(self.used.load(Relaxed) + running)
    }
}

impl CpuMeter {
    pub(crate) fn limit(&self) -> Duration {
        self.limit
    }

    /// Meters one more request on a reused instance. With no other request in
    /// flight the meter starts again from zero with one request's budget; beside
    /// requests in flight (a p3 instance serving several at once) the instance's
    /// budget grows by one request's, since guest time cannot be told apart by
    /// request inside one instance.
    pub(crate) fn admit_request(&mut self, per_request: Duration, alone: bool) {
        if alone {
            self.use_.used.store(0, Relaxed);
            self.limit = per_request;
            self.exceeded = false;
        } else {
            self.limit = self.limit.saturating_add(per_request);
        }
    }
}

/// Guest time starts when wasm is entered or a host call returns to it, and
/// stops when wasm returns or calls the host.
fn meter_at_transitions(store: &mut Store<GuestState>) {
    store.call_hook(|mut ctx: StoreContextMut<'_, GuestState>, hook| {
        let cpu = &ctx.data_mut().cpu.use_;
        match hook {
            CallHook::CallingWasm | CallHook::ReturningFromHost => cpu.start_running(),
            CallHook::ReturningFromWasm | CallHook::CallingHost => cpu.stop_running(),
        }
        Ok(())
    });
}

/// Creates the store for one request with the app's limits, outbound policy
/// and variables installed.
pub fn new_store(
    engine: &wasmtime::Engine,
    app: &Arc<str>,
    limits: &Limits,
    outbound: &Arc<OutboundGate>,
    vars: &GuestVars,
) -> Store<GuestState> {
    // The environment is exactly the app's: the builder starts empty and never
    // inherits the host's.
    let wasi = WasiCtx::builder()
        .envs(&vars.env)
        .stdout(GuestLog::new(app.clone(), Channel::Stdout))
        .stderr(GuestLog::new(app.clone(), Channel::Stderr))
        .build();
    let state = GuestState {
        wasi,
        http: WasiHttpCtx::new(),
        table: ResourceTable::new(),
        hooks: GuestHooks::new(app.clone(), outbound.clone()),
        vars: vars.clone(),
        limiter: MemoryLimiter {
            limit: limits.memory,
            denied: false,
        },
        cpu: CpuMeter {
            limit: limits.cpu_time,
            use_: Arc::new(CpuUse::new()),
            exceeded: false,
        },
    };
    let mut store = Store::new(engine, state);
    store.limiter(|state| &mut state.limiter);
    meter_at_transitions(&mut store);
    store.set_epoch_deadline(1);
    store.epoch_deadline_callback(|mut ctx| {
        let cpu = &mut ctx.data_mut().cpu;
        if cpu.use_.used_now() > cpu.limit {
            cpu.exceeded = true;
            return Ok(UpdateDeadline::Interrupt);
        }
        // Yield at every tick so one busy guest delays others on its worker
        // by at most one tick.
        Ok(UpdateDeadline::Yield(1))
    });
    store
}
