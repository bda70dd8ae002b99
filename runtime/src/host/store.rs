//! Per-request store state: the WASI, wasi:http and wasi:keyvalue contexts and the limits
//! (linear memory, CPU time, host memory) with the hooks that enforce them.

use std::pin::Pin;
use std::sync::{Arc, Weak};
use std::time::Instant;

use wasmtime::component::ResourceTable;
use wasmtime::{CallHook, Store, StoreContextMut, UpdateDeadline};
use wasmtime_wasi::cli::{StdinStream, StdoutStream};
use wasmtime_wasi::{WasiCtx, WasiCtxView, WasiView};
use wasmtime_wasi_config::WasiConfig;
use wasmtime_wasi_http::p2::body::HostOutgoingBody;
use wasmtime_wasi_http::{WasiHttpCtx, WasiHttpCtxView, WasiHttpView};

use super::guest_log::{Channel, GuestLog, GuestOutput};
use super::hooks::{GuestHooks, OutboundGate};
use super::keyvalue::{AppStore, KvHandles, KvView};
use super::limits::Limits;
use super::limits::cpu::CpuMeter;
use super::limits::host_memory::HostMemoryBudget;
use super::limits::linear_memory::MemoryLimiter;
use super::vars::GuestVars;

/// Everything a request's `Store` holds.
pub struct GuestState {
    wasi: WasiCtx,
    http: WasiHttpCtx,
    table: ResourceTable,
    hooks: GuestHooks,
    vars: GuestVars,
    keyvalue: Arc<AppStore>,
    kv_handles: KvHandles,
    /// Where wedge's lines about the app go (a key-value backend's fault).
    output: Arc<GuestOutput>,
    pub(crate) limiter: MemoryLimiter,
    pub(crate) cpu: CpuMeter,
    pub(crate) host_memory: HostMemoryBudget,
}

impl GuestState {
    /// Starts one more request on a reused instance, held while `claim` lives: its
    /// CPU share (see [`CpuMeter::admit_request`]), and, on an instance no other
    /// request holds, a memory limiter with no denial left from earlier requests
    /// (a later trap must not be blamed on it).
    pub(crate) fn admit_request(&mut self, claim: Weak<dyn Send + Sync>, one_at_a_time: bool) {
        if self.cpu.admit_request(claim, one_at_a_time, Instant::now()) {
            self.limiter.denied = false;
        }
    }

    /// Whether the guest still holds a WASI 0.2 outgoing body it has not finished
    /// (one it may write to, or drop unfinished, in a later call).
    pub(crate) fn holds_unfinished_body(&mut self) -> bool {
        self.table
            .iter_mut()
            .any(|entry| entry.is::<HostOutgoingBody>())
    }
}

impl WasiView for GuestState {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView {
            ctx: &mut self.wasi,
            table: &mut self.table,
        }
    }
}

impl WasiHttpView for GuestState {
    fn http(&mut self) -> WasiHttpCtxView<'_> {
        WasiHttpCtxView {
            ctx: &mut self.http,
            table: &mut self.table,
            hooks: &mut self.hooks,
        }
    }
}

impl GuestState {
    /// The app's wasi:config/store values.
    pub(crate) fn config(&mut self) -> WasiConfig<'_> {
        WasiConfig::new(&self.vars.config)
    }

    /// The app's key-value store, as every wasi:keyvalue version sees it.
    pub(crate) fn keyvalue(&mut self) -> KvView<'_> {
        KvView {
            table: &mut self.table,
            store: &self.keyvalue,
            log: &self.output,
            host_memory: &self.host_memory,
            handles: &mut self.kv_handles,
        }
    }
}

/// The guest/host transitions meter CPU time (wasm and the host calls it makes,
/// see [`CpuMeter`]) and charge what host calls allocate to the instance's host
/// memory, which is checked as each host call returns.
fn meter_at_transitions(store: &mut Store<GuestState>) {
    store.call_hook(|mut ctx: StoreContextMut<'_, GuestState>, hook| {
        let state = ctx.data_mut();
        match hook {
            CallHook::CallingWasm => state.cpu.calling_wasm(Instant::now),
            CallHook::ReturningFromWasm => state.cpu.returning_from_wasm(Instant::now),
            CallHook::CallingHost => {
                if state.host_memory.calling_host() {
                    state.cpu.calling_host(Instant::now);
                }
            }
            CallHook::ReturningFromHost => {
                if let Some(parked) = state.host_memory.returning_from_host() {
                    state.cpu.returning_from_host(parked, Instant::now);
                }
                if state.host_memory.over_budget() {
                    wasmtime::bail!("host memory limit exceeded");
                }
            }
        }
        Ok(())
    });
}

/// A program's own environment and stdio, instead of a guest's usual ones (the app's
/// environment, an empty stdin, stdout to the log): a WAGI program's CGI variables,
/// request and response.
pub(crate) struct ProgramStdio {
    pub env: Vec<(String, String)>,
    pub stdin: Box<dyn StdinStream + Sync>,
    pub stdout: Box<dyn StdoutStream + Sync>,
}

