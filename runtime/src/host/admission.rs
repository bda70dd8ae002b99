//! Per-app admission: at most `max_concurrent` instances of an app run at once; up to
//! `queue` more requests wait, each at most `queue_timeout`, for one to finish; the
//! rest are turned away at once. One app flooded with slow requests fills only its
//! own slots and queue, so other apps' requests never wait behind it.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use tokio::sync::futures::OwnedNotified;
use tokio::sync::{Notify, OwnedSemaphorePermit, Semaphore};
pub use wedge_config::admission::{
    AdmissionLimits, DEFAULT_MAX_ABANDONED_PER_CONNECTION, DEFAULT_MAX_CONCURRENT, DEFAULT_QUEUE,
    DEFAULT_QUEUE_TIMEOUT,
};

/// Why a request was not admitted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refused {
    /// `queue` requests were already waiting.
    QueueFull,
    /// No instance came free within `queue_timeout`.
    TimedOut,
    /// The request's connection already holds `max_abandoned_per_connection`
    /// requests its client abandoned whose guest code still runs.
    Abandoned,
}

/// One app's slots and queue, shared by all versions of the app (a reload does not
/// grant a second set of slots).
#[derive(Debug)]
pub struct Admission {
    slots: Arc<Semaphore>,
    /// Places for live WASI 0.3 instances: one lives on after its handlers return
    /// while tasks they spawned run, where it holds no slot.
    instances: Arc<Semaphore>,
    /// Requests waiting for a place now, and the signal that one started to: while
    /// any waits, the app's idle instances give their places up.
    places_wanted: AtomicUsize,
    place_wanted: Arc<Notify>,
    waiting: AtomicUsize,
    limits: AdmissionLimits,
    /// How many slots and places there are: the `max_concurrent` of the version
    /// that last [committed](Admission::commit), shared by the versions.
    size: Arc<Mutex<usize>>,
}

/// A running instance's slot, given back when dropped.
pub struct Slot {
    _permit: OwnedSemaphorePermit,
}

/// A live WASI 0.3 instance's place among its app's, given back when dropped.
pub struct InstancePlace {
    _permit: OwnedSemaphorePermit,
}

impl Admission {
    pub fn new(limits: AdmissionLimits) -> Self {
        Admission {
            slots: Arc::new(Semaphore::new(limits.max_concurrent)),
            instances: Arc::new(Semaphore::new(limits.max_concurrent)),
            places_wanted: AtomicUsize::new(0),
            place_wanted: Arc::new(Notify::new()),
            waiting: AtomicUsize::new(0),
            size: Arc::new(Mutex::new(limits.max_concurrent)),
            limits,
        }
    }

    /// The admission of the app's next version, with other `limits`: it shares
    /// `previous`'s slots and instance places, to be resized to the new
    /// `max_concurrent` once the version serves ([`Admission::commit`]), so that the
    /// versions together never run or keep alive more than the larger of the two
    /// limits, and the new one once the old version's requests and instances have
    /// ended; its queue is its own. With separate ones, each reload that changed a
    /// limit let the app run and keep up to `max_concurrent` more, and fill the
    /// host's pool.
    pub fn succeed(previous: &Admission, limits: AdmissionLimits) -> Self {
        Admission {
            slots: previous.slots.clone(),
            instances: previous.instances.clone(),
            places_wanted: AtomicUsize::new(0),
            place_wanted: Arc::new(Notify::new()),
            waiting: AtomicUsize::new(0),
            size: previous.size.clone(),
            limits,
        }
    }

    /// Makes the shared slots and places number this version's `max_concurrent`: done
    /// once the version serves, so that a load that failed, or a version never
    /// served, leaves them as they were. Runs on a tokio runtime.
    pub fn commit(&self) {
        let mut size = crate::sync::lock(&self.size);
        let (from, to) = (*size, self.limits.max_concurrent);
        resize(&self.slots, from, to);
        resize(&self.instances, from, to);
        *size = to;
    }

    pub fn limits(&self) -> &AdmissionLimits {
        &self.limits
    }

    /// A slot for one instance: at once if one is free, else after waiting in the
    /// bounded queue (first come, first served).
    pub async fn enter(&self) -> Result<Slot, Refused> {
        // A free slot exists only when nobody waits: released slots go to waiters first.
        if let Ok(permit) = self.slots.clone().try_acquire_owned() {
            return Ok(Slot { _permit: permit });
        }
        // Counted as waiting until this call ends, however it ends: a request whose
        // client went away is dropped while it waits.
        let _waiting = Waiting::join(&self.waiting);
        if self.waiting.load(Ordering::Acquire) > self.limits.queue {
            return Err(Refused::QueueFull);
        }
        let waited = tokio::time::timeout(
            self.limits.queue_timeout,
            self.slots.clone().acquire_owned(),
        )
        .await;
        match waited {
            Ok(Ok(permit)) => Ok(Slot { _permit: permit }),
            // The semaphore is never closed; treat it like a timeout all the same.
            Ok(Err(_)) | Err(_) => Err(Refused::TimedOut),
        }
    }

