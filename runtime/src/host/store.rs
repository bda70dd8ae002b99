//! Per-request store state: the WASI and wasi:http contexts, the memory
//! limiter and the CPU meter.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
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

impl GuestState {
    /// Starts one more request on a reused instance: its CPU share, and, on an
    /// instance no other request holds, a memory limiter with no denial left
    /// from earlier requests (a later trap must not be blamed on it).
    pub(crate) fn admit_request(&mut self) {
        if self.cpu.admit_request() {
            self.limiter.denied = false;
        }
    }
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
    /// One request's CPU time (`cpu_time`): what a fault reports.
    limit: Duration,
    /// What guest code in this store may use before it is interrupted: `limit`,
    /// or on a reused instance one `limit` per request it holds (see [`Shares`]).
    budget: Duration,
    used: Duration,
    in_guest_since: Option<Instant>,
    shares: Option<Shares>,
    pub(crate) exceeded: bool,
}

/// A reused instance's requests share its meter: guest time inside one instance
/// cannot be told apart by request, so each request is charged an equal share of
/// it. A request brings one `limit` of budget when it starts; when it is done
/// (its response body ended or dropped, from any thread) it takes its budget
/// and its share of the time used so far away again.
struct Shares {
    held: u32,
    /// Requests done since the meter last looked.
    released: Arc<AtomicU32>,
}

impl CpuMeter {
    fn new(limit: Duration) -> Self {
        CpuMeter {
            limit,
            budget: limit,
            used: Duration::ZERO,
            in_guest_since: None,
            shares: None,
            exceeded: false,
        }
    }

    /// One request's CPU time limit.
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

    /// Whether guest code has used up its budget (checked at every epoch tick).
    fn over_budget(&mut self) -> bool {
        self.settle_released();
        self.used_now() > self.budget
    }

    /// Meters this store's requests by [`Shares`]; `released` is counted up once
    /// per request done.
    pub(crate) fn share_among_requests(&mut self, released: Arc<AtomicU32>) {
        self.shares = Some(Shares { held: 0, released });
    }

    /// Meters one more request on a reused instance; true if it is the only one.
    /// The first request of an idle instance starts from zero; time used after the
    /// last request was done (work the guest left running) was charged to that
    /// last request.
    fn admit_request(&mut self) -> bool {
        self.settle_released();
        let Some(shares) = &mut self.shares else {
            return true;
        };
        let alone = shares.held == 0;
        if alone {
            self.used = Duration::ZERO;
            self.budget = Duration::ZERO;
            self.exceeded = false;
        }
        shares.held += 1;
        self.budget = self.budget.saturating_add(self.limit);
        alone
    }

    /// Takes the budget and the equal share of the time used of every request
    /// done since the last look. The last request keeps both: guest work still
    /// running after it is charged to it.
    fn settle_released(&mut self) {
        let Some(shares) = &mut self.shares else {
            return;
        };
        let released = shares.released.swap(0, Ordering::AcqRel);
        for _ in 0..released {
            if shares.held > 1 {
                self.used -= self.used / shares.held;
                self.budget = self.budget.saturating_sub(self.limit);
            }
            shares.held = shares.held.saturating_sub(1);
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
        cpu: CpuMeter::new(limits.cpu_time),
    };
    let mut store = Store::new(engine, state);
    store.limiter(|state| &mut state.limiter);
    meter_at_transitions(&mut store);
    store.set_epoch_deadline(1);
    store.epoch_deadline_callback(|mut ctx| {
        let cpu = &mut ctx.data_mut().cpu;
        if cpu.over_budget() {
            cpu.exceeded = true;
            return Ok(UpdateDeadline::Interrupt);
        }
        // Yield at every tick so one busy guest delays others on its worker
        // by at most one tick.
        Ok(UpdateDeadline::Yield(1))
    });
    store
}
