//! Turn-based flushing (DESIGN 4.2): one transport writer per connection. Frames staged
//! while a write is in flight wait, and the whole stage leaves as the next write (a
//! turn), so every response finished during one write shares the one after it.
//!
//! The writers are the connection's streams, all driven by the connection's task. A
//! stream's waiter is the turn number it staged in, a field it owns for its life, so
//! waiting allocates nothing; past [`H2Config::stream_send_buffer`] staged octets a
//! stream waits for the next turn, so a body that is always ready still lets the write
//! happen. A failed write ends the connection, and the connection tells every stream
//! — parked on its turn or on flow credit alike — that the peer is gone.
//!
//! [`H2Config::stream_send_buffer`]: super::H2Config::stream_send_buffer

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll, ready};

use tokio::io::AsyncWrite;

/// The connection's outgoing octets.
#[derive(Default)]
pub(super) struct WriteQueue {
    /// Frames for the next turn.
    stage: Vec<u8>,
    /// The turn being written, and how much of it is out.
    in_flight: Vec<u8>,
    written: usize,
    /// Turns started: the stage belongs to turn `started + 1`.
    started: u64,
    /// Octets the transport took, ever: write progress for the write timeout.
    total_written: u64,
}

/// Where a frame was staged: its turn and offset. It may still be amended while that
/// turn has not started to be written.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Staged {
    turn: u64,
    at: usize,
}

/// A writer's place in the queue: the turn it staged in and how much.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct TurnWaiter {
    turn: u64,
    staged: usize,
}

impl WriteQueue {
    /// Where frames for the next turn go.
    pub(super) fn stage(&mut self) -> &mut Vec<u8> {
        &mut self.stage
    }

    /// Whether nothing is staged or in flight.
    pub(super) fn is_empty(&self) -> bool {
        self.stage.is_empty() && self.in_flight.is_empty()
    }

    /// Where the next frame staged will be.
    pub(super) fn next_frame(&self) -> Staged {
        Staged {
            turn: self.started + 1,
            at: self.stage.len(),
        }
    }

    /// The stage and the offset of the frame staged at `staged`, if no write has taken
    /// it yet.
    pub(super) fn unwritten(&mut self, staged: Staged) -> Option<(&mut Vec<u8>, usize)> {
        let waiting = staged.turn == self.started + 1 && staged.at < self.stage.len();
        waiting.then_some((&mut self.stage, staged.at))
    }

    /// Octets staged or in flight, not yet taken by the transport.
    pub(super) fn len(&self) -> usize {
        self.stage.len() + self.in_flight.len() - self.written
    }

    /// Octets the transport has taken so far; unchanged while it takes nothing.
    pub(super) fn total_written(&self) -> u64 {
        self.total_written
    }

    /// How many more octets `waiter` may stage in this turn; zero means it waits for the
    /// next one.
    pub(super) fn allowance(&self, waiter: &TurnWaiter, bound: usize) -> usize {
        if waiter.turn == self.started + 1 {
            bound.saturating_sub(waiter.staged)
        } else {
            bound
        }
    }

    /// Records that `waiter` staged `n` octets in this turn.
    pub(super) fn staged(&self, waiter: &mut TurnWaiter, n: usize) {
        let turn = self.started + 1;
        if waiter.turn != turn {
            *waiter = TurnWaiter { turn, staged: 0 };
        }
        waiter.staged += n;
    }

    /// Writes turns until nothing is staged or the transport is busy. `Ready(Ok(true))`
    /// when at least one turn completed.
    pub(super) fn poll_write<IO: AsyncWrite + Unpin>(
        &mut self,
        io: &mut IO,
        cx: &mut Context<'_>,
    ) -> Poll<io::Result<bool>> {
        let mut completed = false;
        loop {
            if self.in_flight.is_empty() {
                if self.stage.is_empty() {
                    return Poll::Ready(Ok(completed));
                }
                std::mem::swap(&mut self.stage, &mut self.in_flight);
                self.written = 0;
                self.started += 1;
            }
            while self.written < self.in_flight.len() {
                let n = match Pin::new(&mut *io).poll_write(cx, &self.in_flight[self.written..]) {
                    Poll::Ready(result) => result?,
                    Poll::Pending if completed => return Poll::Ready(Ok(true)),
                    Poll::Pending => return Poll::Pending,
                };
                if n == 0 {
                    return Poll::Ready(Err(io::ErrorKind::WriteZero.into()));
                }
                self.written += n;
                self.total_written += n as u64;
            }
            // TLS buffers: the turn is out only once flushed.
            ready!(Pin::new(&mut *io).poll_flush(cx))?;
            self.in_flight.clear();
            self.written = 0;
            completed = true;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_writer_past_its_bound_waits_for_the_next_turn() {
        let mut queue = WriteQueue::default();
        let mut waiter = TurnWaiter::default();
        assert_eq!(queue.allowance(&waiter, 100), 100);
        queue.staged(&mut waiter, 60);
        assert_eq!(queue.allowance(&waiter, 100), 40);
        queue.staged(&mut waiter, 40);
        assert_eq!(queue.allowance(&waiter, 100), 0);
        queue.stage().extend_from_slice(b"x");
        let waker = std::task::Waker::noop();
        let mut cx = Context::from_waker(waker);
        let mut sink = Vec::new();
        assert!(matches!(
            queue.poll_write(&mut sink, &mut cx),
            Poll::Ready(Ok(true))
        ));
        assert_eq!(queue.allowance(&waiter, 100), 100, "a new turn");
    }

    #[test]
    fn a_staged_frame_can_be_amended_until_its_turn_is_written() {
        let mut queue = WriteQueue::default();
        queue.stage().extend_from_slice(b"ab");
        let staged = queue.next_frame();
        queue.stage().extend_from_slice(b"cd");
        let (stage, at) = queue.unwritten(staged).unwrap();
        assert_eq!(&stage[at..], b"cd");
        let waker = std::task::Waker::noop();
        let mut cx = Context::from_waker(waker);
        let mut sink = Vec::new();
        assert!(queue.poll_write(&mut sink, &mut cx).is_ready());
        queue.stage().extend_from_slice(b"efgh");
        assert!(queue.unwritten(staged).is_none(), "written with its turn");
    }
}
