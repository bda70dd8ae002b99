//! How wedge's reused WASI 0.3 instances live: how many requests an instance takes
//! at once and in all, the CPU meter per request, when an idle or overdue instance
//! goes, and what a request is told of its instance's fate. wasmtime-wasi-http's
//! `ProxyHandler` asks this through its `HandlerState`, `WorkerState` and
//! `WorkerExpiration` hooks.

use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Weak};
use std::task::{Context, Poll, ready};

use tokio::sync::futures::OwnedNotified;
use tokio::sync::{Notify, oneshot};
use tokio::time::{Instant, Sleep, sleep_until, timeout_at};
use wasmtime::component::GuestTaskId;
use wasmtime::{Store, StoreContextMut};
use wasmtime_wasi_http::WasiHttpView;
use wasmtime_wasi_http::handler::{
    HandlerState, Instance, ShouldAccept, WorkerExpiration, WorkerState, WorkerStatus,
};

use super::claim::{Claim, Failed, Shared, Ticket};
use crate::host::admission::{Admission, InstancePlace};
use crate::host::app::{App, AppInstances};
use crate::host::fault::Fault;
use crate::host::limits::host_memory::{self, suspending};
use crate::host::store::GuestState;
use crate::metrics::Open;
use crate::sync::lock;

/// A request on its instance while the worker keeps its expiry: holds its claim;
/// when it ends, leaves the request to be told how the instance fared.
struct InFlight {
    shared: Arc<Shared>,
    verdict: Option<oneshot::Sender<Option<Fault>>>,
    claim: Option<Arc<Claim>>,
}

impl InFlight {
    /// The request expired: its guest code runs on, so its claim (its slot) stays
    /// with the instance until the instance is gone.
    fn expire(mut self) {
        self.keep_claim_with_instance();
    }

    fn keep_claim_with_instance(&mut self) {
        if let Some(claim) = self.claim.take() {
            lock(&self.shared.expired).push(claim);
        }
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        // Dropped unanswered with its instance (overdue): the slot waits for the
        // store to be gone, as an expired request's does.
        if self.shared.overdue.load(Ordering::Acquire) {
            self.keep_claim_with_instance();
        }
        if let Some(verdict) = self.verdict.take() {
            lock(&self.shared.ended).push(verdict);
        }
    }
}

impl HandlerState for AppInstances {
    type StoreData = GuestState;
    type WorkerExpiration = Expiry;
    type WorkerState = InstanceState;

    async fn instantiate(&self) -> wasmtime::Result<Instance<GuestState, Expiry, InstanceState>> {
        let unloaded = || Failed(Fault::Internal("the app version was unloaded".into()));
        let (admission, limit) = match self.app.upgrade() {
            Some(app) => (app.admission.clone(), app.limits.wall_time),
            None => return Err(unloaded().into()),
        };
        let deadline = Instant::now() + limit;
        let not_started = || {
            Failed(Fault::WallTime {
                limit,
                started: false,
            })
        };
        // Waited for without the app: a version unloaded meanwhile is not made. Bounded
        // by the wall time, since the request this worker may hold keeps its slot.
        let Ok(place) = timeout_at(deadline, admission.instance_place()).await else {
            return Err(not_started().into());
        };
        let Some(app) = self.app.upgrade() else {
            return Err(unloaded().into());
        };
        let mut store = app.new_store(None);
        let running = app.metrics.instance();
        let Some(pre) = app.pre.either() else {
            let never = "a WAGI program's instance is never reused";
            return Err(Failed(Fault::Internal(never.into())).into());
        };
        let instantiated = timeout_at(deadline, pre.instantiate_async(&mut store));
        let proxy = match suspending(instantiated).await {
            Err(_) => return Err(not_started().into()),
            Ok(Err(err)) => return Err(Failed(Fault::from_call_error(err, store.data())).into()),
            Ok(Ok(proxy)) => proxy,
        };
        store.data_mut().cpu.share_among_requests();
        let shared = Shared::new();
        let reuse = &app.limits.reuse;
        let requests = reuse
            .requests
            .unwrap_or(crate::host::limits::DEFAULT_P3_INSTANCE_REUSE);
        Ok(Instance {
            store,
            proxy,
            view: <GuestState as WasiHttpView>::http,
            expiration: Expiry {
                wall_time: app.limits.wall_time,
                idle: reuse.idle,
                timer: Box::pin(sleep_until(Instant::now() + reuse.idle)),
                shared: shared.clone(),
                place_wanted: Box::pin(admission.place_wanted_signal()),
                admission,
                retired: app.workers.retired.clone(),
                retired_signal: Box::pin(app.workers.retired.signal()),
            },
            state: InstanceState {
                concurrency: reuse.concurrency as usize,
                requests: requests as usize,
                app,
                shared,
                _running: running,
                _place: place,
            },
        })
    }
}

