//! WAGI: CGI (RFC 3875) over WASI preview 1's stdio. A WAGI app's program (a
//! preview 1 command module, made a `wasi:cli/command` component on load) runs once
//! per request in a fresh instance with the app's limits, as any guest call does: the
//! request head is its environment (`cgi_env`), the request body its stdin (`stdin`,
//! read from the client as the program reads it, bounded by `max_body`), and its
//! stdout the response (`stdout`: a CGI head, `cgi_head`, then the body, streamed to
//! the client as it is written). Its stderr goes to the app's log like any guest's.
//! No filesystem, no sockets: WASI is linked with nothing granted.

mod cgi_env;
mod cgi_head;
mod stdin;
mod stdout;

use std::sync::Arc;

use http::uri::Scheme;
use http::{Request, Response};
use http_body_util::BodyExt;
use tokio::sync::oneshot;
use tokio::time::{Instant, timeout_at};
use wasmtime::Store;
use wasmtime_wasi::p2::bindings::CommandPre;

use stdin::BodyStdin;
use stdout::{CgiResponse, CgiStdout, OutputBounds};

use super::fresh::body::{First, GuestBody, Outcome, delivered, first};
use super::fresh::{CallGuard, unanswered};
use crate::host::admission::Slot;
use crate::host::app::App;
use crate::host::fault::Fault;
use crate::host::limits::host_memory::suspending;
use crate::host::request_body::{IncomingBody, LimitedBody, OverLimit};
use crate::host::response::too_large;
use crate::host::response_body::ResponseBody;
use crate::host::store::{GuestState, ProgramStdio};

/// Runs the app's WAGI program for one admitted request (`slot` held until the
/// program is done), its body `over_limit` past `max_body`.
pub(super) async fn serve<B: IncomingBody>(
    app: &Arc<App>,
    program: &CommandPre<GuestState>,
    request: Request<LimitedBody<B>>,
    scheme: Scheme,
    slot: Slot,
    over_limit: OverLimit<B>,
) -> Response<ResponseBody> {
    let (head, body) = request.into_parts();
    let bounds = OutputBounds {
        max_head: usize::try_from(app.limits.max_cgi_head).unwrap_or(usize::MAX),
        queue: usize::try_from(app.limits.cgi_output_buffer).unwrap_or(usize::MAX),
    };
    let (stdout, response) = CgiStdout::new(head.method == http::Method::HEAD, bounds);
    let CgiResponse {
        head: mut head_rx,
        body: response_body,
    } = response;
    // The CGI variables and the app's own.
    let stdio = ProgramStdio {
        env: cgi_env::variables(&head, &scheme, &app.vars.env),
        stdin: Box::new(BodyStdin::new(body)),
        stdout: Box::new(stdout.clone()),
    };
    let mut store = app.new_store(Some(stdio));
    let (outcome_tx, mut outcome_rx) = oneshot::channel::<Outcome>();
    let (call_app, program) = (app.clone(), program.clone());
    // The program's and its response body's: the body is cut off at the same time.
    let deadline = Instant::now() + app.limits.wall_time;
    let call = tokio::spawn(async move {
        // The instance holds its slot until the program ended and the store is gone.
        let _slot = slot;
        let _running = call_app.metrics.instance();
        let ran = suspending(run_program(&call_app, &program, &mut store, deadline)).await;
        // Its output ends with it, whatever ended it; a whole response only if it
        // ran to its end.
        let ended = stdout.end().map_err(|bad| Fault::MalformedCgi(bad.0));
        let outcome = ran.and(ended);
        if let Err(fault) = &outcome {
            call_app.report(fault);
        }
        let _ = outcome_tx.send(outcome);
    });
    let call = CallGuard::new(call, app.output.clone());
    // The head wins when both are in: a program that wrote its head and then failed
    // has its head sent and its body aborted.
    let (head, outcome_rx) = match first(&mut head_rx, &mut outcome_rx).await {
        First::Response(Ok(head), None) => (head, outcome_rx),
        First::Response(Ok(head), Some(outcome)) => (head, delivered(outcome)),
        // The program's output ended without a head: its fault says why.
        First::Response(Err(_), Some(outcome)) | First::Ended(outcome) => {
            return app.fault_response(&unanswered(app, outcome), over_limit.get());
        }
        First::Response(Err(_), None) => {
            let outcome = outcome_rx.await;
            return app.fault_response(&unanswered(app, outcome), over_limit.get());
        }
    };
    if over_limit.get() {
        return too_large(app.limits.max_body);
    }
    let body = response_body.map_err(|never| match never {}).boxed_unsync();
    let mut response = Response::new(ResponseBody::bound(GuestBody::new(
        body, outcome_rx, call, deadline,
    )));
    *response.status_mut() = head.status;
    *response.headers_mut() = head.headers;
    response
}

/// Instantiates the program and runs its `main` to its end, bounded by the
/// wall-clock deadline; the store's epoch callback bounds CPU time. `exit(0)` is a
/// normal end; a failure fails the request.
async fn run_program(
    app: &App,
    program: &CommandPre<GuestState>,
    store: &mut Store<GuestState>,
    deadline: Instant,
) -> Outcome {
    let instantiated = timeout_at(deadline, program.instantiate_async(&mut *store)).await;
    let command = match instantiated {
        Err(_) => {
            return Err(Fault::WallTime {
                limit: app.limits.wall_time,
                started: false,
            });
        }
        Ok(Err(err)) => return Err(Fault::from_call_error(err, store.data())),
        Ok(Ok(command)) => command,
    };
    let run = command.wasi_cli_run().call_run(&mut *store);
    match timeout_at(deadline, run).await {
        Err(_) => Err(Fault::WallTime {
            limit: app.limits.wall_time,
            started: true,
        }),
        Ok(Ok(Ok(()))) => Ok(()),
        Ok(Ok(Err(()))) => Err(Fault::Exited),
        // `wasi:cli/exit`'s failure is `I32Exit(1)` whatever status the program
        // gave (`exit-with-code` is not linked): the 1 is wasmtime's, not its.
        Ok(Err(err)) => match err.downcast_ref::<wasmtime_wasi::I32Exit>() {
            Some(wasmtime_wasi::I32Exit(0)) => Ok(()),
            Some(wasmtime_wasi::I32Exit(_)) => Err(Fault::Exited),
            None => Err(Fault::from_call_error(err, store.data())),
        },
    }
}
