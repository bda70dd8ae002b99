//! Per-request store state: the WASI and wasi:http contexts, the memory
//! limiter and the CPU meter.

use std::sync::{Arc, Weak};
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
    /// Starts one more request on a reused instance, held while `claim` lives: its
    /// CPU share (see [`CpuMeter::admit_request`]), and, on an instance no other
    /// request holds, a memory limiter with no denial left from earlier requests
    /// (a later trap must not be blamed on it).
    pub(crate) fn admit_request(&mut self, claim: Weak<dyn Send + Sync>, one_at_a_time: bool) {
        if self.cpu.admit_request(claim, one_at_a_time, Instant::now()) {
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
    /// One request's CPU time (`cpu_time`).
    limit: Duration,
    used: Duration,
    in_guest_since: Option<Instant>,
    /// On a reused instance: how its guest time is charged to its requests.
    shares: Option<Shares>,
    pub(crate) exceeded: bool,
}

/// A reused instance's requests share its guest time, and inside one instance it
/// cannot be told whose code runs. So the instance is stopped only once its guest
/// code has certainly gone past some request's `cpu_time`: when, since it last held
/// no request, it has run more guest code than its requests could have run between
/// them, each at most `cpu_time` and at most the (wall-clock) time it was held,
/// since an instance runs one piece of guest code at a time. A request idle beside
/// busy ones is not blamed for their work; one that spins while short requests come
/// and go is stopped once its own time alone is past `cpu_time`. A request is held
/// from its admission until its claim is released (its response body done).
#[derive(Default)]
struct Shares {
    /// `used` when the instance last went from no request held to one.
    used_before: Duration,
    /// What the requests released since then could have run, between them.
    released: Duration,
    /// The requests held, each with the time it was admitted.
    held: Vec<(Weak<dyn Send + Sync>, Instant)>,
}

impl Shares {
    /// Moves the requests released since the last look into `released`.
    fn settle(&mut self, limit: Duration, now: Instant) {
        let released = &mut self.released;
        self.held.retain(|(claim, admitted)| {
            let held = claim.strong_count() > 0;
            if !held {
                *released += could_have_run(limit, *admitted, now);
            }
            held
        });
    }

    /// The guest time all requests since the instance's last idle moment could
    /// have run. With none held any more, the work they left running (a body's
    /// last writes, tasks after the response) may take one more `cpu_time`.
    fn capacity(&self, limit: Duration, now: Instant) -> Duration {
        if self.held.is_empty() {
            return self.released + limit;
        }
        let held = self
            .held
            .iter()
            .map(|(_, admitted)| could_have_run(limit, *admitted, now));
        self.released + held.sum::<Duration>()
    }
}

/// The guest time a request admitted at `admitted` could have run by `now`: its
/// limit, and no more than the wall-clock time since.
fn could_have_run(limit: Duration, admitted: Instant, now: Instant) -> Duration {
    limit.min(now.duration_since(admitted))
}

impl CpuMeter {
    fn new(limit: Duration) -> Self {
        CpuMeter {
            limit,
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

    fn used_at(&self, now: Instant) -> Duration {
        let running = self
            .in_guest_since
            .map(|since| now.saturating_duration_since(since));
        self.used + running.unwrap_or_default()
    }

    /// Whether guest code has used up its time (checked at every epoch tick).
    fn over_budget(&mut self, now: Instant) -> bool {
        let used = self.used_at(now);
        match &mut self.shares {
            None => used > self.limit,
            Some(shares) => {
                shares.settle(self.limit, now);
                used.saturating_sub(shares.used_before) > shares.capacity(self.limit, now)
            }
        }
    }

    /// Charges this store's guest time to the requests it holds (see [`Shares`]).
    pub(crate) fn share_among_requests(&mut self) {
        self.shares = Some(Shares::default());
    }

    /// Meters one more request, held while `claim` lives; true if no other request
    /// is held. `one_at_a_time`: the instance takes a request only once the one
    /// before returned, and a returned request leaves nothing running (WASI 0.2:
    /// no tasks outlive the call), so the new one starts a window of its own.
    fn admit_request(
        &mut self,
        claim: Weak<dyn Send + Sync>,
        one_at_a_time: bool,
        now: Instant,
    ) -> bool {
        let used = self.used_at(now);
        let Some(shares) = &mut self.shares else {
            return true;
        };
        shares.settle(self.limit, now);
        let alone = one_at_a_time || shares.held.is_empty();
        if alone {
            shares.used_before = used;
            shares.released = Duration::ZERO;
            shares.held.clear();
        }
        shares.held.push((claim, now));
        alone
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
        if cpu.over_budget(Instant::now()) {
            cpu.exceeded = true;
            return Ok(UpdateDeadline::Interrupt);
        }
        // Yield at every tick so one busy guest delays others on its worker
        // by at most one tick.
        Ok(UpdateDeadline::Yield(1))
    });
    store
}

#[cfg(test)]
mod tests {
    use super::*;

    const LIMIT: Duration = Duration::from_millis(1000);

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    /// A reused instance's meter, as `reuse.rs` sets it up.
    fn shared_meter() -> CpuMeter {
        let mut meter = CpuMeter::new(LIMIT);
        meter.share_among_requests();
        meter
    }

    /// A request's claim: held while the `Arc` lives.
    fn claim() -> (Arc<()>, Weak<dyn Send + Sync>) {
        let claim = Arc::new(());
        let weak: Weak<dyn Send + Sync> = Arc::downgrade(&claim) as Weak<()>;
        (claim, weak)
    }

    #[test]
    fn a_request_alone_gets_its_whole_cpu_time() {
        let (mut meter, t0) = (shared_meter(), Instant::now());
        let (_a, weak) = claim();
        assert!(meter.admit_request(weak, false, t0));
        meter.used = ms(900);
        assert!(!meter.over_budget(t0 + ms(2000)));
        meter.used = ms(1001);
        assert!(meter.over_budget(t0 + ms(2000)));
    }

    #[test]
    fn one_at_a_time_each_request_starts_afresh_though_the_last_body_is_still_going() {
        let (mut meter, t0) = (shared_meter(), Instant::now());
        let (a, weak) = claim();
        meter.admit_request(weak, true, t0);
        meter.used = ms(800);
        // The next request is taken once A's guest returned, while A's response
        // body is still on its way (its claim still held).
        let (_b, weak) = claim();
        assert!(meter.admit_request(weak, true, t0 + ms(1000)));
        drop(a);
        meter.used = ms(800 + 900);
        assert!(!meter.over_budget(t0 + ms(2000)), "B ran 900 ms of its 1 s");
        meter.used = ms(800 + 1001);
        assert!(meter.over_budget(t0 + ms(3000)));
    }

    #[test]
    fn work_left_running_after_the_last_request_may_take_one_more_cpu_time() {
        let (mut meter, t0) = (shared_meter(), Instant::now());
        let (a, weak) = claim();
        meter.admit_request(weak, false, t0);
        meter.used = ms(99);
        drop(a);
        // A used 99 ms of the 100 ms it was held; its tasks run on afterwards.
        assert!(!meter.over_budget(t0 + ms(100)));
        meter.used = ms(99 + 1000);
        assert!(!meter.over_budget(t0 + ms(2000)));
        meter.used = ms(99 + 1002);
        assert!(meter.over_budget(t0 + ms(2000)));
    }

    #[test]
    fn requests_held_together_may_use_a_cpu_time_each() {
        let (mut meter, t0) = (shared_meter(), Instant::now());
        let held: Vec<_> = (0..4).map(|_| claim()).collect();
        for (_, weak) in &held {
            meter.admit_request(weak.clone(), false, t0);
        }
        meter.used = ms(3900);
        assert!(!meter.over_budget(t0 + ms(4000)));
        meter.used = ms(4100);
        assert!(meter.over_budget(t0 + ms(4100)));
    }

    #[test]
    fn an_idle_request_is_not_blamed_for_the_work_of_busy_ones_beside_it() {
        let (mut meter, t0) = (shared_meter(), Instant::now());
        let (_idle, weak) = claim();
        meter.admit_request(weak, false, t0);
        // Ten requests come one after the other, each running 900 ms of guest code
        // (within its own 1 s) while the idle one waits.
        for round in 0..10 {
            let start = t0 + ms(900 * round);
            let (busy, weak) = claim();
            meter.admit_request(weak, false, start);
            meter.used += ms(900);
            drop(busy);
            assert!(!meter.over_budget(start + ms(900)), "round {round}");
        }
    }

    #[test]
    fn a_request_that_never_ends_is_stopped_however_many_come_and_go_beside_it() {
        let (mut meter, t0) = (shared_meter(), Instant::now());
        let (_spinner, weak) = claim();
        meter.admit_request(weak, false, t0);
        // Every 100 ms a short request comes and is done 10 ms later; all the while
        // the spinner runs guest code. Its time alone, 90 ms a round, is certainly
        // its own: past its first second held, that is what it is stopped by.
        for round in 0..40 {
            let start = t0 + ms(100 * round);
            let (short, weak) = claim();
            meter.admit_request(weak, false, start);
            meter.used += ms(10);
            drop(short);
            let released = meter.over_budget(start + ms(10));
            meter.used += ms(90);
            if released || meter.over_budget(start + ms(100)) {
                assert!((10..=13).contains(&round), "stopped in round {round}");
                return;
            }
        }
        panic!("the spinner was never stopped");
    }
}
