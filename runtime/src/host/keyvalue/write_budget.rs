//! `max_write_rate`: the bytes of keys and values an app may still write.

use std::sync::Mutex;

use super::KvError;

/// What an app may still write (`max_write_rate`): refilled at the rate a second,
/// up to one second's worth. A write passes while the app is not in debt and is
/// charged in full, so one larger than a second's worth passes too and the app
/// then waits it out: over any T seconds an app writes at most rate × (T + 1)
/// bytes of keys and values, plus one write.
pub(super) struct WriteBudget {
    rate: u64,
    /// Bytes left (negative: owed) as of an instant.
    left: Mutex<(f64, tokio::time::Instant)>,
}

impl WriteBudget {
    pub(super) fn new(rate: u64) -> WriteBudget {
        WriteBudget {
            rate,
            left: Mutex::new((rate as f64, tokio::time::Instant::now())),
        }
    }

    /// Charges a write of `bytes`, or refuses it while the app owes.
    pub(super) fn charge(&self, bytes: u64) -> Result<(), KvError> {
        let now = tokio::time::Instant::now();
        let mut left = crate::sync::lock(&self.left);
        let rate = self.rate as f64;
        let refilled = (left.0 + now.duration_since(left.1).as_secs_f64() * rate).min(rate);
        *left = (refilled, now);
        if refilled < 0.0 {
            return Err(KvError::Other(format!(
                "the app writes at most {} bytes of keys and values a second (max_write_rate)",
                self.rate
            )));
        }
        left.0 -= bytes as f64;
        Ok(())
    }
}
