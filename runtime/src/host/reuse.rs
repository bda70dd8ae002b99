//! Requests served by reused instances: p3 components always (several requests at
//! once on one instance), p2 components when the app asks for it (`instance_reuse`
//! above 1; one request at a time).
//!
//! Built on wasmtime-wasi-http's own `handler::ProxyHandler`, the machinery
//! `wasmtime serve` reuses instances with, rather than a pool of wedge's own: it keeps
//! workers per app, each one store and one instance living inside
//! `Store::run_concurrent`, hands each request to a worker with room, and reads p3
//! response bodies inside that event loop. wedge supplies the policy
//! ([`HandlerState`], [`WorkerState`], [`WorkerExpiration`]): how many requests an
//! instance takes at once and in all, when an idle or overdue one goes, each request's
//! wall-clock deadline, the CPU meter, the metrics, and what each failure answers.
//!
//! Isolation: an instance serves requests of one app version only (one
//! `ProxyHandler` per [`App`]), so state never crosses apps; between requests of the
//! same app it may (globals, caches), which is what the app asked for. A trap fails
//! the instance and every request on it (each gets its fault's status, 500 for a
//! trap); the next request gets a fresh instance.

use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock, Weak};
use std::task::{Context, Poll, ready};

use bytes::Bytes;
use futures_util::task::AtomicWaker;
use http::uri::{Authority, PathAndQuery, Scheme};
use http::{Request, Response, StatusCode, Uri, header};
use http_body::{Body, Frame, SizeHint};
use http_body_util::BodyExt;
use tokio::sync::oneshot;
use tokio::time::{Instant, Sleep, sleep_until, timeout_at};
use wasmtime::component::GuestTaskId;
use wasmtime::{Store, StoreContextMut};
use wasmtime_wasi_http::handler::{
    ExpirationError, HandlerState, Instance, InstantiationError, ProxyHandler, ShouldAccept,
    WorkerExpiration, WorkerState, WorkerStatus,
};
use wasmtime_wasi_http::p2::bindings::http::types::ErrorCode as P2ErrorCode;
use wasmtime_wasi_http::p3::bindings::http::types::ErrorCode as P3ErrorCode;
use wasmtime_wasi_http::{WasiBody, WasiHttpView};

use crate::sync::lock;

use super::admission::{Abandoned, AbandonedMark, Slot};
use super::app::App;
use super::body::{BodyError, LimitedBody, OverLimit, ResponseBody};
use super::dispatch::{RequestScheme, plain, too_large};
use super::fault::Fault;
use super::limits::host_memory::{self, suspending};
use super::store::{GuestState, new_store};
use crate::metrics::Open;

/// An app version's reused instances: one `ProxyHandler`, made on the first request.
/// Its workers hold their app version (not the other way round: the handler knows
/// the app only weakly), so an unloaded version's instances finish what they have
/// and go once idle.
#[derive(Default)]
pub(crate) struct Workers(OnceLock<ProxyHandler<AppInstances>>);

impl Workers {
    fn handler(&self, app: &Arc<App>) -> &ProxyHandler<AppInstances> {
        self.0.get_or_init(|| {
            ProxyHandler::new(AppInstances {
                app: Arc::downgrade(app),
            })
        })
    }
}

impl App {
    /// Whether requests go to reused instances rather than a fresh one each: p3
    /// components always, p2 ones that asked for more than one request per instance.
    pub(super) fn reuses_instances(&self) -> bool {
        self.pre.is_p3() || reuses_p2_instances(&self.limits)
    }

