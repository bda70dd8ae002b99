//! A guest call driven either by the request that made it, on the request's own
//! task, or by a task of its own from the start; which one is the caller's choice
//! (`p2` says why it differs by protocol).
//!
//! Driven inline, the call runs for as long as the request waits for its response;
//! a call still running when the request lets go of it (the response came, or the
//! client left) runs on in a task of its own. A call that answers without parking
//! (most handlers) thus costs no task and no hop between tasks, and its instance is
//! free again before the next request on the connection is looked at.

use std::pin::Pin;
use std::task::{Context, Poll, ready};

use tokio::task::{JoinError, JoinHandle};

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

impl<T: Send + 'static> Future for DrivenCall<T> {
    /// `Err`: the call's task panicked or was cancelled.
    type Output = Result<T, JoinError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        match self.get_mut() {
            DrivenCall::Inline(slot) => {
                let call = slot.as_mut().expect("an inline call polled after it ended");
                let ended = ready!(call.as_mut().poll(cx));
                *slot = None;
                Poll::Ready(Ok(ended))
            }
            DrivenCall::Spawned(task) => Pin::new(task).poll(cx),
        }
    }
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
