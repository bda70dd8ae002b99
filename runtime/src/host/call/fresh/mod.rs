//! A request on a fresh instance: a new store holding the request, the app
//! instantiated in it, its handler called, and the guest's response body streamed
//! until the call is done. Dropping the response (the peer went away) stops the call.

pub(super) mod body;

use std::sync::Arc;

use http::uri::Scheme;
use http::{Request, Response, StatusCode};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;
use tokio::time::{Instant, timeout_at};
use wasmtime::Store;
use wasmtime::component::Resource;
use wasmtime_wasi_http::WasiHttpView;
use wasmtime_wasi_http::p2::bindings::Proxy;
use wasmtime_wasi_http::p2::bindings::http::types::{ErrorCode, Scheme as GuestScheme};
use wasmtime_wasi_http::p2::body::HyperOutgoingBody;
use wasmtime_wasi_http::p2::types::{HostIncomingRequest, HostResponseOutparam};

use crate::host::admission::Slot;
use crate::host::app::App;
use crate::host::fault::Fault;
use crate::host::guest_log::GuestOutput;
use crate::host::limits::host_memory::suspending;
use crate::host::request_body::{IncomingBody, LimitedBody, OverLimit};
use crate::host::response::{plain, too_large};
use crate::host::response_body::ResponseBody;
use crate::host::store::GuestState;
use body::{First, GuestBody, Outcome, OutcomeReceived, delivered, first};

/// Aborts the guest call when the response (or its body) is dropped before
/// the call finished, e.g. because the peer went away.
pub(crate) struct CallGuard {
    call: JoinHandle<()>,
    /// Where a body cut short is logged: the app's log budget.
    pub(crate) log: Arc<GuestOutput>,
}

impl CallGuard {
    pub(crate) fn new(call: JoinHandle<()>, log: Arc<GuestOutput>) -> Self {
        CallGuard { call, log }
    }
}

impl Drop for CallGuard {
    fn drop(&mut self) {
        self.call.abort();
    }
}

/// One request's store and the guest-side handles its call takes.
pub(crate) struct GuestCall {
    pub(crate) store: Store<GuestState>,
    pub(crate) req: Resource<HostIncomingRequest>,
    pub(crate) outparam: Resource<HostResponseOutparam>,
    /// Where the guest's response (or its error code) arrives.
    pub(crate) response_rx: oneshot::Receiver<Result<Response<HyperOutgoingBody>, ErrorCode>>,
}

/// Answers one admitted request on a fresh instance. `slot` is held until the call
/// returned and its store is gone.
pub(super) async fn serve<B: IncomingBody>(
    app: &Arc<App>,
    request: Request<LimitedBody<B>>,
    scheme: Scheme,
    slot: Slot,
    body_exceeded: OverLimit<B>,
) -> Response<ResponseBody> {
    let GuestCall {
        mut store,
        req,
        outparam,
        response_rx,
    } = match prepare(app, request, scheme) {
        Ok(call) => call,
        Err(err) => {
            return plain(StatusCode::BAD_REQUEST, format!("bad request: {err}\n"));
        }
    };

    let (outcome_tx, mut outcome_rx) = oneshot::channel::<Outcome>();
    let call_app = app.clone();
    // The call's and its response body's: the body is cut off at the same time.
    let deadline = Instant::now() + app.limits.wall_time;
    let call = tokio::spawn(async move {
        // The instance holds its slot until the call returned and the store is gone.
        let _slot = slot;
        let _running = call_app.metrics.instance();
        let running = run_guest(&call_app, &mut store, req, outparam, deadline);
        let outcome = suspending(running).await;
        if let Err(fault) = &outcome {
            call_app.report(fault);
        }
        let _ = outcome_tx.send(outcome);
    });
    let call = CallGuard::new(call, app.output.clone());

    // Prefer the response when both are ready: a guest that sets its
    // response and then traps must still have its head sent (and its body
    // aborted), not be answered with a 500.
    let mut response_rx = response_rx;
    let (response, outcome_rx) = match first(&mut response_rx, &mut outcome_rx).await {
        First::Response(response, None) => (response, outcome_rx),
        First::Response(response, Some(outcome)) => (response, delivered(outcome)),
        First::Ended(outcome) => {
            return app.fault_response(&unanswered(app, outcome), body_exceeded.get());
        }
    };
    match response {
        Ok(Ok(response)) if !body_exceeded.get() => response.map(|body: HyperOutgoingBody| {
            ResponseBody::bound(GuestBody::new(body, outcome_rx, call, deadline))
        }),
        Ok(Ok(_)) => too_large(app.limits.max_body),
        Ok(Err(code)) => {
            let fault = Fault::guest_error(&code);
            app.report(&fault);
            app.fault_response(&fault, body_exceeded.get())
        }
        Err(_) => {
            // The outparam was dropped unset: the call has ended.
            let outcome = outcome_rx.await;
            app.fault_response(&unanswered(app, outcome), body_exceeded.get())
        }
    }
}