    /// Answers one admitted request on a reused instance. `slot` is held until the
    /// response body is done or the request failed, and, once a worker took the
    /// request, until its guest answered or the request expired: a client that
    /// leaves early does not free the slot of a request still running.
    pub(super) async fn handle_reused<B>(
        self: &Arc<Self>,
        request: Request<LimitedBody<B>>,
        scheme: RequestScheme,
        slot: Slot,
        over_limit: OverLimit<B>,
        connection: &Abandoned,
    ) -> Response<ResponseBody>
    where
        B: Body<Data = Bytes> + Send + Unpin + 'static,
        B::Error: Into<wasmtime_wasi_http::Error>,
    {
        let request = absolute(request.map(|body| body.boxed_unsync()), scheme);
        // wasmtime refuses a p2 request without an authority inside the worker, which
        // would fail the instance and every request on it: refuse it here instead.
        if !self.pre.is_p3() && request.uri().authority().is_none() {
            return plain(
                StatusCode::BAD_REQUEST,
                "bad request: no authority (Host)\n".into(),
            );
        }
        let deadline = Instant::now() + self.limits.wall_time;
        let claim = Arc::new(Claim {
            _slot: slot,
            instance: OnceLock::new(),
            abandoned: OnceLock::new(),
        });
        let (verdict_tx, verdict) = oneshot::channel();
        let ticket = Ticket {
            deadline,
            claim: claim.clone(),
            verdict: verdict_tx,
        };
        // Dropped before the response is done (the client left): the request counts
        // against its connection for as long as its guest still holds the claim.
        let mut caller = Caller {
            claim,
            connection: connection.clone(),
            done: false,
        };
        let handled = timeout_at(deadline, self.workers.handler(self).handle(ticket, request));
        let fault = match handled.await {
            Ok(Ok(_)) if over_limit.get() => return too_large(self.limits.max_body),
            Ok(Ok(response)) => {
                return response.map(|body| {
                    ResponseBody::Reused(ReusedBody {
                        inner: body,
                        caller,
                        app: self.clone(),
                        deadline: Box::pin(sleep_until(deadline)),
                        expired: false,
                    })
                });
            }
            Ok(Err(err)) => self.classify(err, verdict, deadline).await,
            // Not even a worker's expiry answered: the request never got an instance.
            Err(_) => Fault::WallTime {
                limit: self.limits.wall_time,
                started: caller.claim.instance.get().is_some(),
            },
        };
        // Answered (with its fault): whatever still holds the claim is not the
        // client's doing.
        caller.done = true;
        self.report(&fault);
        self.fault_response(&fault, over_limit.get())
    }

    /// The fault behind a request `ProxyHandler` failed.
    async fn classify(
        &self,
        err: wasmtime::Error,
        verdict: oneshot::Receiver<Option<Fault>>,
        deadline: Instant,
    ) -> Fault {
        if err.is::<ExpirationError>() {
            return Fault::WallTime {
                limit: self.limits.wall_time,
                started: true,
            };
        }
        if let Some(failed) = err.downcast_ref::<InstantiationError<Ticket>>() {
            return match failed.error.downcast_ref::<Failed>() {
                Some(Failed(fault)) => fault.clone(),
                None => Fault::Internal(one_line(&failed.error)),
            };
        }
        // The guest answered with an error code instead of a response.
        if let Some(code) = err.downcast_ref::<P3ErrorCode>() {
            return Fault::GuestError(format!("{code:?}"));
        }
        if let Some(code) = err.downcast_ref::<P2ErrorCode>() {
            return Fault::GuestError(format!("{code:?}"));
        }
        // Otherwise the error may be the request's own (a p2 handler that returned
        // without a response) or its instance's failure, which wasmtime reports to
        // each request the same way: the worker says which once it has moved on.
        match timeout_at(deadline, verdict).await {
            Ok(Ok(Some(fault))) => fault,
            Ok(Ok(None)) if !self.pre.is_p3() => Fault::NoResponse,
            Ok(Ok(None)) => Fault::GuestError(one_line(&err)),
            // Never taken by a worker, or the worker gone without a word.
            Ok(Err(_)) | Err(_) => Fault::Trap(one_line(&err)),
        }
    }
}

/// Whether a p2 app asked for more than one request per instance.
pub(super) fn reuses_p2_instances(limits: &super::limits::Limits) -> bool {
    limits.reuse.requests.is_some_and(|n| n > 1)
}