/// Creates the store for one request with the app's limits, outbound policy,
/// variables and key-value store installed; `cgi`: a WAGI program's request and
/// response instead of an empty stdin, stdout to the log and the app's environment.
pub(super) fn new_store(
    engine: &wasmtime::Engine,
    output: &Arc<GuestOutput>,
    limits: &Limits,
    outbound: &Arc<OutboundGate>,
    vars: &GuestVars,
    keyvalue: &Arc<AppStore>,
    cgi: Option<ProgramStdio>,
) -> Store<GuestState> {
    // The environment is exactly the app's (with a WAGI program's CGI variables): the
    // builder starts empty and never inherits the host's.
    // A guest's asks are bounded by its host-memory budget one by one too: random
    // bytes in one call, guest data copied into one host call (hostcall fuel).
    let mut wasi = WasiCtx::builder();
    wasi.stderr(GuestLog::new(output.clone(), Channel::Stderr))
        .max_random_size(limits.host_memory);
    match cgi {
        None => wasi
            .envs(&vars.env)
            .stdout(GuestLog::new(output.clone(), Channel::Stdout)),
        Some(cgi) => wasi.envs(&cgi.env).stdin(cgi.stdin).stdout(cgi.stdout),
    };
    let wasi = wasi.build();
    let mut table = ResourceTable::new();
    table.set_max_capacity(limits.max_resources as usize);
    let state = GuestState {
        wasi,
        http: WasiHttpCtx::new(),
        table,
        hooks: GuestHooks::new(output.clone(), outbound.clone(), limits.host_memory),
        vars: vars.clone(),
        keyvalue: keyvalue.clone(),
        kv_handles: KvHandles::default(),
        output: output.clone(),
        limiter: MemoryLimiter {
            limit: limits.memory,
            denied: false,
        },
        cpu: CpuMeter::new(limits.cpu_time),
        host_memory: HostMemoryBudget::new(limits.host_memory, limits.max_resources),
    };
    let mut store = Store::new(engine, state);
    store.limiter(|state| &mut state.limiter);
    let max_resources = limits.max_resources as usize;
    store.set_max_component_handles(max_resources);
    if let Some(table) = store.concurrent_resource_table() {
        table.set_max_capacity(max_resources);
    }
    store.set_hostcall_fuel(usize::try_from(limits.host_memory).unwrap_or(usize::MAX));
    meter_at_transitions(&mut store);
    store.set_epoch_deadline(1);
    store.epoch_deadline_callback(|mut ctx| {
        let state = ctx.data_mut();
        let now = Instant::now();
        if state.host_memory.in_parked_host_call() {
            state.cpu.host_call_parked(now);
        }
        if state.cpu.over_budget(now) {
            state.cpu.exceeded = true;
            return Ok(UpdateDeadline::Interrupt);
        }
        if state.host_memory.over_budget() {
            return Ok(UpdateDeadline::Interrupt);
        }
        // Yield at every tick so one busy guest delays others on its worker
        // by at most one tick.
        Ok(UpdateDeadline::YieldCustom(1, yield_behind_io()))
    });
    store
}

/// One turn of the worker's runtime for a busy guest, behind the I/O it has to look
/// at: wasmtime's own `Yield` wakes its task at once, and a current-thread runtime
/// polls its I/O driver only every 61 task polls (`event_interval`), so a spinning
/// guest kept its worker's other connections waiting ~0.6 s (61 ticks), not one
/// tick. tokio's `yield_now` defers the wake until the driver has been polled.
fn yield_behind_io() -> Pin<Box<dyn Future<Output = ()> + Send>> {
    Box::pin(tokio::task::yield_now())
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicBool, Ordering};

    use super::*;

    /// What a worker sees while a guest yields at every tick: a datagram ready on
    /// a socket of the same runtime is read at the guest's next yield or the one
    /// after, not after the 61 a self-wake took.
    #[test]
    fn a_busy_guest_lets_its_worker_read_ready_io_at_its_next_yield() {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        runtime.block_on(async {
            let socket = tokio::net::UdpSocket::bind("127.0.0.1:0").await.unwrap();
            let to = socket.local_addr().unwrap();
            let read = Arc::new(AtomicBool::new(false));
            let reader = tokio::spawn({
                let read = read.clone();
                async move {
                    socket.recv(&mut [0; 1]).await.unwrap();
                    read.store(true, Ordering::Release);
                }
            });
            // The reader waits on the socket before the datagram is sent.
            tokio::task::yield_now().await;
            let sender = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
            sender.send_to(b"x", to).unwrap();
            // The guest runs in a task of its own, as on a worker.
            let guest = tokio::spawn(async move {
                let mut yields = 0;
                while !read.load(Ordering::Acquire) && yields < 1000 {
                    yield_behind_io().await;
                    yields += 1;
                }
                yields
            });
            let yields = guest.await.unwrap();
            assert!(yields <= 2, "the datagram was read after {yields} yields");
            reader.await.unwrap();
        });
    }
}
