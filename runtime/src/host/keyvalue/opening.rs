//! Opening an app's backend on first use, and the doubling wait before opening
//! again after a failure.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use super::backend::{Backend, Failure};
use super::redis::TrustedCa;
use super::{BackendChoice, Durability, embedded};
use crate::host::guest_log::GuestOutput;

/// A backend, opened on first use: an app that never opens a bucket makes no file
/// and no connection. A failed opening is tried again after a wait ([`OpenFailed`]).
pub(super) struct Shared {
    pub(super) choice: BackendChoice,
    /// The embedded file, for `BackendChoice::Embedded`, and when it acknowledges a
    /// write.
    pub(super) path: PathBuf,
    pub(super) durability: Durability,
    /// How long a Redis connection waits for an answer.
    pub(super) timeout: std::time::Duration,
    /// The authorities a `rediss://` server's certificate must chain to, if not
    /// the well-known roots.
    pub(super) ca: Option<TrustedCa>,
    /// How often an `os` file is synced.
    pub(super) sync_interval: std::time::Duration,
    /// The backend while it works.
    pub(super) current: Mutex<Option<Arc<dyn Backend>>>,
    /// The last opening's failure, while opening fails.
    pub(super) failed: Mutex<Option<OpenFailed>>,
    /// Held while opening, so that one operation opens and the others wait for it.
    pub(super) opening: tokio::sync::Mutex<()>,
}

impl Shared {
    /// The backend, opened if need be and if a failed opening is not too recent;
    /// `log`: where its opening again after a failure is told.
    pub(super) async fn backend(
        &self,
        log: Option<&GuestOutput>,
    ) -> Result<Arc<dyn Backend>, Failure> {
        if let Some(backend) = self.working() {
            return Ok(backend);
        }
        let opening = match self.open_failed() {
            // Failing: operations that find another opening under way fail at once.
            Some(_) => self.opening.try_lock().map_err(|_| self.failing())?,
            None => self.opening.lock().await,
        };
        if let Some(backend) = self.working() {
            return Ok(backend);
        }
        if let Some(failed) = self.open_failed()
            && tokio::time::Instant::now() < failed.retry_at
        {
            return Err(self.failing());
        }
        let opened = match &self.choice {
            BackendChoice::Embedded => {
                let file = embedded::FileSettings {
                    durability: self.durability,
                    sync_interval: self.sync_interval,
                };
                embedded::Embedded::open(self.path.clone(), file).await
            }
            BackendChoice::Redis(url) => {
                super::redis::Redis::open(url.as_str(), self.timeout, self.ca.as_ref()).await
            }
            BackendChoice::None | BackendChoice::Env(_) => {
                Err(Failure::Backend("the app has no store".into()))
            }
        };
        drop(opening);
        let mut failed = crate::sync::lock(&self.failed);
        match opened {
            Ok(backend) => {
                if let (Some(was), Some(log)) = (failed.take(), log) {
                    log.info(format_args!(
                        "key-value store ({}): open again, after {} failed tries",
                        self.choice, was.tries
                    ));
                }
                *crate::sync::lock(&self.current) = Some(backend.clone());
                Ok(backend)
            }
            Err(failure) => {
                let next = OpenFailed::after(failed.as_ref(), failure.why().to_string());
                let first = failed.is_none();
                *failed = Some(next);
                drop(failed);
                // The first failure of a run is logged (a `Backend` failure); the
                // next ones only answer the guest.
                if first {
                    Err(failure)
                } else {
                    Err(self.failing())
                }
            }
        }
    }

    /// The backend, if it is open.
    fn working(&self) -> Option<Arc<dyn Backend>> {
        crate::sync::lock(&self.current).clone()
    }

    fn open_failed(&self) -> Option<OpenFailed> {
        crate::sync::lock(&self.failed).clone()
    }

    /// What an operation fails with while opening fails.
    fn failing(&self) -> Failure {
        let failed = crate::sync::lock(&self.failed);
        let Some(failed) = failed.as_ref() else {
            return Failure::Failing("the store is being opened".into());
        };
        let wait = failed
            .retry_at
            .saturating_duration_since(tokio::time::Instant::now());
        // Zero: the wait is over and another operation is opening it now.
        let next = match std::time::Duration::from_millis(wait.as_millis() as u64) {
            wait if wait.is_zero() => "trying again now".to_string(),
            wait => format!("next try in {}", humantime::format_duration(wait)),
        };
        Failure::Failing(format!(
            "{} (failed to open {} times; {next})",
            failed.why, failed.tries
        ))
    }
}

/// A backend that failed to open: why, and when opening is tried again. The wait
/// doubles from [`FIRST_RETRY`] to [`LAST_RETRY`] while it keeps failing, so an app
/// whose store cannot open (a second wedge holds the file, a bad directory) fails
/// each operation at once and costs one opening a wait, not one an operation.
#[derive(Clone)]
pub(super) struct OpenFailed {
    pub(super) why: String,
    pub(super) tries: u32,
    pub(super) wait: std::time::Duration,
    retry_at: tokio::time::Instant,
}

const FIRST_RETRY: std::time::Duration = std::time::Duration::from_secs(1);

const LAST_RETRY: std::time::Duration = std::time::Duration::from_secs(30);

impl OpenFailed {
    /// The failure `why` after `before`.
    pub(super) fn after(before: Option<&OpenFailed>, why: String) -> OpenFailed {
        let (tries, wait) = match before {
            None => (1, FIRST_RETRY),
            Some(before) => (before.tries + 1, (before.wait * 2).min(LAST_RETRY)),
        };
        OpenFailed {
            why,
            tries,
            wait,
            retry_at: tokio::time::Instant::now() + wait,
        }
    }
}
