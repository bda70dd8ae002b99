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

/// The request's CPU time: time spent inside polls of its guest call, that is
/// running guest code and the host calls it makes synchronously. Waiting on I/O
/// (the call future pending) does not count. Measured per poll rather than per
/// host call: a clock read on every guest/host transition cost more than the
/// guest's own work for small handlers.
pub struct CpuMeter {
    limit: Duration,
    use_: Arc<CpuUse>,
    pub(crate) exceeded: bool,
}

/// What the guest call's polls have used so far; shared between the poll
/// wrapper (which owns the store mutably while it polls) and the store's epoch
/// callback (which runs inside such a poll).
pub(crate) struct CpuUse {
    /// Nanoseconds used by finished polls.
    used: AtomicU64,
    /// When the poll now running started, in nanoseconds after `origin`; 0 when
    /// none runs.
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
        // +1 so a poll starting at the origin is not read as "none running".
        self.origin.elapsed().as_nanos() as u64 + 1
    }

    /// Awaits `call`, counting the time of each of its polls.
    pub(crate) async fn metered<F: Future>(&self, call: F) -> F::Output {
        let mut call = std::pin::pin!(call);
        std::future::poll_fn(|cx| self.poll_metered(|| call.as_mut().poll(cx))).await
    }

    /// Runs one poll of the guest call, counting its time.
    fn poll_metered<R>(&self, poll: impl FnOnce() -> R) -> R {
        self.start_running();
        let result = poll();
        self.stop_running();
        result
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

    /// The counter the guest call's polls add to.
    pub(crate) fn usage(&self) -> Arc<CpuUse> {
        self.use_.clone()
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

/// Where a store's CPU time is measured.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum CpuMetering {
    /// Around each poll of the guest call ([`CpuUse::metered`]): the caller
    /// polls the call itself (fresh instances).
    AroundPolls,
    /// At every guest/host transition, for stores whose calls wasmtime's
    /// `ProxyHandler` polls (no poll of them can be wrapped). Costs a clock read
    /// per transition.
    AtTransitions,
}

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
    metering: CpuMetering,
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
    if metering == CpuMetering::AtTransitions {
        meter_at_transitions(&mut store);
    }
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