    /// A place for one more live WASI 0.3 instance of the app, once fewer than
    /// `max_concurrent` are alive: what a handler spawns may keep its instance alive
    /// after the handler returned and gave its slot back, so without this an app's
    /// instances would be bounded only by the host's pool, which all apps share. A
    /// request waits for it in the instance queue, where its wall time runs.
    pub async fn instance_place(&self) -> InstancePlace {
        if let Ok(permit) = self.instances.clone().try_acquire_owned() {
            return InstancePlace { _permit: permit };
        }
        // An idle instance holds a place it may keep for `instance_idle`, and one of
        // an older version of the app can take no request at all: while this waits,
        // they go (see `Expiry`), and a place comes free.
        let _wanting = Waiting::join(&self.places_wanted);
        self.place_wanted.notify_waiters();
        let permit = self.instances.clone().acquire_owned().await;
        InstancePlace {
            _permit: permit.expect("the instance places are never closed"),
        }
    }

    /// Whether a request waits for a place among the app's instances now.
    pub fn place_wanted(&self) -> bool {
        self.places_wanted.load(Ordering::Acquire) > 0
    }

    /// Resolves when a request starts to wait for a place: enable it, then ask
    /// [`Admission::place_wanted`], so that no start goes unseen.
    pub fn place_wanted_signal(&self) -> OwnedNotified {
        self.place_wanted.clone().notified_owned()
    }

    /// Instances running now (of all the app's versions: they share the slots; while
    /// a smaller limit waits for slots the old version holds, at most the limit).
    pub fn running(&self) -> usize {
        // An older version's limit may be below the slots free now.
        self.limits
            .max_concurrent
            .saturating_sub(self.slots.available_permits())
    }

    /// Requests waiting now.
    pub fn waiting(&self) -> usize {
        self.waiting.load(Ordering::Acquire)
    }
}

/// Makes `semaphore`, made with `from` permits, hold `to`. Permits held now cannot be
/// taken back: those are forgotten as they are given back, first in line, so no new
/// holder gets one before the count is down to `to`. Runs on a tokio runtime.
fn resize(semaphore: &Arc<Semaphore>, from: usize, to: usize) {
    if to >= from {
        semaphore.add_permits(to - from);
        return;
    }
    let excess = from - to;
    let held = excess - semaphore.forget_permits(excess);
    if held > 0 {
        let semaphore = semaphore.clone();
        let held = u32::try_from(held).unwrap_or(u32::MAX);
        tokio::spawn(async move {
            if let Ok(permits) = semaphore.acquire_many_owned(held).await {
                permits.forget();
            }
        });
    }
}

/// The requests of one client connection that the client abandoned (reset the
/// stream, closed the connection) while their guest code still holds an instance
/// slot: wasmtime cannot stop one request's task inside an instance that serves
/// several, so the slot stays taken until the guest is done with it. Counted per
/// connection so that a client cannot take an app's slots by sending requests and
/// resetting them (a reset stream no longer counts against HTTP/2's stream limit).
#[derive(Clone, Default, Debug)]
pub struct Abandoned(Arc<AtomicUsize>);

impl Abandoned {
    /// Abandoned requests of this connection still running.
    pub fn count(&self) -> usize {
        self.0.load(Ordering::Acquire)
    }

    /// Counts one more abandoned request until the mark is dropped.
    pub(crate) fn mark(&self) -> AbandonedMark {
        self.0.fetch_add(1, Ordering::AcqRel);
        AbandonedMark(self.0.clone())
    }
}

/// One abandoned request, counted until its guest is done with its slot.
#[derive(Debug)]
pub(crate) struct AbandonedMark(Arc<AtomicUsize>);

impl Drop for AbandonedMark {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

/// One request's place in the queue count, given back when dropped.
struct Waiting<'a>(&'a AtomicUsize);

