//! The process-wide wasmtime engines: pooling allocator, copy-on-write memory
//! images and epoch interruption driven by one ticker thread.
//!
//! Two engines, alike but for wasmtime's component-model concurrency: WASI 0.3
//! components (whose reused instances wasmtime-wasi-http's `ProxyHandler` runs
//! inside `Store::run_concurrent`) need it; a WASI 0.2 component, whose handler
//! wedge calls plainly on fresh and reused instances alike, does not, and with it
//! on wasmtime 48 pays for it at every host call
//! (`call_sync_lower`: `host_task_create` pushes a `HostTask` into the store's
//! concurrent state and makes it the current thread, `host_task_delete` undoes both;
//! borrows are scoped by task through `current_scope_id`).
//!
//! With tiered compilation (`tiered`) each has a sibling compiling with Winch,
//! wasmtime's baseline compiler, whose code only runs on an engine configured for it;
//! each with a pool of its own, as the two above have, so `--max-instances` bounds
//! instances of apps on Winch's code too.

use std::sync::OnceLock;
use std::time::Duration;

use anyhow::{Context, Result};
use wasmtime::{
    Config, Enabled, Engine, InstanceAllocationStrategy, PoolingAllocationConfig, Strategy,
};

use super::compile::Compile;

/// How often the epoch advances. Guest code yields to its worker at every tick
/// and CPU limits are checked at this granularity.
pub const EPOCH_TICK: Duration = Duration::from_millis(10);

/// Pool sizing for the pooling allocator.
#[derive(Debug, Clone)]
pub struct PoolConfig {
    /// Instances that can be alive at once across all apps.
    pub max_instances: u32,
    /// The largest linear memory any app may be given, in bytes.
    pub max_memory: u64,
    /// Linear memory a pool slot keeps resident between instances, in bytes
    /// (0: give every page back). Used only where the kernel has `PAGEMAP_SCAN`.
    pub keep_resident: u64,
}

impl Default for PoolConfig {
    fn default() -> Self {
        PoolConfig {
            max_instances: 1000,
            max_memory: crate::host::limits::DEFAULT_MEMORY,
            keep_resident: DEFAULT_KEEP_RESIDENT,
        }
    }
}

fn base_config(concurrency: bool, strategy: Strategy) -> Config {
    let mut config = Config::new();
    config.strategy(strategy);
    config.concurrency_support(concurrency);
    config.epoch_interruption(true);
    config.memory_init_cow(true);
    config.wasm_component_model(true);
    config
}

/// The largest memory the pool holds, once the engine is built with a pool.
static POOL_MAX_MEMORY: OnceLock<u64> = OnceLock::new();

/// The largest linear memory an instance can be given, when instances come from the
/// pool (`None` with on-demand allocation, which has no such bound).
pub fn pool_max_memory() -> Option<u64> {
    POOL_MAX_MEMORY.get().copied()
}

/// The engine without component-model concurrency that goes with `engine`, when
/// `engine` is the one [`build_engine`] made.
static WITHOUT_CONCURRENCY: OnceLock<(Engine, Engine)> = OnceLock::new();

/// The engine for WASI 0.2 wasi:http components: like
/// `engine` but without component-model concurrency (see the module's doc). `None`
/// when `engine` has no such sibling (not made by [`build_engine`]).
pub(crate) fn without_concurrency(engine: &Engine) -> Option<&'static Engine> {
    let (with, without) = WITHOUT_CONCURRENCY.get()?;
    Engine::same(engine, with).then_some(without)
}

/// The Winch siblings of the two engines [`build_engine`] made, when tiered
/// compilation is on: (Cranelift engine, its Winch sibling).
static BASELINE: OnceLock<[(Engine, Engine); 2]> = OnceLock::new();

/// The engine compiling with Winch for `engine`'s apps, when tiered compilation is on.
pub(crate) fn baseline(engine: &Engine) -> Option<&'static Engine> {
    let pairs = BASELINE.get()?;
    pairs
        .iter()
        .find(|(optimized, _)| Engine::same(optimized, engine))
        .map(|(_, baseline)| baseline)
}

