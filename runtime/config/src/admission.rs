//! Per-app admission limits: how many of an app's requests run at once and how many
//! wait; the runtime's `host::admission` enforces them.

use std::time::Duration;

/// Default instances of one app running at once.
pub const DEFAULT_MAX_CONCURRENT: usize = 100;
/// Default requests of one app waiting for an instance.
pub const DEFAULT_QUEUE: usize = 1000;
/// Default time a request waits for an instance before it is refused.
pub const DEFAULT_QUEUE_TIMEOUT: Duration = Duration::from_secs(5);
/// Default requests one client connection may have abandoned (reset, or closed the
/// connection) while their guest code still holds an instance of the app.
pub const DEFAULT_MAX_ABANDONED_PER_CONNECTION: usize = 8;

/// How many requests of one app run and wait.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AdmissionLimits {
    /// Instances running at once (from dispatch until the guest call returned).
    pub max_concurrent: usize,
    /// Requests waiting for an instance; more are refused at once.
    pub queue: usize,
    /// How long a request may wait for an instance.
    pub queue_timeout: Duration,
    /// Requests of one client connection that its client abandoned while their guest
    /// code still runs on a reused instance (holding a slot: wasmtime cannot stop one
    /// request's task in a shared instance); past it, that connection's next requests
    /// to the app are refused until they are done.
    pub max_abandoned_per_connection: usize,
}

impl Default for AdmissionLimits {
    fn default() -> Self {
        AdmissionLimits {
            max_concurrent: DEFAULT_MAX_CONCURRENT,
            queue: DEFAULT_QUEUE,
            queue_timeout: DEFAULT_QUEUE_TIMEOUT,
            max_abandoned_per_connection: DEFAULT_MAX_ABANDONED_PER_CONNECTION,
        }
    }
}