/// An HTTP/1.1 request's origin-form target made absolute from the listener's scheme
/// and the Host field: a p3 guest reads scheme and authority from the URI alone.
fn absolute(mut request: Request<WasiBody>, scheme: RequestScheme) -> Request<WasiBody> {
    if request.uri().scheme().is_some() {
        return request;
    }
    let authority = request
        .headers()
        .get(header::HOST)
        .and_then(|host| Authority::try_from(host.as_bytes()).ok());
    let Some(authority) = authority else {
        return request;
    };
    let mut parts = request.uri().clone().into_parts();
    parts.scheme = Some(match scheme {
        RequestScheme::Http => Scheme::HTTP,
        RequestScheme::Https => Scheme::HTTPS,
    });
    parts.authority = Some(authority);
    if parts.path_and_query.is_none() {
        parts.path_and_query = Some(PathAndQuery::from_static("/"));
    }
    if let Ok(uri) = Uri::from_parts(parts) {
        *request.uri_mut() = uri;
    }
    request
}

fn one_line(err: &wasmtime::Error) -> String {
    let text = format!("{err:#}");
    text.lines()
        .next()
        .unwrap_or_default()
        .chars()
        .take(300)
        .collect()
}

/// A request's deadline, its claim on the app and its instance, and how it is
/// told, once the request has ended, whether its instance lived on or failed.
struct Ticket {
    deadline: Instant,
    claim: Arc<Claim>,
    verdict: oneshot::Sender<Option<Fault>>,
}

/// What a request holds while anyone still works on it: the caller (until the
/// response body is done) and, once a worker took it, the worker (until the guest
/// answered), or, once the request expired, its instance (until the instance is
/// gone: wasmtime cannot stop an expired request's guest code). Holds the app's
/// admission slot and the request's share of its instance's CPU meter.
struct Claim {
    _slot: Slot,
    /// The instance that took the request: set once, by its worker.
    instance: OnceLock<Arc<Shared>>,
    /// Set once the client abandoned the request while its guest held the claim:
    /// counts against the client's connection until the claim is released.
    abandoned: OnceLock<AbandonedMark>,
}

/// The caller's hold on a request's claim: its handler future, then its response
/// body. Dropped before the response is done while anyone else still holds the
/// claim (the guest runs on), it counts the request as abandoned by its connection.
struct Caller {
    claim: Arc<Claim>,
    connection: Abandoned,
    /// The response is done (its body ended, or a fault answered it).
    done: bool,
}

impl Drop for Caller {
    fn drop(&mut self) {
        if !self.done && Arc::strong_count(&self.claim) > 1 {
            let _ = self.claim.abandoned.set(self.connection.mark());
        }
    }
}

impl Drop for Claim {
    fn drop(&mut self) {
        if let Some(shared) = self.instance.get() {
            shared.claims.fetch_sub(1, Ordering::AcqRel);
            shared.claim_released.wake();
        }
    }
}

/// A fault as an error, so that a failed instantiation keeps its cause through
/// `ProxyHandler` (which hands it back inside an `InstantiationError`).
#[derive(Debug)]
struct Failed(Fault);

impl std::fmt::Display for Failed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

impl std::error::Error for Failed {}

/// What one instance's worker and its requests share.
struct Shared {
    /// Claims of requests this instance took that are not released yet…
    claims: AtomicUsize,
    /// …those of them that expired, kept until the instance is gone…
    expired: Mutex<Vec<Arc<Claim>>>,
    /// …and the worker's expiry, woken when one is released.
    claim_released: AtomicWaker,
    /// The instance was dropped for being overdue (past the wall-clock limit).
    overdue: AtomicBool,
    /// Set once, when the instance is gone: `Some(fault)` if it failed.
    fate: OnceLock<Option<Fault>>,
    /// Requests ended since the worker last showed it lives on: each is told at the
    /// worker's next turn, `None` if it lives on, else its failure.
    ended: Mutex<Vec<oneshot::Sender<Option<Fault>>>>,
}

impl Shared {
    /// Why the instance failed, once it has.
    fn failure(&self) -> Option<Fault> {
        self.fate.get().cloned().flatten()
    }