/// Builds the engine (and its sibling without concurrency, each with a pool of
/// `pool`'s size), falling back to on-demand allocation (with a warning) when a
/// pool's address space cannot be reserved; with `compile` tiered, their Winch
/// siblings too.
pub fn build_engine(pool: &PoolConfig, compile: Compile) -> Result<Engine> {
    let pool = &if PoolingAllocationConfig::is_pagemap_scan_available() {
        without_resident_pages_under_swap(pool, read_proc_swaps())
    } else {
        pool.clone()
    };
    let arch = std::env::consts::ARCH;
    let compile = match compile_mode_on(compile, arch) {
        Ok(compile) => compile,
        Err(fallback) => {
            tracing::warn!(
                "compile mode `tiered` needs Winch, a supported wasmtime compiler on x86_64 \
                 only (this host is {arch}): compiling `{fallback}` instead"
            );
            fallback
        }
    };
    let engine = pooled_engine(pool, true, Strategy::Cranelift)?;
    let without = pooled_engine(pool, false, Strategy::Cranelift)?;
    let mut ticked = vec![engine.clone(), without.clone()];
    if compile == Compile::Tiered {
        let pairs = [
            (engine.clone(), pooled_engine(pool, true, Strategy::Winch)?),
            (
                without.clone(),
                pooled_engine(pool, false, Strategy::Winch)?,
            ),
        ];
        ticked.extend(pairs.iter().map(|(_, baseline)| baseline.clone()));
        let _ = BASELINE.set(pairs);
    }
    start_epoch_ticker(ticked)?;
    let _ = WITHOUT_CONCURRENCY.set((engine.clone(), without));
    Ok(engine)
}

/// `wedge dev`'s compile mode when none is given: `tiered` where Winch runs (every
/// rebuild is a component the cache has never seen, so the edit-to-answer loop waits
/// for its compile: Winch is ~5-6x faster than Cranelift on a JS component), else
/// `optimized`, without the warning an explicit `tiered` gets there.
pub fn development_compile_mode() -> Compile {
    compile_mode_on(Compile::Tiered, std::env::consts::ARCH).unwrap_or_else(|fallback| fallback)
}

/// The compile mode `requested` runs with on a host of architecture `arch`
/// (`std::env::consts::ARCH`), or, where it cannot, the one to run instead: Winch,
/// tiered compilation's baseline compiler, is a Tier 1 wasmtime target on x86_64
/// alone (elsewhere it lacks instructions some components use), so `tiered` falls
/// back to `optimized` there rather than compile such components twice or fail.
fn compile_mode_on(requested: Compile, arch: &str) -> Result<Compile, Compile> {
    match requested {
        Compile::Tiered if arch != "x86_64" => Err(Compile::Optimized),
        mode => Ok(mode),
    }
}

fn pooled_engine(pool: &PoolConfig, concurrency: bool, strategy: Strategy) -> Result<Engine> {
    let mut pooling = PoolingAllocationConfig::default();
    pooling
        .total_component_instances(pool.max_instances)
        .total_core_instances(pool.max_instances * 4)
        .total_memories(pool.max_instances)
        .total_tables(pool.max_instances * 4)
        .max_memory_size(pool.max_memory as usize);
    keep_pages_resident(&mut pooling, pool.keep_resident);
    let mut config = base_config(concurrency, strategy);
    config.allocation_strategy(InstanceAllocationStrategy::Pooling(pooling));
    match Engine::new(&config) {
        Ok(engine) => {
            let _ = POOL_MAX_MEMORY.set(pool.max_memory);
            Ok(engine)
        }
        Err(err) => {
            tracing::warn!(
                "pooling allocator unavailable ({err}); falling back to on-demand instance allocation"
            );
            Engine::new(&base_config(concurrency, strategy))
                .map_err(anyhow::Error::from)
                .context("creating the wasm engine")
        }
    }
}

/// Linear memory (and table) bytes a pool slot keeps resident between instances,
/// when the kernel can tell which pages an instance dirtied (`PAGEMAP_SCAN`,
/// Linux 6.7+). A fresh instance of a typical Rust guest touches a few dozen pages
/// spread over its first megabytes (shadow stack, data, heap); giving them back
/// with `madvise` and faulting them in again on the next request costs more
/// than the guest's own work. With the scan only the dirtied pages are reset, so
/// the bound costs nothing for pages never touched.
const DEFAULT_KEEP_RESIDENT: u64 = 16 << 20;
const TABLE_KEEP_RESIDENT: usize = 1 << 20;