/// One instance's policy: how many requests it takes, the CPU meter per request,
/// and what it leaves behind when it goes.
pub(crate) struct InstanceState {
    app: Arc<App>,
    /// Requests it serves at once, and in all.
    concurrency: usize,
    requests: usize,
    shared: Arc<Shared>,
    /// Counts the instance as running until the worker is gone.
    _running: Open,
    /// Its place among the app's live instances, until the worker is gone.
    _place: InstancePlace,
}

impl WorkerState for InstanceState {
    type StoreData = GuestState;
    type RequestData = Ticket;

    fn should_accept_request(&self, concurrent: usize, total: usize) -> ShouldAccept {
        if total >= self.requests {
            ShouldAccept::Never
        } else if concurrent >= self.concurrency {
            ShouldAccept::No
        } else {
            ShouldAccept::Yes
        }
    }

    fn on_request_start(
        &self,
        mut store: StoreContextMut<'_, GuestState>,
        ticket: Ticket,
        _task: GuestTaskId,
    ) -> Pin<Box<dyn Future<Output = ()> + Send + Sync>> {
        let claim: Weak<dyn Send + Sync> = Arc::downgrade(&ticket.claim) as Weak<Claim>;
        // A WASI 0.3 task may leave work running (its body, work after the
        // response), even one at a time.
        store.data_mut().admit_request(claim, false);
        self.shared.take(&ticket.claim);
        let in_flight = InFlight {
            shared: self.shared.clone(),
            verdict: Some(ticket.verdict),
            claim: Some(ticket.claim),
        };
        // Resolving expires the request (504); the worker then takes no more and
        // goes once the others are done.
        Box::pin(async move {
            sleep_until(ticket.deadline).await;
            in_flight.expire();
        })
    }

    fn drop(&self, store: Store<GuestState>, result: wasmtime::Result<()>) {
        let fault = match result {
            Ok(()) => None,
            Err(_) if self.shared.overdue.load(Ordering::Acquire) => Some(Fault::WallTime {
                limit: self.app.limits.wall_time,
                started: true,
            }),
            Err(err) if worker_task_dropped(&err) => {
                tracing::debug!(
                    "app `{}`: an instance's worker task was dropped (shutdown)",
                    self.app.name
                );
                Some(Fault::Internal("wedge stopped the instance".into()))
            }
            Err(err) => {
                let fault = Fault::from_call_error(err, store.data());
                self.app.output.fault(format_args!(
                    "instance dropped ({fault}); requests still on it fail"
                ));
                Some(fault)
            }
        };
        self.shared.gone(fault.clone());
        self.shared.settle(fault.as_ref());
        drop(store);
        // Only now, with the instance's memory back in the pool, may the requests
        // that expired on it give their slots back. (ProxyHandler calls this for
        // every worker, also one whose task panicked or was dropped, so this also
        // breaks the cycle the expired claims make back to `shared`.)
        lock(&self.shared.expired).clear();
    }
}

/// Whether `ProxyHandler` ended a worker because its task was dropped (the runtime
/// drops its tasks at shutdown), not because the guest failed: its drop guard hands
/// `HandlerState::drop` the same "worker panicked" error for a dropped task as
/// for a panic, and only while unwinding is it a panic.
fn worker_task_dropped(err: &wasmtime::Error) -> bool {
    !std::thread::panicking() && err.to_string() == "worker panicked"
}