    /// Whether all the instance still works on is expired requests' guest code: it
    /// has nothing left worth keeping it for.
    fn only_expired_left(&self) -> bool {
        let expired = lock(&self.expired).len();
        expired > 0 && self.claims.load(Ordering::Acquire) == expired
    }

    /// Tells the requests ended so far how their instance fared.
    fn settle(&self, fault: Option<&Fault>) {
        let ended = std::mem::take(&mut *lock(&self.ended));
        for verdict in ended {
            let _ = verdict.send(fault.cloned());
        }
    }
}

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

/// Makes an app's instances.
struct AppInstances {
    app: Weak<App>,
}

impl HandlerState for AppInstances {
    type StoreData = GuestState;
    type WorkerExpiration = Expiry;
    type WorkerState = InstanceState;

    async fn instantiate(&self) -> wasmtime::Result<Instance<GuestState, Expiry, InstanceState>> {
        let Some(app) = self.app.upgrade() else {
            return Err(Failed(Fault::Internal("the app version was unloaded".into())).into());
        };
        let mut store = new_store(
            app.pre.engine(),
            &app.output,
            &app.limits,
            &app.outbound,
            &app.vars,
            &app.keyvalue,
            None,
        );
        let running = app.metrics.instance();
        let deadline = Instant::now() + app.limits.wall_time;
        let Some(pre) = app.pre.either() else {
            let never = "a WAGI program's instance is never reused";
            return Err(Failed(Fault::Internal(never.into())).into());
        };
        let instantiated = timeout_at(deadline, pre.instantiate_async(&mut store));
        let proxy = match suspending(instantiated).await {
            Err(_) => {
                let limit = app.limits.wall_time;
                return Err(Failed(Fault::WallTime {
                    limit,
                    started: false,
                })
                .into());
            }
            Ok(Err(err)) => return Err(Failed(Fault::from_call_error(err, store.data())).into()),
            Ok(Ok(proxy)) => proxy,
        };
        store.data_mut().cpu.share_among_requests();
        let shared = Arc::new(Shared {
            claims: AtomicUsize::new(0),
            expired: Mutex::new(Vec::new()),
            claim_released: AtomicWaker::new(),
            overdue: AtomicBool::new(false),
            fate: OnceLock::new(),
            ended: Mutex::new(Vec::new()),
        });
        let reuse = &app.limits.reuse;
        let concurrency = if app.pre.is_p3() {
            reuse.concurrency
        } else {
            1
        };
        let requests = reuse.requests.unwrap_or(if app.pre.is_p3() {
            super::limits::DEFAULT_P3_INSTANCE_REUSE
        } else {
            1
        });
        Ok(Instance {
            store,
            proxy,
            view: <GuestState as WasiHttpView>::http,
            expiration: Expiry {
                wall_time: app.limits.wall_time,
                idle: reuse.idle,
                timer: Box::pin(sleep_until(Instant::now() + reuse.idle)),
                shared: shared.clone(),
            },
            state: InstanceState {
                concurrency: concurrency as usize,
                requests: requests as usize,
                app,
                shared,
                _running: running,
            },
        })
    }
}

/// One instance's policy: how many requests it takes, the CPU meter per request,
/// and what it leaves behind when it goes.
struct InstanceState {
    app: Arc<App>,
    /// Requests it serves at once, and in all.
    concurrency: usize,
    requests: usize,
    shared: Arc<Shared>,
    /// Counts the instance as running until the worker is gone.
    _running: Open,
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
        // A WASI 0.2 call leaves nothing running once it returned; a WASI 0.3 task
        // may (its body, work after the response), even one at a time.
        let one_at_a_time = !self.app.pre.is_p3();
        store.data_mut().admit_request(claim, one_at_a_time);
        self.shared.claims.fetch_add(1, Ordering::AcqRel);
        let _ = ticket.claim.instance.set(self.shared.clone());
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
            Err(err) => Some(Fault::from_call_error(err, store.data())),
        };
        if let Some(fault) = &fault {
            self.app.output.warn(format_args!(
                "instance dropped ({fault}); requests still on it fail"
            ));
        }
        // Told before the store goes: a body wasmtime ends when the store is dropped
        // must find the instance's failure already recorded.
        let _ = self.shared.fate.set(fault.clone());
        self.shared.settle(fault.as_ref());
        drop(store);
        // Only now, with the instance's memory back in the pool, may the requests
        // that expired on it give their slots back. (ProxyHandler calls this for
        // every worker, also one whose task panicked or was dropped, so this also
        // breaks the cycle the expired claims make back to `shared`.)
        lock(&self.shared.expired).clear();
    }
}

