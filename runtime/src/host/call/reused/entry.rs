//! A request's way onto a reused instance: handed with its deadline and its claim on
//! the app's admission slot to the app's `ProxyHandler` (WASI 0.3) or to wedge's own
//! driver (`p2`, WASI 0.2), and its failure told apart (the request's own, or its
//! instance's) once it failed.

use std::sync::{Arc, OnceLock};

use http::uri::Scheme;
use http::{Request, Response, StatusCode};
use http_body_util::BodyExt;
use tokio::sync::oneshot;
use tokio::time::{Instant, timeout_at};
use wasmtime_wasi_http::handler::{ExpirationError, InstantiationError, ProxyHandler};
use wasmtime_wasi_http::p3::bindings::http::types::ErrorCode;

use super::body::ReusedBody;
use super::claim::{Caller, Claim, Failed, Ticket};
use super::p2;
use crate::host::admission::{Abandoned, Slot};
use crate::host::app::{App, AppInstances};
use crate::host::fault::Fault;
use crate::host::request_body::{IncomingBody, LimitedBody, OverLimit};
use crate::host::response::{plain, too_large};
use crate::host::response_body::ResponseBody;

/// The app version's `ProxyHandler`, made on its first request.
fn handler(app: &Arc<App>) -> &ProxyHandler<AppInstances> {
    app.workers.p3.get_or_init(|| {
        ProxyHandler::new(AppInstances {
            app: Arc::downgrade(app),
        })
    })
}

/// Answers one admitted request on a reused instance. `slot` is held until the
/// response body is done or the request failed, and, once a worker took the
/// request, until its guest answered or the request expired: a client that
/// leaves early does not free the slot of a request still running.
pub(in crate::host::call) async fn serve<B: IncomingBody>(
    app: &Arc<App>,
    request: Request<LimitedBody<B>>,
    scheme: Scheme,
    slot: Slot,
    over_limit: OverLimit<B>,
    connection: &Abandoned,
) -> Response<ResponseBody> {
    // wasmtime refuses a p2 request without an authority once it is on its
    // instance, which would fail the instance: refuse it here instead.
    if !app.pre.is_p3() && request.uri().authority().is_none() {
        return plain(
            StatusCode::BAD_REQUEST,
            "bad request: no authority (Host)\n".into(),
        );
    }
    let deadline = Instant::now() + app.limits.wall_time;
    let claim = Arc::new(Claim {
        _slot: slot,
        instance: OnceLock::new(),
        abandoned: OnceLock::new(),
        body_finished: OnceLock::new(),
    });
    let (verdict_tx, verdict) = oneshot::channel();
    // Dropped before the response is done (the client left): the request counts
    // against its connection for as long as its guest still holds the claim.
    let mut caller = Caller {
        claim: claim.clone(),
        connection: connection.clone(),
        done: false,
    };
    let handled = async move {
        if !app.pre.is_p3() {
            let handled = p2::handle(app, request, scheme, deadline, claim).await;
            return handled.map_err(|fault| Failed(fault).into());
        }
        let ticket = Ticket {
            deadline,
            claim,
            verdict: verdict_tx,
        };
        // The engines made its URI absolute: a p3 guest reads scheme and
        // authority from the URI alone.
        let request = request.map(|body| body.boxed_unsync());
        handler(app).handle(ticket, request).await
    };
    let fault = match timeout_at(deadline, handled).await {
        Ok(Ok(_)) if over_limit.get() => return too_large(app.limits.max_body),
        Ok(Ok(response)) => {
            return response.map(|body| {
                ResponseBody::bound(ReusedBody::new(body, caller, app.clone(), deadline))
            });
        }
        Ok(Err(err)) => classify(app, err, verdict, deadline).await,
        // Not even a worker's expiry answered: the request never got an instance.
        Err(_) => Fault::WallTime {
            limit: app.limits.wall_time,
            started: caller.claim.instance.get().is_some(),
        },
    };
    // Answered (with its fault): whatever still holds the claim is not the
    // client's doing.
    caller.done = true;
    app.report(&fault);
    app.fault_response(&fault, over_limit.get())
}

/// The fault behind a request that failed: `p2` says which itself; for
/// `ProxyHandler` it is told from what it returned.
async fn classify(
    app: &App,
    err: wasmtime::Error,
    verdict: oneshot::Receiver<Option<Fault>>,
    deadline: Instant,
) -> Fault {
    if let Some(Failed(fault)) = err.downcast_ref::<Failed>() {
        return fault.clone();
    }
    if err.is::<ExpirationError>() {
        return Fault::WallTime {
            limit: app.limits.wall_time,
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
    if let Some(code) = err.downcast_ref::<ErrorCode>() {
        return Fault::guest_error(code);
    }
    // Otherwise the error may be the request's own or its instance's failure,
    // which wasmtime reports to each request the same way: the worker says which
    // once it has moved on.
    match timeout_at(deadline, verdict).await {
        Ok(Ok(Some(fault))) => fault,
        Ok(Ok(None)) => Fault::GuestError(one_line(&err)),
        // Never taken by a worker, or the worker gone without a word.
        Ok(Err(_)) | Err(_) => Fault::Trap(one_line(&err)),
    }
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
