//! The CPU-time limit: guest code and the host calls it makes, metered at the
//! guest/host transitions and checked at every epoch tick.

use std::sync::Weak;
use std::time::{Duration, Instant};

/// The request's CPU time: time spent running guest code and the host calls it
/// makes (building fields, copying its data: work done at its request), from its
/// entry into wasm until wasm returns to the host. A host call that parks — waits
/// for I/O or a timer, its fiber suspended while the thread serves others — counts
/// for nothing, not even the part before it parked (bounded: a call copies at most
/// one chunk before it waits). What the host does outside a guest call (moving a
/// response body to the peer, a WASI 0.3 instance's event loop between its tasks)
/// is not the guest's. Metering around whole polls of the call was tried, but it
/// counted the host's own streaming as the guest's.
pub struct CpuMeter {
    /// One request's CPU time (`cpu_time`).
    limit: Duration,
    used: Duration,
    /// Since when the current call into wasm (with its host calls) has run.
    running_since: Option<Instant>,
    /// Wasm entries not yet returned (a host call may call back into wasm, e.g. to
    /// allocate the guest memory its results go to).
    depth: u32,
    /// When the host call in progress started.
    host_call_since: Option<Instant>,
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
    pub(crate) fn new(limit: Duration) -> Self {
        CpuMeter {
            limit,
            used: Duration::ZERO,
            running_since: None,
            depth: 0,
            host_call_since: None,
            shares: None,
            exceeded: false,
        }
    }

    /// One request's CPU time limit.
    pub(crate) fn limit(&self) -> Duration {
        self.limit
    }

    // The transitions take the clock as a function: they read it only when they
    // need to (most nested transitions do not), and tests pass their own.

    /// The host enters wasm: the outermost entry starts the meter.
    pub(crate) fn calling_wasm(&mut self, now: impl FnOnce() -> Instant) {
        self.depth += 1;
        if self.depth == 1 {
            self.running_since = Some(now());
        }
    }

    /// Wasm returns to the host: the outermost return stops the meter.
    pub(crate) fn returning_from_wasm(&mut self, now: impl FnOnce() -> Instant) {
        self.depth = self.depth.saturating_sub(1);
        if self.depth == 0
            && let Some(since) = self.running_since.take()
        {
            self.used += now().saturating_duration_since(since);
        }
    }

    /// The guest calls the host (the outermost of nested host calls).
    pub(crate) fn calling_host(&mut self, now: impl FnOnce() -> Instant) {
        self.host_call_since = Some(now());
    }

    /// The host call returns; `parked`: it waited on the way, so none of it counts.
    pub(crate) fn returning_from_host(&mut self, parked: bool, now: impl FnOnce() -> Instant) {
        if parked {
            self.exclude_host_call(now());
        }
        self.host_call_since = None;
    }

    /// The host call in progress parked, and the meter is looked at before it
    /// returns (a tick while it lowers its results into guest memory: wasm, nested):
    /// what it did so far does not count; what it does from `now` on does.
    pub(crate) fn host_call_parked(&mut self, now: Instant) {
        self.exclude_host_call(now);
        self.host_call_since = Some(now);
    }

    fn exclude_host_call(&mut self, now: Instant) {
        if let (Some(called), Some(running)) = (self.host_call_since, self.running_since) {
            self.used += called.saturating_duration_since(running);
            self.running_since = Some(now);
        }
    }

    fn used_at(&self, now: Instant) -> Duration {
        let running = self
            .running_since
            .map(|since| now.saturating_duration_since(since));
        self.used + running.unwrap_or_default()
    }

    /// Whether guest code has used up its time (checked at every epoch tick).
    pub(crate) fn over_budget(&mut self, now: Instant) -> bool {
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
    pub(crate) fn admit_request(
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    const LIMIT: Duration = Duration::from_millis(1000);

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    /// A reused instance's meter, as `call/reused/policy.rs` sets it up.
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
    fn host_calls_count_unless_they_park() {
        let (mut meter, t0) = (CpuMeter::new(LIMIT), Instant::now());
        let at = |n| move || t0 + ms(n);
        meter.calling_wasm(at(0));
        // 10 ms of wasm, a 30 ms host call that computes, 10 ms of wasm…
        meter.calling_host(at(10));
        meter.returning_from_host(false, at(40));
        // …a host call that waits 500 ms for I/O, 10 ms of wasm.
        meter.calling_host(at(50));
        meter.returning_from_host(true, at(550));
        meter.returning_from_wasm(at(560));
        assert_eq!(meter.used, ms(60));
        assert!(!meter.over_budget(t0 + ms(5000)));
    }

    #[test]
    fn a_parked_host_call_looked_at_before_it_returns_counts_only_from_then() {
        let (mut meter, t0) = (CpuMeter::new(LIMIT), Instant::now());
        let at = |n| move || t0 + ms(n);
        meter.calling_wasm(at(0));
        meter.calling_host(at(10));
        // Parked 2 s; then, lowering its results, a tick looks at the meter.
        meter.host_call_parked(t0 + ms(2010));
        assert_eq!(meter.used_at(t0 + ms(2010)), ms(10));
        assert!(!meter.over_budget(t0 + ms(2015)));
        meter.returning_from_host(true, at(2020));
        meter.returning_from_wasm(at(2030));
        assert_eq!(meter.used, ms(20));
    }

    #[test]
    fn only_the_outermost_wasm_entry_starts_and_stops_the_meter() {
        let (mut meter, t0) = (CpuMeter::new(LIMIT), Instant::now());
        let at = |n| move || t0 + ms(n);
        meter.calling_wasm(at(0));
        meter.calling_host(at(10));
        // The host call allocates guest memory for its results: wasm again, nested.
        meter.calling_wasm(|| unreachable!("a nested entry reads no clock"));
        meter.returning_from_wasm(|| unreachable!("a nested return reads no clock"));
        meter.returning_from_host(false, || unreachable!("a call that did not park"));
        assert_eq!(meter.used_at(t0 + ms(30)), ms(30));
        meter.returning_from_wasm(at(40));
        assert_eq!(meter.used, ms(40));
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