/// When a worker's instance goes, judged outside its event loop: idle past
/// `instance_idle` (a clean end), or past the wall-clock limit with requests or
/// post-return work still running (overdue: they fail).
struct Expiry {
    wall_time: std::time::Duration,
    idle: std::time::Duration,
    timer: Pin<Box<Sleep>>,
    shared: Arc<Shared>,
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

/// A reused instance's response body. wasmtime ends a body cleanly when the instance
/// behind it is dropped, trap or not, so its end counts as one only while the instance
/// has not failed (else the fault is reported for this request, as the fresh path
/// reports a fault after the head). The request's wall-clock deadline still runs:
/// the instance's own expiry counts from its latest request, so a busy instance
/// would let a body stream forever. The claim is held until the body is done.
pub struct ReusedBody {
    inner: WasiBody,
    caller: Caller,
    app: Arc<App>,
    deadline: Pin<Box<Sleep>>,
    expired: bool,
}

impl ReusedBody {
    fn failure(&self) -> Option<Fault> {
        self.caller
            .claim
            .instance
            .get()
            .and_then(|shared| shared.failure())
    }

    /// Ready once the response cannot complete: its instance failed, or its
    /// deadline passed (counted as this request's wall-time fault).
    pub(super) fn poll_cut_off(&mut self, cx: &mut Context<'_>) -> Poll<()> {
        if self.expired {
            return Poll::Ready(());
        }
        if let Some(fault) = self.failure() {
            self.expired = true;
            self.caller.done = true;
            self.app.report(&fault);
            return Poll::Ready(());
        }
        ready!(self.deadline.as_mut().poll(cx));
        let _ = self.expire();
        Poll::Ready(())
    }

    /// Ends the body at its deadline, as a fault of this request.
    fn expire(&mut self) -> Poll<Option<Result<Frame<Bytes>, BodyError>>> {
        self.expired = true;
        self.caller.done = true;
        let fault = Fault::WallTime {
            limit: self.app.limits.wall_time,
            started: true,
        };
        self.app.report(&fault);
        Poll::Ready(Some(Err(BodyError::Aborted(fault))))
    }
}

impl Body for ReusedBody {
    type Data = Bytes;
    type Error = BodyError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BodyError>>> {
        let this = &mut *self;
        if this.expired {
            return Poll::Ready(None);
        }
        if this.deadline.is_elapsed() {
            return this.expire();
        }
        let ended = match Pin::new(&mut this.inner).poll_frame(cx) {
            Poll::Ready(Some(Ok(frame))) => return Poll::Ready(Some(Ok(frame))),
            Poll::Ready(Some(Err(err))) => Some(err),
            Poll::Ready(None) => None,
            Poll::Pending => {
                ready!(this.deadline.as_mut().poll(cx));
                return this.expire();
            }
        };
        this.caller.done = true;
        // An end or an error after the instance failed is the failure's doing.
        match (this.failure(), ended) {
            (Some(fault), _) => {
                this.app.report(&fault);
                Poll::Ready(Some(Err(BodyError::Aborted(fault))))
            }
            (None, Some(err)) => Poll::Ready(Some(Err(BodyError::Guest(err)))),
            (None, None) => Poll::Ready(None),
        }
    }

    fn is_end_stream(&self) -> bool {
        !self.expired && self.inner.is_end_stream() && self.failure().is_none()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

impl Drop for ReusedBody {
    fn drop(&mut self) {
        // An engine that saw the end through `is_end_stream` polls no more.
        if self.is_end_stream() {
            self.caller.done = true;
        }
    }
}
