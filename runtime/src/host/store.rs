//! Per-request store state: the WASI and wasi:http contexts, the memory
//! limiter and the CPU meter.

use std::sync::Arc;
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
    used: Duration,
    in_guest_since: Option<Instant>,
    pub(crate) exceeded: bool,
}

impl CpuMeter {
    pub(crate) fn limit(&self) -> Duration {
        self.limit
    }

    fn enter_guest(&mut self) {
        self.in_guest_since = Some(Instant::now());
    }

    fn leave_guest(&mut self) {
        if let Some(since) = self.in_guest_since.take() {
            self.used += since.elapsed();
        }
    }

    fn used_now(&self) -> Duration {
        self.used + self.in_guest_since.map_or(Duration::ZERO, |t| t.elapsed())
    }

    /// Meters one more request on a reused instance. With no other request in
    /// flight the meter starts again from zero with one request's budget; beside
    /// requests in flight (a p3 instance serving several at once) the instance's
    /// budget grows by one request's, since guest time cannot be told apart by
    /// request inside one instance.
    pub(crate) fn admit_request(&mut self, per_request: Duration, alone: bool) {
        if alone {
            self.used = Duration::ZERO;
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
        let cpu = &mut ctx.data_mut().cpu;
        match hook {
            CallHook::CallingWasm | CallHook::ReturningFromHost => cpu.enter_guest(),
            CallHook::ReturningFromWasm | CallHook::CallingHost => cpu.leave_guest(),
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
            used: Duration::ZERO,
            in_guest_since: None,
            exceeded: false,
        },
    };
    let mut store = Store::new(engine, state);
    store.limiter(|state| &mut state.limiter);
    meter_at_transitions(&mut store);
    store.set_epoch_deadline(1);
    store.epoch_deadline_callback(|mut ctx| {
        let cpu = &mut ctx.data_mut().cpu;
        if cpu.used_now() > cpu.limit {
            cpu.exceeded = true;
            return Ok(UpdateDeadline::Interrupt);
        }
        // Yield at every tick so one busy guest delays others on its worker
        // by at most one tick.
        Ok(UpdateDeadline::Yield(1))
    });
    store
}
