//! Tiered compilation, the host's part: a component the precompiled cache does not
//! hold is compiled first by Winch, wasmtime's baseline compiler (a 13 MB
//! componentize-js component: ~5× faster to compile than with Cranelift, its code
//! slower), and served at once. Its first request calls what tenancy asked for
//! (`App::on_first_request`): queue, on the one background compiler
//! ([`in_background`]), its Cranelift compile ([`App::optimized`]), whose result
//! goes into the precompiled cache and replaces the app in its slot as a redeploy
//! does (`tenancy::tiering`). A start that finds Cranelift's code in the cache loads
//! it and never runs Winch.
//!
//! The compile waits for the first request so that an app nobody calls costs no more
//! CPU, and so that the first request does not share the CPU with Cranelift before
//! it has started.

use std::sync::{Mutex, OnceLock};

use wasmtime::Engine;

use super::cache::ArtifactCache;
use super::componentize::Adapter;
use super::executor::Executor;
use super::first_request::FirstRequest;

/// What an app running Winch's code needs to be compiled again by Cranelift.
pub(crate) struct Baseline {
    /// Taken by the one compile: kept no longer than it runs, whatever its outcome.
    pub(super) wasm: Mutex<Option<Vec<u8>>>,
    pub(super) adapter: Option<Adapter>,
    pub(super) executor: Executor,
    /// Whether it runs on the engine with component-model concurrency.
    pub(super) p3: bool,
    /// The Cranelift engine its optimized code is for.
    pub(super) optimized: Engine,
    pub(super) cache: ArtifactCache,
    /// What its first request sets off.
    pub(super) first_request: FirstRequest,
}

impl Baseline {
    pub(crate) fn new(
        wasm: &[u8],
        adapter: Option<Adapter>,
        executor: Executor,
        p3: bool,
        optimized: Engine,
        cache: ArtifactCache,
    ) -> Baseline {
        Baseline {
            wasm: Mutex::new(Some(wasm.to_vec())),
            adapter,
            executor,
            p3,
            optimized,
            cache,
            first_request: FirstRequest::default(),
        }
    }
}

/// Runs `job` on the one background compiler: a single thread (so one compile at a
/// time; wasmtime's parallel compilation runs on the rayon pool it is called from)
/// at a lower priority than the workers serving requests.
pub fn in_background(job: impl FnOnce() + Send + 'static) {
    static POOL: OnceLock<Option<rayon::ThreadPool>> = OnceLock::new();
    let pool = POOL.get_or_init(|| {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(1)
            .thread_name(|_| "wedge-optimize".into())
            .start_handler(|_| lower_priority())
            .build();
        pool.map_err(|err| {
            tracing::warn!(
                "cannot start the background compiler ({err}); apps keep their baseline code"
            )
        })
        .ok()
    });
    let Some(pool) = pool else { return };
    // A panic in a job spawned on a rayon pool aborts the process: one tenant's
    // component would stop every tenant (and again after each restart, as nothing
    // was cached). Caught, it leaves that app on its baseline code.
    pool.spawn(move || {
        if std::panic::catch_unwind(std::panic::AssertUnwindSafe(job)).is_err() {
            tracing::error!("a background compile panicked; its app keeps its baseline code");
        }
    });
}

/// Nice 10 for the calling thread (Linux applies `setpriority` to a thread id).
#[cfg(target_os = "linux")]
fn lower_priority() {
    // SAFETY: plain system calls about the calling thread itself.
    let failed = unsafe {
        let tid = libc::gettid();
        libc::setpriority(libc::PRIO_PROCESS, tid as libc::id_t, 10) != 0
    };
    if failed {
        tracing::debug!(
            "the background compiler runs at normal priority: {}",
            std::io::Error::last_os_error()
        );
    }
}

/// Elsewhere `setpriority` would lower the whole process.
#[cfg(not(target_os = "linux"))]
fn lower_priority() {}

/// Gives the heap freed since back to the system: Cranelift's working memory for a
/// big component is hundreds of MiB, which glibc's allocator keeps unless asked.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
pub fn release_freed_memory() {
    // SAFETY: no arguments to get wrong; glibc locks its arenas itself.
    unsafe {
        libc::malloc_trim(0);
    }
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
pub fn release_freed_memory() {}
