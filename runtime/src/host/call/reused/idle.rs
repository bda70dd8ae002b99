//! Instances waiting for their app's next request. The one that waited least is
//! taken first (its memory is still warm in the caches; the others age out), and
//! each is dropped once it has waited its idle time (`instance_idle`), by one
//! sweeper task per pool that runs only while the pool holds any.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use tokio::time::{Instant, sleep_until};

use crate::sync::lock;

/// An app version's waiting instances (`T`: one instance).
pub(crate) struct Idle<T> {
    waiting: Mutex<Waiting<T>>,
}

struct Waiting<T> {
    /// With the time each goes, soonest first: every instance waits as long, and
    /// each was put back after those before it.
    kept: VecDeque<(T, Instant)>,
    /// A sweeper task is waiting for the first one's time.
    swept: bool,
}

impl<T> Default for Idle<T> {
    fn default() -> Self {
        Idle {
            waiting: Mutex::new(Waiting {
                kept: VecDeque::new(),
                swept: false,
            }),
        }
    }
}

impl<T: Send + 'static> Idle<T> {
    /// The instance that waited least, if any waits.
    pub(super) fn take(&self) -> Option<T> {
        lock(&self.waiting).kept.pop_back().map(|(kept, _)| kept)
    }

    /// Keeps `instance` until it is taken or has waited `idle`. Runs on a tokio
    /// runtime (it may start the sweeper).
    pub(super) fn put(self: &Arc<Self>, instance: T, idle: Duration) {
        let mut waiting = lock(&self.waiting);
        waiting.kept.push_back((instance, Instant::now() + idle));
        if !waiting.swept {
            waiting.swept = true;
            tokio::spawn(sweep(Arc::downgrade(self)));
        }
    }

    /// Drops the instances whose time has come by `now`; the time of the next one,
    /// or `None` (and the sweeper ends) if none is left.
    fn drop_expired(&self, now: Instant) -> Option<Instant> {
        let mut waiting = lock(&self.waiting);
        let expired = waiting.kept.iter().take_while(|(_, at)| *at <= now).count();
        let expired: Vec<_> = waiting.kept.drain(..expired).collect();
        let next = waiting.kept.front().map(|(_, at)| *at);
        waiting.swept = next.is_some();
        drop(waiting);
        // Dropped outside the lock: a store takes a while to go.
        drop(expired);
        next
    }
}

/// Drops `pool`'s instances as their time comes, while it holds any; holds the
/// pool only weakly, so an unloaded app version's instances go with it.
async fn sweep<T: Send + 'static>(pool: Weak<Idle<T>>) {
    loop {
        let next = match pool.upgrade() {
            Some(pool) => pool.drop_expired(Instant::now()),
            None => None,
        };
        match next {
            Some(at) => sleep_until(at).await,
            None => return,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const IDLE: Duration = Duration::from_secs(1);

    /// An instance that tells whether it is still kept.
    fn instance() -> (Arc<()>, Weak<()>) {
        let kept = Arc::new(());
        let watch = Arc::downgrade(&kept);
        (kept, watch)
    }

    /// Lets the sweeper run up to `at`.
    async fn advance_to(at: Instant) {
        tokio::time::advance(at.saturating_duration_since(Instant::now())).await;
        tokio::task::yield_now().await;
    }

    #[tokio::test(start_paused = true)]
    async fn the_instance_that_waited_least_is_taken_first() {
        let pool = Arc::new(Idle::default());
        pool.put(1, IDLE);
        pool.put(2, IDLE);
        assert_eq!(pool.take(), Some(2));
        pool.put(3, IDLE);
        assert_eq!(
            (pool.take(), pool.take(), pool.take()),
            (Some(3), Some(1), None)
        );
    }

    #[tokio::test(start_paused = true)]
    async fn an_instance_goes_once_it_has_waited_its_idle_time() {
        let pool = Arc::new(Idle::default());
        let start = Instant::now();
        let (first, first_kept) = instance();
        pool.put(first, IDLE);
        advance_to(start + IDLE / 2).await;
        let (second, second_kept) = instance();
        pool.put(second, IDLE);
        advance_to(start + IDLE - Duration::from_millis(1)).await;
        assert!(first_kept.upgrade().is_some(), "gone before its time");
        advance_to(start + IDLE).await;
        assert!(first_kept.upgrade().is_none(), "kept past its time");
        assert!(
            second_kept.upgrade().is_some(),
            "the second went with the first"
        );
        advance_to(start + IDLE / 2 + IDLE).await;
        assert!(second_kept.upgrade().is_none(), "kept past its time");
    }

    #[tokio::test(start_paused = true)]
    async fn the_sweeper_stops_when_the_pool_is_empty_and_a_put_starts_another() {
        let pool = Arc::new(Idle::default());
        pool.put(instance().0, IDLE);
        advance_to(Instant::now() + IDLE).await;
        assert!(pool.take().is_none());
        assert!(!lock(&pool.waiting).swept);
        // A taken instance is the taker's: the sweeper never drops it.
        let (kept, watch) = instance();
        pool.put(kept, IDLE);
        let taken = pool.take();
        advance_to(Instant::now() + 2 * IDLE).await;
        assert!(taken.is_some() && watch.upgrade().is_some());
        let (again, watch) = instance();
        pool.put(again, IDLE);
        advance_to(Instant::now() + IDLE).await;
        assert!(
            watch.upgrade().is_none(),
            "no sweeper after the first ended"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn an_unloaded_pool_s_instances_go_with_it() {
        let pool = Arc::new(Idle::default());
        let (kept, watch) = instance();
        pool.put(kept, IDLE);
        drop(pool);
        assert!(watch.upgrade().is_none());
    }
}
