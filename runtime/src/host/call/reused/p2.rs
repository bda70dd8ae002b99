//! WASI 0.2 apps' reused instances, driven by wedge: each kept instance (a store
//! and its instantiated handler) serves one request at a time with the plain
//! `incoming-handler.handle` call of the fresh path, so it needs no
//! component-model concurrency and runs on the engine without it (`host::engine`),
//! which `ProxyHandler` cannot use: it drives every worker, p2 ones too, inside
//! `Store::run_concurrent`. Between requests an instance waits in its app's idle
//! pool (`idle`); it is dropped after `instance_reuse` requests, once idle for
//! `instance_idle`, or when a call fails (trap, a limit, its wall time).
//!
//! An HTTP/2 or HTTP/3 request's own task drives its call while it waits for the
//! response, an HTTP/1.1 request's call runs in a task of its own (`driven_call`,
//! `drives_inline` says why); either way the instance is taken when the call
//! starts, so an instance whose guest answers without parking is back in the pool
//! before the next call takes one: a burst of requests is served by one instance,
//! not one each.
//!
//! A request keeps the reused path's contract (`entry`): its claim on the app's
//! slot is held by its call until the guest returned and by the caller until the
//! response body is done; a call whose client left runs on; the CPU meter shares
//! the instance's time out per request.

use std::pin::Pin;
use std::sync::{Arc, Weak};
use std::task::Poll;

use http::uri::Scheme;
use http::{Request, Response, Version};
use tokio::sync::oneshot;
use tokio::time::Instant;
use wasmtime::Store;
use wasmtime_wasi_http::WasiBody;
use wasmtime_wasi_http::p2::bindings::Proxy;

use super::claim::{Claim, Shared};
use super::driven_call::{CallFailed, DrivenCall};
use crate::host::app::App;
use crate::host::call::fresh::body::{First, Outcome};
use crate::host::call::fresh::{call_handler, instantiate, put_request, unanswered_fault};
use crate::host::fault::Fault;
use crate::host::limits::host_memory::suspending;
use crate::host::request_body::IncomingBody;
use crate::host::store::GuestState;
use crate::metrics::Open;

/// A WASI 0.2 instance kept for its app's requests.
pub(crate) struct Kept {
    store: Store<GuestState>,
    proxy: Proxy,
    /// Requests it took so far.
    served: u32,
    shared: Arc<Shared>,
    /// Counts the instance as running while it is kept.
    _running: Open,
}

impl Kept {
    /// A new instance of the app, instantiated by `deadline`.
    async fn new(app: &App, deadline: Instant) -> Result<Kept, Fault> {
        let running = app.metrics.instance();
        let mut store = app.new_store(None);
        let proxy = suspending(instantiate(app, &mut store, deadline)).await?;
        store.data_mut().cpu.share_among_requests();
        Ok(Kept {
            store,
            proxy,
            served: 0,
            shared: Shared::new(),
            _running: running,
        })
    }

    /// Admits the request `claim` is for: its CPU share, and the claim counts as
    /// this instance's.
    fn admit(&mut self, claim: &Arc<Claim>) {
        let weak: Weak<dyn Send + Sync> = Arc::downgrade(claim) as Weak<Claim>;
        self.store.data_mut().admit_request(weak, true);
        self.shared.take(claim);
        self.served += 1;
    }

    /// Whether it may take another request (`instance_reuse`).
    fn has_room(&self, app: &App) -> bool {
        self.served < app.limits.reuse.requests.unwrap_or(1)
    }

    /// Drops the instance after its call failed with `fault`. One past its wall time
    /// goes quietly (its request's fault says it all), as an overdue one does.
    fn fail(self, app: &App, fault: &Fault) {
        if !matches!(fault, Fault::WallTime { .. }) {
            app.output.fault(format_args!(
                "instance dropped ({fault}); requests still on it fail"
            ));
        }
        self.shared.gone(Some(fault.clone()));
    }
}

