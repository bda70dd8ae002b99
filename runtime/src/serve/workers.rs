//! The workers: one OS thread each, running a current-thread tokio runtime that serves
//! its own listeners (bound with `SO_REUSEPORT` to the same addresses as the others'),
//! so a connection, its streams and the guest calls they dispatch stay on the thread
//! that accepted it. Guests yield at every epoch tick, so one runtime interleaves them.
//!
//! Workers stop together and drain together, and no runtime is dropped before every
//! worker has drained: tasks on one runtime may serve another's requests (a reused
//! instance's task runs where its first request was; an outbound client's pooled
//! connections run where they were opened; an app's key-value commit task runs where
//! the write that started it was), and a current-thread runtime runs its
//! tasks only while its thread drives it.

use std::sync::Arc;
use std::thread::JoinHandle;

use anyhow::{Context, Result, anyhow};
use tokio::runtime::Runtime;
use tokio::sync::watch;

use crate::net::listener::{Drained, Listeners};

/// The running workers.
pub struct Workers {
    threads: Vec<JoinHandle<Result<()>>>,
    /// Set once: by a signal, or by a worker that failed.
    stop: Arc<watch::Sender<bool>>,
    /// How many workers have drained.
    drained: Arc<watch::Sender<usize>>,
}

/// What a worker is told to stop with.
pub struct Stop(watch::Receiver<bool>);

impl Stop {
    /// Resolves once the workers are to stop.
    pub async fn wait(mut self) {
        let _ = self.0.wait_for(|stop| *stop).await;
    }
}

/// Counts its worker as drained when dropped (even by a panic), so that the others
/// never wait for it forever.
struct Done(Arc<watch::Sender<usize>>);

impl Drop for Done {
    fn drop(&mut self) {
        self.0.send_modify(|n| *n += 1);
    }
}

impl Workers {
    /// Starts a worker per set of listeners; each runs `serve(index, listeners, stop)`,
    /// which serves until `stop` resolves, then drains.
    pub fn start<S, Fut>(sets: Vec<Listeners>, serve: S) -> Result<Workers>
    where
        S: Fn(usize, Listeners, Stop) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<Drained>>,
    {
        let count = sets.len();
        let stop = Arc::new(watch::Sender::new(false));
        let drained = Arc::new(watch::Sender::new(0));
        let serve = Arc::new(serve);
        let mut threads = Vec::with_capacity(count);
        for (index, listeners) in sets.into_iter().enumerate() {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .context("starting a worker's async runtime")?;
            let told = Stop(stop.subscribe());
            let (stop, drained, serve) = (stop.clone(), drained.clone(), serve.clone());
            let thread = std::thread::Builder::new()
                .name(format!("wedge-worker-{index}"))
                .spawn(move || {
                    run(runtime, count, stop, drained, || {
                        serve(index, listeners, told)
                    })
                })
                .context("starting a worker thread")?;
            threads.push(thread);
        }
        Ok(Workers {
            threads,
            stop,
            drained,
        })
    }

    /// Resolves once the workers are to stop (a worker that failed asks for it).
    pub async fn stopping(&self) {
        let _ = self.stop.subscribe().wait_for(|stop| *stop).await;
    }

    /// Tells every worker to stop accepting and drain.
    pub fn stop(&self) {
        self.stop.send_replace(true);
    }

    /// Resolves once every worker has drained.
    pub async fn drained(&self) {
        let count = self.threads.len();
        let _ = self.drained.subscribe().wait_for(|&n| n == count).await;
    }

    /// Waits for the threads to end; the first error a worker had.
    pub fn join(self) -> Result<()> {
        let mut result = Ok(());
        for thread in self.threads {
            let ended = thread
                .join()
                .unwrap_or_else(|_| Err(anyhow!("a worker thread panicked")));
            if result.is_ok() {
                result = ended;
            }
        }
        result
    }
}

/// One worker's thread: serves, drains, and keeps its runtime running until all
/// `count` workers have drained.
fn run<Fut>(
    runtime: Runtime,
    count: usize,
    stop: Arc<watch::Sender<bool>>,
    drained: Arc<watch::Sender<usize>>,
    serve: impl FnOnce() -> Fut,
) -> Result<()>
where
    Fut: Future<Output = Result<Drained>>,
{
    let done = Done(drained.clone());
    let served = runtime.block_on(async {
        let served = serve().await;
        if served.is_err() {
            stop.send_replace(true);
        }
        let everyone = async {
            let mut all = drained.subscribe();
            drop(done);
            let _ = all.wait_for(|&n| n == count).await;
        };
        match served {
            Ok(worker) => {
                worker.refuse_until(everyone).await;
                Ok(())
            }
            Err(err) => {
                everyone.await;
                Err(err)
            }
        }
    });
    // Only now: no other worker needs this runtime's tasks any more.
    drop(runtime);
    served
}
