//! A guest call driven either by the request that made it, on the request's own
//! task, or by a task of its own from the start; which one is the caller's choice
//! (`p2` says why it differs by protocol).
//!
//! Driven inline, the call runs for as long as the request waits for its response;
//! a call still running when the request lets go of it (the response came, or the
//! client left) runs on in a task of its own. A call that answers without parking
//! (most handlers) thus costs no task and no hop between tasks, and its instance is
//! free again before the next request on the connection is looked at.
//!
//! Either way a panic in the call ends the call alone: a spawned one's task
//! catches it, and an inline one is caught here, since the request's task may
//! drive other requests too (an HTTP/2 connection's, other apps' among them).

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::task::JoinHandle;

/// The call's future: boxed, so that what is left of it can move to a task.
type Call<T> = Pin<Box<dyn Future<Output = T> + Send>>;

/// A call driven inline or by its own task (see the module's doc).
pub(super) enum DrivenCall<T: Send + 'static> {
    /// Polled by whoever polls this, until it ends or this is dropped.
    Inline(Option<Call<T>>),
    /// Runs in its task; dropping this leaves it running.
    Spawned(JoinHandle<T>),
}

impl<T: Send + 'static> DrivenCall<T> {
    /// `call`, driven inline if `inline`, else spawned at once.
    pub(super) fn new(call: impl Future<Output = T> + Send + 'static, inline: bool) -> Self {
        match inline {
            true => DrivenCall::Inline(Some(Box::pin(call))),
            false => DrivenCall::Spawned(tokio::spawn(call)),
        }
    }
}

/// A call that panicked (or whose task was cancelled): what it said.
#[derive(Debug)]
pub(super) struct CallFailed(pub String);

impl<T: Send + 'static> Future for DrivenCall<T> {
    type Output = Result<T, CallFailed>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        match self.get_mut() {
            DrivenCall::Inline(slot) => {
                let call = slot.as_mut().expect("an inline call polled after it ended");
                let polled = catch_unwind(AssertUnwindSafe(|| call.as_mut().poll(cx)));
                let ended = match polled {
                    Ok(Poll::Pending) => return Poll::Pending,
                    Ok(Poll::Ready(ended)) => Ok(ended),
                    Err(panic) => Err(CallFailed(panic_message(&*panic))),
                };
                *slot = None;
                Poll::Ready(ended)
            }
            DrivenCall::Spawned(task) => Pin::new(task)
                .poll(cx)
                .map(|joined| joined.map_err(|err| CallFailed(err.to_string()))),
        }
    }
}

/// A panic's message, as the standard hook would print it.
fn panic_message(panic: &(dyn std::any::Any + Send)) -> String {
    let text = panic
        .downcast_ref::<&str>()
        .copied()
        .or_else(|| panic.downcast_ref::<String>().map(String::as_str))
        .unwrap_or("(no message)");
    format!("panicked: {text}")
}

impl<T: Send + 'static> Drop for DrivenCall<T> {
    fn drop(&mut self) {
        // Not on a runtime any more (it is shutting down): the call goes with it.
        if let DrivenCall::Inline(slot) = self
            && let Some(call) = slot.take()
            && let Ok(runtime) = tokio::runtime::Handle::try_current()
        {
            runtime.spawn(call);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::sync::oneshot;

    #[tokio::test]
    async fn a_call_that_ends_inline_leaves_no_task() {
        let tasks = tokio::runtime::Handle::current().metrics();
        let before = tasks.num_alive_tasks();
        assert_eq!(DrivenCall::new(async { 7 }, true).await.unwrap(), 7);
        assert_eq!(tasks.num_alive_tasks(), before);
    }

    #[tokio::test]
    async fn a_spawned_call_runs_in_a_task_of_its_own() {
        let tasks = tokio::runtime::Handle::current().metrics();
        let before = tasks.num_alive_tasks();
        let (go_tx, go_rx) = oneshot::channel::<()>();
        let call = DrivenCall::new(async move { go_rx.await.is_ok() }, false);
        assert_eq!(tasks.num_alive_tasks(), before + 1);
        go_tx.send(()).unwrap();
        assert!(call.await.unwrap());
    }

    #[tokio::test]
    async fn a_panic_in_a_call_ends_that_call_and_not_the_task_driving_it() {
        for inline in [true, false] {
            let call = DrivenCall::new(
                async {
                    if std::hint::black_box(true) {
                        panic!("a host bug");
                    }
                },
                inline,
            );
            let CallFailed(said) = call.await.expect_err("the call panicked");
            assert!(said.contains("panicked"), "{said}");
            // Still here: the request's task goes on to its next request.
            assert_eq!(DrivenCall::new(async { 1 }, inline).await.unwrap(), 1);
        }
    }

    #[tokio::test]
    async fn a_call_let_go_of_before_its_end_runs_on_in_a_task() {
        for inline in [true, false] {
            let (go_tx, go_rx) = oneshot::channel::<()>();
            let (ended_tx, ended_rx) = oneshot::channel();
            let mut call = DrivenCall::new(
                async move {
                    let _ = go_rx.await;
                    let _ = ended_tx.send(());
                },
                inline,
            );
            // Polled once (parked on `go`), then dropped: what is left runs on.
            assert!(futures_util::poll!(&mut call).is_pending());
            drop(call);
            go_tx.send(()).unwrap();
            ended_rx.await.expect("the rest of the call was dropped");
        }
    }
}
