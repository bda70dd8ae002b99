//! Where a request enters the guest: its declared size and the app's admission
//! checked, its body limited, then a fresh instance for it (`fresh`), a reused one
//! (`reused`), or a WAGI program's run (`wagi`). What the frontend adds to a request
//! for the guest ([`BASE_PATH`], [`ClientAddr`]) is named here.

pub(crate) mod fresh;
mod reused;
mod wagi;

pub(crate) use reused::{Idle, Kept, Retired};

use std::sync::Arc;

use http::uri::Scheme;
use http::{HeaderName, Request, Response, StatusCode, header};

use super::admission::{Abandoned, Refused};
use super::app::{App, Pre};
use super::fault::Fault;
use super::request_body::{IncomingBody, LimitedBody};
use super::response::too_large;
use super::response_body::ResponseBody;

/// The request field that tells an app the path prefix of the route that reached it
/// (`/api` for an app on `/api`; absent on `/`). The path itself is left whole. The
/// frontend sets it (dropping a client's own); a WAGI program gets it as `SCRIPT_NAME`.
pub const BASE_PATH: HeaderName = HeaderName::from_static("x-wedge-base-path");

/// Where a request's connection comes from (an extension the frontend sets on each
/// request it hands an app; a WAGI program's `REMOTE_ADDR`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClientAddr(pub std::net::SocketAddr);

/// Runs `app`'s handler for one request: in a fresh instance, or in a reused one
/// when the app reuses instances. `scheme`: what a fresh instance's guest is told
/// the request came with. `connection`: the requests the client connection
/// abandoned that still run.
pub async fn handle(
    app: &Arc<App>,
    request: Request<impl IncomingBody>,
    scheme: Scheme,
    connection: &Abandoned,
) -> Response<ResponseBody> {
    let response = run(app, request, scheme, connection).await;
    // A 1xx is no final answer: sent as one it breaks the exchange (over HTTP/2 a
    // client may close the whole connection, other apps' streams on it too), so it
    // is the guest's fault like any wrong answer.
    if response.status().is_informational() {
        return informational_answer(app, response.status());
    }
    response
}

/// The answer to a guest whose final response had a 1xx status: its fault.
fn informational_answer(app: &App, status: StatusCode) -> Response<ResponseBody> {
    let fault = Fault::GuestError(format!(
        "status {} is informational, not a final response",
        status.as_u16()
    ));
    app.report(&fault);
    app.fault_response(&fault, false)
}

async fn run(
    app: &Arc<App>,
    request: Request<impl IncomingBody>,
    scheme: Scheme,
    connection: &Abandoned,
) -> Response<ResponseBody> {
    if let Some(len) = content_length(&request)
        && len > app.limits.max_body
    {
        return too_large(app.limits.max_body);
    }
    // Only a reused instance keeps running a request its client abandoned: a
    // fresh one is stopped with the call.
    let reuses = app.reuses_instances();
    if reuses && connection.count() >= app.admission.limits().max_abandoned_per_connection {
        return app.busy(Refused::Abandoned);
    }
    let slot = match app.admission.enter().await {
        Ok(slot) => slot,
        Err(refused) => return app.busy(refused),
    };
    let (parts, body) = request.into_parts();
    let (body, body_exceeded) = LimitedBody::new(body, app.limits.max_body, app.metrics.clone());
    let request = Request::from_parts(parts, body);
    if let Pre::Wagi(program) = &app.pre {
        return wagi::serve(app, program, request, scheme, slot, body_exceeded).await;
    }
    match reuses {
        true => reused::serve(app, request, scheme, slot, body_exceeded, connection).await,
        false => fresh::serve(app, request, scheme, slot, body_exceeded).await,
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
