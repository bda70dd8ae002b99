//! The bridge every protocol engine calls: a request head and body go in, a
//! response head and a streamed body come out. Engines never see wasm; the
//! guest never sees frames.

use std::sync::Arc;

use bytes::Bytes;
use http::{Request, Response, StatusCode, header};
use http_body::Body;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;
use tokio::time::{Instant, timeout_at};
use wasmtime::Store;
use wasmtime::component::Resource;
use wasmtime_wasi_http::WasiHttpView;
use wasmtime_wasi_http::p2::bindings::Proxy;
use wasmtime_wasi_http::p2::bindings::http::types::{ErrorCode, Scheme};
use wasmtime_wasi_http::p2::body::HyperOutgoingBody;
use wasmtime_wasi_http::p2::types::{HostIncomingRequest, HostResponseOutparam};

use super::admission::{Abandoned, Refused};
use super::app::{App, Pre};
use super::body::{First, GuestBody, LimitedBody, Outcome, ResponseBody, delivered, first};
use super::fault::Fault;
use super::guest_log::GuestOutput;
use super::limits::host_memory::suspending;
use super::store::{GuestState, new_store};

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

/// Where a request's connection comes from (an extension the frontend sets on each
/// request it hands an app; a WAGI program's `REMOTE_ADDR`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClientAddr(pub std::net::SocketAddr);

/// Whether the request arrived over TLS, as the guest sees it.
#[derive(Debug, Clone, Copy)]
pub enum RequestScheme {
    Http,
    Https,
}

impl App {
    /// Runs the app's handler for one request: in a fresh instance, or in a
    /// reused one when the app reuses instances.
    /// `connection`: the requests the client connection abandoned that still run.
    pub async fn handle<B>(
        self: &Arc<Self>,
        request: Request<B>,
        scheme: RequestScheme,
        connection: &Abandoned,
    ) -> Response<ResponseBody>
    where
        B: Body<Data = Bytes> + Send + Unpin + 'static,
        B::Error: Into<wasmtime_wasi_http::Error>,
    {
        if let Some(len) = content_length(&request)
            && len > self.limits.max_body
        {
            return too_large(self.limits.max_body);
        }
        // Only a reused instance keeps running a request its client abandoned: a
        // fresh one is stopped with the call.
        let reuses = self.reuses_instances();
        if reuses && connection.count() >= self.admission.limits().max_abandoned_per_connection {
            return self.busy(Refused::Abandoned);
        }
        let slot = match self.admission.enter().await {
            Ok(slot) => slot,
            Err(refused) => return self.busy(refused),
        };
        let (parts, body) = request.into_parts();
        let (body, body_exceeded) =
            LimitedBody::new(body, self.limits.max_body, self.metrics.clone());
        let request = Request::from_parts(parts, body);
        if let Pre::Wagi(program) = &self.pre {
            return self
                .handle_wagi(program, request, scheme, slot, body_exceeded)
                .await;
        }
        if reuses {
            return self
                .handle_reused(request, scheme, slot, body_exceeded, connection)
                .await;
        }

        let GuestCall {
            mut store,
            req,
            outparam,
            response_rx,
        } = match self.prepare_call(request, scheme) {
            Ok(call) => call,
            Err(err) => {
                return plain(StatusCode::BAD_REQUEST, format!("bad request: {err}\n"));
            }
        };

        let (outcome_tx, mut outcome_rx) = oneshot::channel::<Outcome>();
        let app = self.clone();
        // The call's and its response body's: the body is cut off at the same time.
        let deadline = Instant::now() + self.limits.wall_time;
        let call = tokio::spawn(async move {
            // The instance holds its slot until the call returned and the store is gone.
            let _slot = slot;
            let _running = app.metrics.instance();
            let outcome = suspending(run_guest(&app, &mut store, req, outparam, deadline)).await;
            if let Err(fault) = &outcome {
                app.report(fault);
            }
            let _ = outcome_tx.send(outcome);
        });
        let call = CallGuard::new(call, self.output.clone());

        // Prefer the response when both are ready: a guest that sets its
        // response and then traps must still have its head sent (and its body
        // aborted), not be answered with a 500.
        let mut response_rx = response_rx;
        let (response, outcome_rx) = match first(&mut response_rx, &mut outcome_rx).await {
            First::Response(response, None) => (response, outcome_rx),
            First::Response(response, Some(outcome)) => (response, delivered(outcome)),
            First::Ended(outcome) => {
                return self.fault_response(&self.unanswered(outcome), body_exceeded.get());
            }
        };
        match response {
            Ok(Ok(response)) if !body_exceeded.get() => response.map(|body: HyperOutgoingBody| {
                ResponseBody::Guest(GuestBody::new(body, outcome_rx, call, deadline))
            }),
            Ok(Ok(_)) => too_large(self.limits.max_body),
            Ok(Err(code)) => {
                let fault = Fault::GuestError(describe_error_code(&code));
                self.report(&fault);
                self.fault_response(&fault, body_exceeded.get())
            }
            Err(_) => {
                // The outparam was dropped unset: the call has ended.
                let outcome = outcome_rx.await;
                self.fault_response(&self.unanswered(outcome), body_exceeded.get())
            }
        }
    }