/// `pool` as it may run where `proc_swaps` (`/proc/swaps`, `None` if unreadable) is
/// the kernel's list of swap areas: with any, or without the list, no page is kept
/// resident. wasmtime 48.0.10's `PAGEMAP_SCAN` reset finds the pages an instance
/// dirtied among those *present*: a dirtied page the kernel swapped out is neither
/// reset nor given back, so the next instance in that slot, another tenant's
/// perhaps, would read it. Giving every page back (`madvise`) drops swapped pages
/// too. Tables go with it: `keep_pages_resident` keeps them resident only with
/// memory. (Fixed upstream in 48.0.11 and 50.0.0; 48.0.11 cannot be installed from
/// crates.io, a crate of its release is missing, and 50.0.1 costs a fresh instance
/// 1.5x: BENCHMARKS.md, (n).)
fn without_resident_pages_under_swap(pool: &PoolConfig, proc_swaps: Option<String>) -> PoolConfig {
    let swap_areas = proc_swaps.map(|list| {
        list.lines()
            .skip(1)
            .filter(|l| !l.trim().is_empty())
            .count()
    });
    if pool.keep_resident == 0 || swap_areas == Some(0) {
        return pool.clone();
    }
    match swap_areas {
        Some(areas) => tracing::warn!(
            "swap is on ({areas} area(s) in /proc/swaps): pool slots give every page back \
             between instances (--pool-keep-resident ignored), so that no page an instance \
             dirtied, swapped out, outlives it"
        ),
        None => tracing::warn!(
            "/proc/swaps unreadable: pool slots give every page back between instances \
             (--pool-keep-resident ignored), as if swap were on"
        ),
    }
    PoolConfig {
        keep_resident: 0,
        ..pool.clone()
    }
}

fn read_proc_swaps() -> Option<String> {
    std::fs::read_to_string("/proc/swaps").ok()
}

fn keep_pages_resident(pooling: &mut PoolingAllocationConfig, bytes: u64) {
    // Without the scan, keeping pages resident means a `memset` of the whole bound
    // on every instance's exit: slower than `madvise` for bounds this large.
    if bytes > 0 && PoolingAllocationConfig::is_pagemap_scan_available() {
        tracing::debug!("pool slots keep up to {bytes} bytes of linear memory resident");
        pooling
            .pagemap_scan(Enabled::Yes)
            .linear_memory_keep_resident(bytes as usize)
            .table_keep_resident(TABLE_KEEP_RESIDENT);
    }
}

/// Starts the one epoch ticker of this process, for all its engines. wedge builds
/// its engines once per process; a second call is refused rather than starting a
/// second ticker.
fn start_epoch_ticker(engines: Vec<Engine>) -> Result<()> {
    static STARTED: OnceLock<()> = OnceLock::new();
    anyhow::ensure!(
        STARTED.set(()).is_ok(),
        "the epoch ticker already runs: one engine per process"
    );
    std::thread::Builder::new()
        .name("wedge-epoch".into())
        .spawn(move || {
            loop {
                std::thread::sleep(EPOCH_TICK);
                for engine in &engines {
                    engine.increment_epoch();
                }
            }
        })
        .context("starting the epoch ticker thread")?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tiered_compilation_runs_on_x86_64_only_and_falls_back_to_optimized_elsewhere() {
        assert_eq!(
            compile_mode_on(Compile::Tiered, "x86_64"),
            Ok(Compile::Tiered)
        );
        for arch in ["aarch64", "riscv64", "s390x"] {
            let mode = compile_mode_on(Compile::Tiered, arch);
            assert_eq!(mode, Err(Compile::Optimized), "{arch}");
            assert_eq!(
                compile_mode_on(Compile::Optimized, arch),
                Ok(Compile::Optimized)
            );
        }
    }

    #[test]
    fn no_page_is_kept_resident_where_the_kernel_may_swap_or_does_not_say() {
        let header = "Filename\tType\tSize\tUsed\tPriority\n";
        let kept = |list: Option<&str>, bytes| {
            let pool = PoolConfig {
                keep_resident: bytes,
                ..PoolConfig::default()
            };
            without_resident_pages_under_swap(&pool, list.map(String::from)).keep_resident
        };
        assert_eq!(kept(Some(header), 16 << 20), 16 << 20, "no swap area");
        let zram = format!("{header}/dev/zram0  partition\t4194300\t0\t100\n");
        assert_eq!(kept(Some(&zram), 16 << 20), 0, "a swap area");
        assert_eq!(kept(None, 16 << 20), 0, "no list");
        assert_eq!(kept(Some(&zram), 0), 0, "already off");
    }
}