/// A new store holding the request and the outparam its response comes through.
pub(crate) fn prepare(
    app: &App,
    request: Request<impl IncomingBody>,
    scheme: Scheme,
) -> wasmtime::Result<GuestCall> {
    let mut store = app.new_store(None);
    let (response_tx, response_rx) = oneshot::channel();
    let (req, outparam) = put_request(&mut store, request, scheme, response_tx)?;
    Ok(GuestCall {
        store,
        req,
        outparam,
        response_rx,
    })
}

/// Where a guest's response (or its error code) is sent.
pub(crate) type ResponseTx = oneshot::Sender<Result<Response<HyperOutgoingBody>, ErrorCode>>;

/// Puts the request, and the outparam its response comes through to `response_tx`,
/// in `store` (a fresh one, or a reused instance's).
pub(crate) fn put_request(
    store: &mut Store<GuestState>,
    request: Request<impl IncomingBody>,
    scheme: Scheme,
    response_tx: ResponseTx,
) -> wasmtime::Result<(
    Resource<HostIncomingRequest>,
    Resource<HostResponseOutparam>,
)> {
    // What the guest is told its request came with: its connection's scheme.
    let scheme = match scheme == Scheme::HTTPS {
        true => GuestScheme::Https,
        false => GuestScheme::Http,
    };
    let mut http = store.data_mut().http();
    let req = http.new_incoming_request(scheme, request)?;
    let outparam = http.new_response_outparam(response_tx)?;
    Ok((req, outparam))
}

/// The fault of a call that ended without a response. Faults of the call
/// itself were logged by the call; the ones only visible here are logged now.
pub(in crate::host::call) fn unanswered(app: &App, outcome: OutcomeReceived) -> Fault {
    let of_the_call = matches!(outcome, Ok(Err(_)));
    let fault = unanswered_fault(outcome);
    if !of_the_call {
        app.report(&fault);
    }
    fault
}

/// The fault of a call that ended without a response, as its outcome says.
pub(in crate::host::call) fn unanswered_fault(outcome: OutcomeReceived) -> Fault {
    match outcome {
        Ok(Err(fault)) => fault,
        Ok(Ok(())) => Fault::NoResponse,
        Err(_) => Fault::Internal("the guest call ended without reporting".into()),
    }
}

/// Instantiates the app and runs its handler, bounded by the wall-clock
/// deadline; the store's epoch callback bounds CPU time.
async fn run_guest(
    app: &App,
    store: &mut Store<GuestState>,
    req: Resource<HostIncomingRequest>,
    outparam: Resource<HostResponseOutparam>,
    deadline: Instant,
) -> Outcome {
    let proxy = instantiate(app, store, deadline).await?;
    call_handler(app, &proxy, store, req, outparam, deadline).await
}

/// A fresh instance of the app in `store`.
pub(crate) async fn instantiate(
    app: &App,
    store: &mut Store<GuestState>,
    deadline: Instant,
) -> Result<Proxy, Fault> {
    match timeout_at(deadline, app.pre.instantiate_async(&mut *store)).await {
        Err(_) => Err(Fault::WallTime {
            limit: app.limits.wall_time,
            started: false,
        }),
        Ok(Err(err)) => Err(Fault::from_call_error(err, store.data())),
        Ok(Ok(proxy)) => Ok(proxy),
    }
}

/// Calls the instance's `incoming-handler.handle` until it returns.
pub(crate) async fn call_handler(
    app: &App,
    proxy: &Proxy,
    store: &mut Store<GuestState>,
    req: Resource<HostIncomingRequest>,
    outparam: Resource<HostResponseOutparam>,
    deadline: Instant,
) -> Outcome {
    let call = proxy
        .wasi_http_incoming_handler()
        .call_handle(&mut *store, req, outparam);
    match timeout_at(deadline, call).await {
        Err(_) => Err(Fault::WallTime {
            limit: app.limits.wall_time,
            started: true,
        }),
        Ok(Err(err)) => Err(Fault::from_call_error(err, store.data())),
        Ok(Ok(())) => Ok(()),
    }
}