/// Answers one request on a kept instance of `app` (a new one if none waits),
/// within `deadline`; `claim` is the request's, held by its call until the guest
/// returned. `scheme`: what the guest is told the request came with.
pub(super) async fn handle(
    app: &Arc<App>,
    request: Request<impl IncomingBody>,
    scheme: Scheme,
    deadline: Instant,
    claim: Arc<Claim>,
) -> Result<Response<WasiBody>, Fault> {
    let inline = drives_inline(&request);
    let (response_tx, mut response_rx) = oneshot::channel();
    let app = app.clone();
    // The instance is taken when the call starts, not before: calls that run one
    // after another (one connection's burst, or the tasks of one runtime turn)
    // are served by one instance, not one each.
    let call = async move {
        let mut instance = match app.workers.p2_idle.take() {
            Some(instance) => instance,
            None => Kept::new(&app, deadline).await?,
        };
        let (req, outparam) = match put_request(&mut instance.store, request, scheme, response_tx) {
            Ok(handles) => handles,
            Err(err) => {
                let fault = Fault::from_call_error(err, instance.store.data());
                instance.fail(&app, &fault);
                return Err(fault);
            }
        };
        instance.admit(&claim);
        let called = call_handler(
            &app,
            &instance.proxy,
            &mut instance.store,
            req,
            outparam,
            deadline,
        );
        let outcome = suspending(called).await;
        // A body the guest finished in its own call is all with the host; one it
        // still holds may yet be cut off by the instance's failure.
        if outcome.is_ok() && !instance.store.data_mut().holds_unfinished_body() {
            let _ = claim.body_finished.set(());
        }
        match &outcome {
            Ok(()) if instance.has_room(&app) => {
                let idle = app.limits.reuse.idle;
                app.workers.p2_idle.put(instance, idle);
            }
            Ok(()) => drop(instance),
            Err(fault) => instance.fail(&app, fault),
        }
        // Only now, with the instance back in the pool or gone, is the slot free.
        drop(claim);
        outcome
    };
    // Dropping `call` before it ended (the response came, or the client left)
    // leaves the rest of it to a task of its own.
    let mut call = DrivenCall::new(call, inline);
    match answered(&mut call, &mut response_rx).await {
        First::Response(Ok(Ok(response)), _) => Ok(response),
        First::Response(Ok(Err(code)), _) => Err(Fault::guest_error(&code)),
        First::Response(Err(_), Some(outcome)) | First::Ended(outcome) => {
            Err(unanswered_fault(outcome))
        }
        // The outparam was dropped unset: the call is ending.
        First::Response(Err(_), None) => Err(unanswered_fault(Ok(ended(call.await)))),
    }
}

/// Whether the request's own task drives its call, told from the request's HTTP
/// version (all the host knows of its protocol). Yes for HTTP/2 and HTTP/3,
/// whose engines stage what a turn's requests answered and write it at once: a
/// call done inline answers within the turn, with no task and no wake-up of its
/// own. Not for HTTP/1.1 (hyper), where an inline call measured 14 % more CPU a
/// request than one in a task of its own (BENCHMARKS.md, issue 20 (f) and (g));
/// likely because hyper writes each connection's answer at once, where a task
/// lets one turn of the runtime read many connections before their answers leave.
fn drives_inline<B>(request: &Request<B>) -> bool {
    matches!(request.version(), Version::HTTP_2 | Version::HTTP_3)
}

/// The call's outcome, or the fault of a call whose task panicked.
fn ended(outcome: Result<Outcome, CallFailed>) -> Outcome {
    outcome.unwrap_or_else(|CallFailed(err)| {
        Err(Fault::Internal(format!("the guest call failed: {err}")))
    })
}

/// Drives `call` until it ends or its response comes. Unlike `fresh`'s `first`,
/// the call is polled before the response is looked for: a call driven inline
/// that answers and returns within one poll (most do) finds no waker on its
/// response, so it wakes nobody (a wake of the request's own task would poll the
/// whole connection again).
async fn answered<R>(
    call: &mut DrivenCall<Outcome>,
    response_rx: &mut oneshot::Receiver<R>,
) -> First<R> {
    std::future::poll_fn(|cx| {
        if let Poll::Ready(outcome) = Pin::new(&mut *call).poll(cx) {
            let outcome = ended(outcome);
            return Poll::Ready(match response_rx.try_recv() {
                Ok(response) => First::Response(Ok(response), Some(Ok(outcome))),
                Err(_) => First::Ended(Ok(outcome)),
            });
        }
        Pin::new(&mut *response_rx)
            .poll(cx)
            .map(|response| First::Response(response, None))
    })
    .await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_http2_and_http3_calls_are_driven_inline() {
        let inline =
            |version| drives_inline(&Request::builder().version(version).body(()).unwrap());
        assert!(inline(Version::HTTP_2) && inline(Version::HTTP_3));
        assert!(!inline(Version::HTTP_11) && !inline(Version::HTTP_10));
    }
}
