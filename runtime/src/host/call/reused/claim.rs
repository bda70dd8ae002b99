//! What a request on a reused instance holds and what it shares with its instance:
//! its ticket (deadline, claim, verdict), its claim on the app's admission slot, the
//! caller's hold on that claim, and the instance's side ([`Shared`]): the claims it
//! took, and its fate once it is gone.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use futures_util::task::AtomicWaker;
use tokio::sync::{Notify, oneshot};
use tokio::time::Instant;

use crate::host::admission::{Abandoned, AbandonedMark, Slot};
use crate::host::fault::Fault;
use crate::sync::lock;

/// A request's deadline, its claim on the app and its instance, and how it is
/// told, once the request has ended, whether its instance lived on or failed.
pub(crate) struct Ticket {
    pub(super) deadline: Instant,
    pub(super) claim: Arc<Claim>,
    pub(super) verdict: oneshot::Sender<Option<Fault>>,
}

/// What a request holds while anyone still works on it: the caller (until the
/// response body is done) and, once a worker took it, the worker (until the guest
/// answered), or, once the request expired, its instance (until the instance is
/// gone: wasmtime cannot stop an expired request's guest code). Holds the app's
/// admission slot and the request's share of its instance's CPU meter.
pub(super) struct Claim {
    pub(super) _slot: Slot,
    /// The instance that took the request: set once, by its worker.
    pub(super) instance: OnceLock<Arc<Shared>>,
    /// Set once the client abandoned the request while its guest held the claim:
    /// counts against the client's connection until the claim is released.
    pub(super) abandoned: OnceLock<AbandonedMark>,
    /// Set once the guest returned from the request's call with its response body
    /// finished: all of it is then with the host, and a later failure of the
    /// instance (another request's trap) does not cut it off.
    pub(super) body_finished: OnceLock<()>,
}

/// The caller's hold on a request's claim: its handler future, then its response
/// body. Dropped before the response is done while anyone else still holds the
/// claim (the guest runs on), it counts the request as abandoned by its connection.
pub(super) struct Caller {
    pub(super) claim: Arc<Claim>,
    pub(super) connection: Abandoned,
    /// The response is done (its body ended, or a fault answered it).
    pub(super) done: bool,
}

impl Drop for Caller {
    fn drop(&mut self) {
        if !self.done && Arc::strong_count(&self.claim) > 1 {
            let _ = self.claim.abandoned.set(self.connection.mark());
        }
    }
}

impl Drop for Claim {
    fn drop(&mut self) {
        if let Some(shared) = self.instance.get() {
            shared.claims.fetch_sub(1, Ordering::AcqRel);
            shared.claim_released.wake();
        }
    }
}

/// A fault as an error, so that a failed instantiation keeps its cause through
/// `ProxyHandler` (which hands it back inside an `InstantiationError`), and `p2`'s
/// faults come back as `ProxyHandler`'s errors do.
#[derive(Debug)]
pub(super) struct Failed(pub(super) Fault);

impl std::fmt::Display for Failed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

impl std::error::Error for Failed {}

/// What one instance's worker and its requests share.
pub(super) struct Shared {
    /// Claims of requests this instance took that are not released yet…
    pub(super) claims: AtomicUsize,
    /// …those of them that expired, kept until the instance is gone…
    pub(super) expired: Mutex<Vec<Arc<Claim>>>,
    /// …and the worker's expiry, woken when one is released.
    pub(super) claim_released: AtomicWaker,
    /// The instance was dropped for being overdue (past the wall-clock limit).
    pub(super) overdue: AtomicBool,
    /// Set once, when the instance is gone: `Some(fault)` if it failed.
    pub(super) fate: OnceLock<Option<Fault>>,
    /// Notified once the fate is set: a body stalled on its client, which no one
    /// polls, learns of its instance's failure only so.
    pub(super) gone_notify: Arc<Notify>,
    /// Requests ended since the worker last showed it lives on: each is told at the
    /// worker's next turn, `None` if it lives on, else its failure.
    pub(super) ended: Mutex<Vec<oneshot::Sender<Option<Fault>>>>,
}

impl Shared {
    /// An instance's side, before it took any request.
    pub(super) fn new() -> Arc<Shared> {
        Arc::new(Shared {
            claims: AtomicUsize::new(0),
            expired: Mutex::new(Vec::new()),
            claim_released: AtomicWaker::new(),
            overdue: AtomicBool::new(false),
            fate: OnceLock::new(),
            gone_notify: Arc::new(Notify::new()),
            ended: Mutex::new(Vec::new()),
        })
    }

    /// The instance takes the request `claim` is for: its claim counts as this
    /// instance's until released, and its response body learns the instance's fate.
    pub(super) fn take(self: &Arc<Self>, claim: &Claim) {
        self.claims.fetch_add(1, Ordering::AcqRel);
        let _ = claim.instance.set(self.clone());
    }

    /// Records that the instance is gone, `Some(fault)` if it failed: before its
    /// store is dropped, for a body wasmtime ends when the store goes must find
    /// the failure already recorded.
    pub(super) fn gone(&self, fault: Option<Fault>) {
        let _ = self.fate.set(fault);
        self.gone_notify.notify_waiters();
    }

    /// Why the instance failed, once it has.
    pub(super) fn failure(&self) -> Option<Fault> {
        self.fate.get().cloned().flatten()
    }

    /// Whether all the instance still works on is expired requests' guest code: it
    /// has nothing left worth keeping it for.
    pub(super) fn only_expired_left(&self) -> bool {
        let expired = lock(&self.expired).len();
        expired > 0 && self.claims.load(Ordering::Acquire) == expired
    }

    /// Tells the requests ended so far how their instance fared.
    pub(super) fn settle(&self, fault: Option<&Fault>) {
        let ended = std::mem::take(&mut *lock(&self.ended));
        for verdict in ended {
            let _ = verdict.send(fault.cloned());
        }
    }
}