impl<'a> Waiting<'a> {
    fn join(count: &'a AtomicUsize) -> Self {
        count.fetch_add(1, Ordering::AcqRel);
        Waiting(count)
    }
}

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn admission(max_concurrent: usize, queue: usize) -> Admission {
        Admission::new(AdmissionLimits {
            max_concurrent,
            queue,
            queue_timeout: Duration::from_secs(3600),
            ..AdmissionLimits::default()
        })
    }

    #[test]
    fn an_abandoned_request_counts_until_its_mark_is_dropped() {
        let connection = Abandoned::default();
        let first = connection.mark();
        let second = connection.clone().mark();
        assert_eq!(connection.count(), 2);
        drop(first);
        drop(second);
        assert_eq!(connection.count(), 0);
    }

    #[tokio::test]
    async fn slots_are_counted_and_given_back() {
        let admission = admission(2, 0);
        let a = admission.enter().await.unwrap();
        let _b = admission.enter().await.unwrap();
        assert_eq!(admission.running(), 2);
        assert_eq!(admission.enter().await.err(), Some(Refused::QueueFull));
        drop(a);
        assert_eq!(admission.running(), 1);
        assert!(admission.enter().await.is_ok());
    }

    #[tokio::test]
    async fn a_waiter_gets_the_next_free_slot_and_the_queue_is_bounded() {
        let admission = Arc::new(admission(1, 1));
        let first = admission.enter().await.unwrap();
        let waiter = tokio::spawn({
            let admission = admission.clone();
            async move { admission.enter().await.map(|_| ()) }
        });
        while admission.waiting() == 0 {
            tokio::task::yield_now().await;
        }
        // The queue holds one: the next request is refused without waiting.
        assert_eq!(admission.enter().await.err(), Some(Refused::QueueFull));
        drop(first);
        assert_eq!(waiter.await.unwrap(), Ok(()));
        assert_eq!(admission.waiting(), 0);
    }

    #[tokio::test]
    async fn a_waiter_dropped_while_it_waits_leaves_the_queue() {
        let admission = admission(1, 1);
        let _held = admission.enter().await.unwrap();
        let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
        {
            let mut waiter = std::pin::pin!(admission.enter());
            // Polled once: it queues, then its client goes away.
            assert!(waiter.as_mut().poll(&mut cx).is_pending());
            assert_eq!(admission.waiting(), 1);
        }
        assert_eq!(admission.waiting(), 0);
        // The queue's one place is free again: the next request waits, not refused.
        let mut again = std::pin::pin!(admission.enter());
        assert!(again.as_mut().poll(&mut cx).is_pending());
    }

    /// A version with other limits shares the slots: grown, the new count is free at
    /// once; shrunk, a slot held by the old version is not given to anyone until the
    /// count is down to the new limit.
    #[tokio::test]
    async fn a_successor_shares_the_slots_resized() {
        let first = admission(2, 0);
        let a = first.enter().await.unwrap();
        let b = first.enter().await.unwrap();
        let grown = Admission::succeed(&first, limits(3));
        grown.commit();
        let c = grown.enter().await.unwrap();
        assert_eq!(
            grown.enter().await.err(),
            Some(Refused::QueueFull),
            "3 in all"
        );
        let shrunk = Admission::succeed(&grown, limits(1));
        shrunk.commit();
        drop((a, b));
        tokio::task::yield_now().await;
        assert_eq!(
            shrunk.enter().await.err(),
            Some(Refused::QueueFull),
            "c holds the one"
        );
        drop(c);
        assert!(shrunk.enter().await.is_ok());
    }

    /// Review of f9a3360: a successor resized the slots when made, before its
    /// version loaded: a reload that then failed left the old version on resized
    /// slots, and the next resize counted from the old limit (from 100 to 10, failed,
    /// then again: none left). Only a committed successor resizes, from the size the
    /// slots have.
    #[tokio::test]
    async fn a_successor_never_committed_leaves_the_slots_as_they_were() {
        let first = admission(2, 0);
        let failed = Admission::succeed(&first, limits(50));
        drop(failed);
        let next = Admission::succeed(&first, limits(1));
        next.commit();
        let _held = next.enter().await.unwrap();
        assert_eq!(
            next.enter().await.err(),
            Some(Refused::QueueFull),
            "1 in all"
        );
        let again = Admission::succeed(&next, limits(1));
        again.commit();
        assert_eq!(
            again.enter().await.err(),
            Some(Refused::QueueFull),
            "still 1"
        );
    }

    fn limits(max_concurrent: usize) -> AdmissionLimits {
        AdmissionLimits {
            max_concurrent,
            queue: 0,
            ..AdmissionLimits::default()
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_waiter_is_refused_after_the_queue_timeout() {
        let admission = Admission::new(AdmissionLimits {
            max_concurrent: 1,
            queue: 10,
            queue_timeout: Duration::from_secs(1),
            ..AdmissionLimits::default()
        });
        let _held = admission.enter().await.unwrap();
        // Paused time: the timeout fires when the runtime has nothing else to do.
        assert_eq!(admission.enter().await.err(), Some(Refused::TimedOut));
        assert_eq!(admission.waiting(), 0);
    }
}