/// When a worker's instance goes, judged outside its event loop: idle past
/// `instance_idle` (a clean end), or past the wall-clock limit with requests or
/// post-return work still running (overdue: they fail).
pub(crate) struct Expiry {
    wall_time: std::time::Duration,
    idle: std::time::Duration,
    timer: Pin<Box<Sleep>>,
    shared: Arc<Shared>,
    /// The app's places for instances: an idle instance gives its up to a request
    /// waiting for one.
    admission: Arc<Admission>,
    place_wanted: Pin<Box<OwnedNotified>>,
    /// Its app version's: an idle instance of a version that gets no more requests
    /// goes at once.
    retired: Retired,
    retired_signal: Pin<Box<OwnedNotified>>,
}

impl Expiry {
    /// Whether a request of the app waits for a place among its instances; if none
    /// does, `cx` is woken when one starts to.
    fn place_wanted(&mut self, cx: &mut Context<'_>) -> bool {
        let admission = &self.admission;
        holds_or_wake(
            &mut self.place_wanted,
            || admission.place_wanted_signal(),
            || admission.place_wanted(),
            cx,
        )
    }

    /// Whether the instance's app version was retired; if not, `cx` is woken when
    /// it is.
    fn retired(&mut self, cx: &mut Context<'_>) -> bool {
        let retired = &self.retired;
        holds_or_wake(
            &mut self.retired_signal,
            || retired.signal(),
            || retired.is_raised(),
            cx,
        )
    }
}

/// Whether `holds()`; if not, `cx` is woken when `signal` fires (renewed by `renew`
/// each time it has). The signal is enabled before `holds` is asked, so that no
/// change between the two goes unseen.
fn holds_or_wake(
    signal: &mut Pin<Box<OwnedNotified>>,
    renew: impl Fn() -> OwnedNotified,
    holds: impl Fn() -> bool,
    cx: &mut Context<'_>,
) -> bool {
    loop {
        signal.as_mut().enable();
        if holds() {
            return true;
        }
        match signal.as_mut().poll(cx) {
            Poll::Ready(()) => signal.set(renew()),
            Poll::Pending => return false,
        }
    }
}

/// Raised once an app version gets no new requests (replaced by another, or its
/// app removed): its idle instances hold places among the app's and slots of the
/// host's pool that no request of it will use, so they go at once rather than
/// after `instance_idle` (10 minutes, say).
#[derive(Clone, Default)]
pub(crate) struct Retired {
    raised: Arc<AtomicBool>,
    notify: Arc<Notify>,
}

impl Retired {
    pub(crate) fn raise(&self) {
        self.raised.store(true, Ordering::Release);
        self.notify.notify_waiters();
    }

    fn is_raised(&self) -> bool {
        self.raised.load(Ordering::Acquire)
    }

    fn signal(&self) -> OwnedNotified {
        self.notify.clone().notified_owned()
    }
}

impl WorkerExpiration for Expiry {
    fn poll(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        status: WorkerStatus,
        start: std::time::Instant,
    ) -> Poll<()> {
        // Polled whenever a poll of the worker's event loop returns pending: a host
        // call that parked there left its instance's account current.
        host_memory::suspend();
        let this = self.get_mut();
        // Polled only when the worker's event loop is waiting: it lives on past every
        // request that ended before.
        this.shared.settle(None);
        // An instance running nothing but expired requests' guest code goes now: it
        // takes no more requests, and their slots wait for it.
        this.shared.claim_released.register(cx.waker());
        if status != WorkerStatus::Requests && this.shared.only_expired_left() {
            this.shared.overdue.store(true, Ordering::Release);
            return Poll::Ready(());
        }
        // Idle, it goes once its version is retired, and gives its place up to a
        // request waiting for one: a clean end.
        if status == WorkerStatus::Idle && (this.retired(cx) || this.place_wanted(cx)) {
            return Poll::Ready(());
        }
        let limit = match status {
            WorkerStatus::Idle => this.idle,
            WorkerStatus::Requests | WorkerStatus::PostReturn => this.wall_time,
        };
        let deadline = Instant::from_std(start) + limit;
        if this.timer.deadline() != deadline {
            this.timer.as_mut().reset(deadline);
        }
        ready!(this.timer.as_mut().poll(cx));
        if status != WorkerStatus::Idle {
            this.shared.overdue.store(true, Ordering::Release);
        }
        Poll::Ready(())
    }
}
