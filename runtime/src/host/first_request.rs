//! What an app's first request sets off (tiered compilation's Cranelift compile):
//! a hook that runs once, at the first request, or at once when it is given after
//! that request came. `wedge dev` puts a new version in its slot before it gives the
//! version its hook, so a request may come in between.

use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};

/// The hook of one app version.
#[derive(Default)]
pub(crate) struct FirstRequest {
    /// The first request has come: the check every later request makes, without
    /// the lock. Set under `hook`'s lock.
    came: AtomicBool,
    hook: Mutex<Hook>,
}

type Then = Box<dyn FnOnce() + Send>;

#[derive(Default)]
enum Hook {
    #[default]
    Unset,
    Waiting(Then),
    /// Run (or running): a hook given again is ignored.
    Called,
}

impl FirstRequest {
    /// Runs `then` at the first request, or now if it came already; only the first
    /// hook given runs.
    pub(crate) fn then(&self, then: Then) {
        let mut hook = crate::sync::lock(&self.hook);
        if !matches!(*hook, Hook::Unset) {
            return;
        }
        if self.came.load(Ordering::Relaxed) {
            *hook = Hook::Called;
            drop(hook);
            then();
        } else {
            *hook = Hook::Waiting(then);
        }
    }

    /// A request came: the first runs the hook, if one is given.
    pub(crate) fn arrived(&self) {
        if self.came.load(Ordering::Relaxed) {
            return;
        }
        let mut hook = crate::sync::lock(&self.hook);
        if self.came.swap(true, Ordering::Relaxed) {
            return;
        }
        if let Hook::Waiting(_) = *hook
            && let Hook::Waiting(then) = std::mem::replace(&mut *hook, Hook::Called)
        {
            drop(hook);
            then();
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::AtomicUsize;

    use super::*;

    fn counter() -> (Arc<AtomicUsize>, Then) {
        let count = Arc::new(AtomicUsize::new(0));
        let counted = count.clone();
        let then = Box::new(move || {
            counted.fetch_add(1, Ordering::Relaxed);
        });
        (count, then)
    }

    #[test]
    fn a_hook_given_before_runs_once_at_the_first_request() {
        let first = FirstRequest::default();
        let (count, then) = counter();
        first.then(then);
        assert_eq!(count.load(Ordering::Relaxed), 0);
        first.arrived();
        first.arrived();
        assert_eq!(count.load(Ordering::Relaxed), 1);
    }

    #[test]
    fn a_hook_given_after_the_first_request_runs_at_once() {
        let first = FirstRequest::default();
        first.arrived();
        let (count, then) = counter();
        first.then(then);
        assert_eq!(count.load(Ordering::Relaxed), 1);
        first.arrived();
        assert_eq!(count.load(Ordering::Relaxed), 1);
    }

    #[test]
    fn only_the_first_hook_given_runs() {
        let first = FirstRequest::default();
        let (count, then) = counter();
        let (second, again) = counter();
        first.then(then);
        first.then(again);
        first.arrived();
        let (third, late) = counter();
        first.then(late);
        let counts = [&count, &second, &third].map(|c| c.load(Ordering::Relaxed));
        assert_eq!(counts, [1, 0, 0]);
    }
}