    /// A new store holding the request and the outparam its response comes through.
    pub(crate) fn prepare_call<B>(
        &self,
        request: Request<B>,
        scheme: RequestScheme,
    ) -> wasmtime::Result<GuestCall>
    where
        B: Body<Data = Bytes> + Send + 'static,
        B::Error: Into<wasmtime_wasi_http::Error>,
    {
        let mut store = new_store(
            self.pre.engine(),
            &self.output,
            &self.limits,
            &self.outbound,
            &self.vars,
            &self.keyvalue,
            None,
        );
        let scheme = match scheme {
            RequestScheme::Http => Scheme::Http,
            RequestScheme::Https => Scheme::Https,
        };
        let (response_tx, response_rx) = oneshot::channel();
        let mut http = store.data_mut().http();
        let req = http.new_incoming_request(scheme, request)?;
        let outparam = http.new_response_outparam(response_tx)?;
        Ok(GuestCall {
            store,
            req,
            outparam,
            response_rx,
        })
    }

    /// 503 for a request no instance slot was found for; `Retry-After` tells
    /// clients to back off rather than retry at once.
    fn busy(&self, refused: Refused) -> Response<ResponseBody> {
        self.metrics.refused();
        let limits = self.admission.limits();
        let why = match refused {
            Refused::QueueFull => format!("{} requests already wait", limits.queue),
            Refused::TimedOut => format!("none came free within {:?}", limits.queue_timeout),
            Refused::Abandoned => {
                // The client's doing, as often as it likes: not worth a line each.
                tracing::debug!(
                    "app `{}`: request refused: its connection abandoned {} requests \
                     still running (max_abandoned_per_connection)",
                    self.name,
                    limits.max_abandoned_per_connection
                );
                let text = "503 Service Unavailable: this connection abandoned too many \
                            requests that still run; retry later\n";
                return retry_later(plain(StatusCode::SERVICE_UNAVAILABLE, text.into()));
            }
        };
        self.output.warn(format_args!(
            "request refused: all {} instances busy and {why}",
            limits.max_concurrent
        ));
        retry_later(plain(
            StatusCode::SERVICE_UNAVAILABLE,
            format!("503 Service Unavailable: the app is busy ({why}); retry later\n"),
        ))
    }

    /// The fault of a call that ended without a response. Faults of the call
    /// itself were logged by the call; the ones only visible here are logged now.
    pub(super) fn unanswered(&self, outcome: Result<Outcome, oneshot::error::RecvError>) -> Fault {
        let fault = match outcome {
            Ok(Err(fault)) => return fault,
            Ok(Ok(())) => Fault::NoResponse,
            Err(_) => Fault::Internal("the guest call ended without reporting".into()),
        };
        self.report(&fault);
        fault
    }

    /// Logs a fault with the app's name and counts it.
    pub(super) fn report(&self, fault: &Fault) {
        self.output.warn(format_args!("{fault}"));
        self.metrics.fault(fault.kind());
    }

    /// The answer to a guest whose final response had a 1xx status: its fault.
    pub(super) fn informational_answer(&self, status: StatusCode) -> Response<ResponseBody> {
        let fault = Fault::GuestError(format!(
            "status {} is informational, not a final response",
            status.as_u16()
        ));
        self.report(&fault);
        self.fault_response(&fault, false)
    }

    pub(super) fn fault_response(
        &self,
        fault: &Fault,
        body_exceeded: bool,
    ) -> Response<ResponseBody> {
        if body_exceeded {
            return too_large(self.limits.max_body);
        }
        let status = fault.status();
        let reason = status.canonical_reason().unwrap_or("error");
        if *fault == Fault::PoolExhausted {
            return retry_later(plain(
                status,
                format!(
                    "{} {reason}: the host is busy; retry later\n",
                    status.as_u16()
                ),
            ));
        }
        plain(
            status,
            format!("{} {reason}: the handler failed\n", status.as_u16()),
        )
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

fn content_length<B>(request: &Request<B>) -> Option<u64> {
    request
        .headers()
        .get(header::CONTENT_LENGTH)?
        .to_str()
        .ok()?
        .parse()
        .ok()
}

pub(super) fn too_large(limit: u64) -> Response<ResponseBody> {
    plain(
        StatusCode::PAYLOAD_TOO_LARGE,
        format!("413 Payload Too Large: the request body limit is {limit} bytes\n"),
    )
}

/// `Retry-After: 1`: tells clients to back off rather than retry at once.
fn retry_later(mut response: Response<ResponseBody>) -> Response<ResponseBody> {
    response
        .headers_mut()
        .insert(header::RETRY_AFTER, http::HeaderValue::from_static("1"));
    response
}

/// A response wedge writes itself.
pub fn plain(status: StatusCode, text: String) -> Response<ResponseBody> {
    let mut response = Response::new(ResponseBody::text(text));
    *response.status_mut() = status;
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        http::HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    response
}

fn describe_error_code(code: &ErrorCode) -> String {
    format!("{code:?}")
}
