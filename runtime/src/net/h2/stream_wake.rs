//! Which streams a pass polls: each stream's handler and body are polled with a waker
//! of the stream's own, which marks the stream and wakes the connection's task, so a
//! pass polls the streams that were woken rather than every stream of the connection.
//! Without it, a connection of N parked handlers polled all N (their futures, down to
//! the app's admission queue and timers) whenever any one of them moved, which made a
//! request cost O(N) polls.
//!
//! What a stream waits for on the connection itself (flow credit, the next turn of the
//! write queue) wakes no waker: the driver marks those streams when a read or a
//! completed turn may have freed them. The wakers are pooled per connection, like the
//! rest of a stream's state (DESIGN 4.3): a warm connection allocates none.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Wake, Waker};

use futures_util::task::AtomicWaker;

/// Wakers kept for the connection's next streams, at most this many.
const MAX_POOLED: usize = 32;

/// The connection's task waker and its pool of stream wakers.
pub(super) struct StreamWakers {
    task: Arc<AtomicWaker>,
    free: Vec<StreamWaker>,
}

/// One stream's waker and its mark.
pub(super) struct StreamWaker {
    flag: Arc<Flag>,
    waker: Waker,
}

struct Flag {
    woken: AtomicBool,
    task: Arc<AtomicWaker>,
}

impl Wake for Flag {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        // Marked before the task is woken: the pass that wake starts sees the mark.
        self.woken.store(true, Ordering::Release);
        self.task.wake();
    }
}

impl StreamWakers {
    pub(super) fn new() -> Self {
        StreamWakers {
            task: Arc::new(AtomicWaker::new()),
            free: Vec::new(),
        }
    }

    /// The task to wake when a stream is woken: registered at the start of every poll
    /// of the connection, before any mark is looked at, so no wake is lost.
    pub(super) fn register(&self, task: &Waker) {
        self.task.register(task);
    }

    /// A waker for a new stream, marked: a stream is polled as soon as it starts.
    pub(super) fn rent(&mut self) -> StreamWaker {
        let waker = self.free.pop().unwrap_or_else(|| {
            let flag = Arc::new(Flag {
                woken: AtomicBool::new(false),
                task: self.task.clone(),
            });
            StreamWaker {
                waker: Waker::from(flag.clone()),
                flag,
            }
        });
        waker.mark();
        waker
    }

    /// Keeps a finished stream's waker for the next stream. A copy of it still held
    /// elsewhere can at worst mark that next stream once: a poll too many, never one
    /// missed.
    pub(super) fn give_back(&mut self, waker: StreamWaker) {
        if self.free.len() < MAX_POOLED {
            self.free.push(waker);
        }
    }
}

impl StreamWaker {
    /// Marks the stream for the next pass.
    pub(super) fn mark(&self) {
        self.flag.woken.store(true, Ordering::Relaxed);
    }

    /// Whether the stream was woken or marked since last asked; clears the mark.
    pub(super) fn take_mark(&self) -> bool {
        // Most streams of a pass are not marked: a plain load spares them the swap.
        self.flag.woken.load(Ordering::Acquire) && self.flag.woken.swap(false, Ordering::AcqRel)
    }

    /// What the stream's handler and body are polled with.
    pub(super) fn waker(&self) -> &Waker {
        &self.waker
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;

    struct CountWakes(AtomicUsize);

    impl Wake for CountWakes {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, Ordering::Relaxed);
        }
    }

    #[test]
    fn a_stream_is_marked_when_it_starts_and_when_woken_and_wakes_the_task() {
        let task = Arc::new(CountWakes(AtomicUsize::new(0)));
        let mut wakers = StreamWakers::new();
        wakers.register(&Waker::from(task.clone()));
        let stream = wakers.rent();
        assert!(stream.take_mark(), "a new stream is polled once");
        assert!(!stream.take_mark());
        stream.waker().wake_by_ref();
        assert!(stream.take_mark());
        assert_eq!(task.0.load(Ordering::Relaxed), 1);
    }

    #[test]
    fn wakers_are_reused_by_later_streams() {
        let mut wakers = StreamWakers::new();
        let first = wakers.rent();
        let flag = Arc::as_ptr(&first.flag);
        wakers.give_back(first);
        let second = wakers.rent();
        assert_eq!(Arc::as_ptr(&second.flag), flag);
        assert!(second.take_mark(), "marked anew for its stream");
    }
}
