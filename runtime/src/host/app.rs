//! An app: one validated, compiled and pre-instantiated component (a wasi:http
//! handler or a WAGI program) with its name, limits, admission, outbound policy and
//! guest variables.

use std::borrow::Cow;
use std::sync::{Arc, OnceLock, Weak};
use std::time::Instant;

use anyhow::{Context, Result, bail};
use http::{Response, StatusCode};
use wasmtime::component::{Component, InstancePre, Linker};
use wasmtime::{Engine, Store};
use wasmtime_wasi::p2::bindings::CommandPre;
use wasmtime_wasi_http::handler::{ProxyHandler, ProxyPre};
use wasmtime_wasi_http::p2::bindings::Proxy;
use wasmtime_wasi_http::p3::bindings::ServicePre;

use super::admission::{Admission, Refused};
use super::cache::ArtifactCache;
use super::call::{Idle, Kept, Retired};
use super::componentize::{self, Adapter, Binary};
use super::executor::Executor;
use super::fault::Fault;
use super::guest_log::GuestOutput;
use super::hooks::OutboundGate;
use super::keyvalue::AppStore;
use super::limits::Limits;
use super::limits::guest_output::OutputBudget;
use super::needs_concurrency::HANDLER_P3;
use super::outbound::Outbound;
use super::response::{plain, retry_later, too_large};
use super::response_body::ResponseBody;
use super::store::{GuestState, ProgramStdio};
use super::tiered::Baseline;
use super::vars::GuestVars;
use crate::metrics::AppMetrics;

/// The export a p2 HTTP handler provides; any 0.2.x minor version is accepted.
const INCOMING_HANDLER_P2: &str = "wasi:http/incoming-handler@0.2.";
/// The export a WAGI program runs (a command's `main`); any 0.2.x is accepted.
const CLI_RUN: &str = "wasi:cli/run@0.2.";

/// A component ready to serve requests.
pub struct App {
    pub(crate) name: Arc<str>,
    pub(crate) limits: Limits,
    pub(crate) outbound: Arc<OutboundGate>,
    /// The app's instance slots and queue, shared by its versions.
    pub(crate) admission: Arc<Admission>,
    /// Where its requests, instances, faults and refusals are counted.
    pub(crate) metrics: Arc<AppMetrics>,
    /// Where its guests' stdout and stderr go, within its output budget.
    pub(crate) output: Arc<GuestOutput>,
    /// The environment variables and wasi:config values its guest sees.
    pub(crate) vars: GuestVars,
    /// Its wasi:keyvalue store (by default none: every bucket refused).
    pub(crate) keyvalue: Arc<AppStore>,
    pub(crate) pre: Pre,
    /// Its reused instances (p3 always, p2 when `instance_reuse` > 1), made on
    /// the first request.
    pub(crate) workers: Workers,
    /// While it runs Winch's code: what it takes to compile it with Cranelift
    /// (see `tiered`).
    pub(crate) baseline: Option<Baseline>,
}

/// An app version's reused instances.
#[derive(Default)]
pub(crate) struct Workers {
    /// WASI 0.3: one `ProxyHandler`, made on the first request. Its workers hold
    /// their app version (not the other way round: the handler knows the app only
    /// weakly), so an unloaded version's instances finish what they have and go
    /// once idle, at once when the version is retired.
    pub(crate) p3: OnceLock<ProxyHandler<AppInstances>>,
    pub(crate) retired: Retired,
    /// WASI 0.2: the instances waiting for a request, dropped with the version
    /// (the ones still serving go once their request is done).
    pub(crate) p2_idle: Arc<Idle<Kept>>,
}

/// Makes an app's reused instances (`call/reused/policy.rs` says how).
pub(crate) struct AppInstances {
    pub(crate) app: Weak<App>,
}

/// The pre-instantiated component: a wasi:http handler (p2 or p3), or a WAGI
/// program (a `wasi:cli/command`).
pub(crate) enum Pre {
    Http(ProxyPre<GuestState>),
    Wagi(CommandPre<GuestState>),
}

impl Pre {
    pub(crate) fn engine(&self) -> &Engine {
        match self {
            Pre::Http(ProxyPre::P2(pre)) => pre.engine(),
            Pre::Http(ProxyPre::P3(pre)) => pre.engine(),
            Pre::Wagi(pre) => pre.engine(),
        }
    }

    /// The compiled component.
    pub(crate) fn component(&self) -> &Component {
        match self {
            Pre::Http(ProxyPre::P2(pre)) => pre.instance_pre().component(),
            Pre::Http(ProxyPre::P3(pre)) => pre.instance_pre().component(),
            Pre::Wagi(pre) => pre.instance_pre().component(),
        }
    }

    /// Whether the component exports the p3 `wasi:http/handler`.
    pub(crate) fn is_p3(&self) -> bool {
        matches!(self, Pre::Http(ProxyPre::P3(_)))
    }

    /// Either wasi:http world, as wasmtime-wasi-http's `ProxyHandler` instantiates
    /// it; `None` for a WAGI program (never reused: see `App::load`).
    pub(crate) fn either(&self) -> Option<&ProxyPre<GuestState>> {
        match self {
            Pre::Http(pre) => Some(pre),
            Pre::Wagi(_) => None,
        }
    }

    /// A p2 instance for the fresh-instance path. p3 components never take that
    /// path (their requests go to reused instances), nor WAGI programs (theirs is
    /// `wagi`), so for them this is an error.
    pub(crate) async fn instantiate_async(
        &self,
        store: &mut wasmtime::Store<GuestState>,
    ) -> wasmtime::Result<Proxy> {
        match self {
            Pre::Http(ProxyPre::P2(pre)) => pre.instantiate_async(store).await,
            Pre::Http(ProxyPre::P3(_)) | Pre::Wagi(_) => Err(wasmtime::format_err!(
                "the component has no p2 handler to call"
            )),
        }
    }
}

impl App {
    /// Validates, compiles (or loads from `cache`) and pre-instantiates `wasm` to run
    /// as `executor` says: a wasi:http component, or a core module that embeds a
    /// wasi:http world; or, for WAGI, a `wasi:cli/command` component or a preview 1
    /// command module. A module is made a component first (see `componentize`).
    pub fn load(
        engine: &Engine,
        cache: &ArtifactCache,
        name: &str,
        wasm: &[u8],
        executor: Executor,
        limits: Limits,
    ) -> Result<App> {
        let binary = Binary::of(wasm)?;
        if let Some(pool) = super::engine::pool_max_memory()
            && limits.memory > pool
        {
            bail!(
                "its memory limit ({} MiB) is more than this host's instance pool holds ({} MiB); \
                 start wedge with a larger --memory",
                limits.memory >> 20,
                pool >> 20
            );
        }
        if executor == Executor::Wagi && limits.reuse.requests.is_some_and(|n| n > 1) {
            bail!(
                "a WAGI program runs once per request: `instance_reuse` (--instance-reuse) \
                 does not apply to it"
            );
        }
        let started = Instant::now();
        let adapter = match (binary, executor) {
            (Binary::Component, _) => None,
            (Binary::Module, Executor::WasiHttp) => Some(Adapter::Reactor),
            (Binary::Module, Executor::Wagi) => Some(Adapter::Command),
        };
        let load = Load::new(cache, wasm, adapter, executor);
        let prepared = load.prepare(engine)?;
        let elapsed = started.elapsed().as_millis();
        let made = adapter.map_or(String::new(), |adapter| {
            format!(
                " (a wasm module, componentized with the WASI preview 1 {} adapter)",
                adapter.name()
            )
        });
        if prepared.from_cache {
            tracing::info!("loaded app `{name}`{made} from the precompiled cache in {elapsed} ms");
        } else if prepared.baseline.is_some() {
            // Winch's code is not cached: the cache holds what a start should load.
            tracing::info!(
                "compiled app `{name}`{made} with the baseline compiler (Winch) in {elapsed} ms; \
                 after its first request it is compiled optimized in the background"
            );
        } else if cache.is_enabled() {
            // Only a component that passed validation is worth keeping.
            cache.store(&prepared.engine, &load.source(), &prepared.component);
            tracing::info!(
                "compiled app `{name}`{made} in {elapsed} ms (stored in the precompiled cache)"
            );
        } else {
            tracing::info!("compiled app `{name}`{made} in {elapsed} ms");
        }
        let name: Arc<str> = name.into();
        let metrics = AppMetrics::detached();
        let budget = OutputBudget::new(limits.log_rate, limits.log_burst);
        Ok(App {
            output: Arc::new(GuestOutput::new(name.clone(), budget, metrics.clone())),
            name,
            limits,
            outbound: Arc::new(OutboundGate::new(Outbound::default())),
            admission: Arc::new(Admission::new(Default::default())),
            metrics,
            vars: GuestVars::default(),
            keyvalue: AppStore::none(),
            pre: prepared.pre,
            workers: Default::default(),
            baseline: prepared.baseline,
        })
    }

    /// This app running `pre` instead: the same name, limits, admission, metrics,
    /// output, variables and stores; new reused instances.
    pub(crate) fn with_pre(&self, pre: Pre) -> App {
        App {
            name: self.name.clone(),
            limits: self.limits.clone(),
            outbound: self.outbound.clone(),
            admission: self.admission.clone(),
            metrics: self.metrics.clone(),
            output: self.output.clone(),
            vars: self.vars.clone(),
            keyvalue: self.keyvalue.clone(),
            pre,
            workers: Default::default(),
            baseline: None,
        }
    }

    /// This version gets no new requests from now on (another replaced it, or its
    /// app was removed): its idle reused instances go at once.
    pub(crate) fn retire(&self) {
        self.workers.retired.raise();
    }

    /// Lets the app's guest send outbound requests as `policy` allows
    /// (by default it may send none).
    pub fn with_outbound(mut self, policy: Outbound) -> App {
        self.outbound = Arc::new(OutboundGate::new(policy));
        self
    }

    /// Runs the app's instances within `admission`'s slots and queue (by default
    /// its own, with the default limits). Versions of one app share one.
    pub fn with_admission(mut self, admission: Arc<Admission>) -> App {
        self.admission = admission;
        self
    }

    /// Gives the app's guest exactly these environment variables (by default
    /// none; never the host's). A key given twice keeps its last value.
    pub fn with_env(mut self, env: impl IntoIterator<Item = (String, String)>) -> App {
        self.vars.set_env(env);
        self
    }

    /// Gives the app's guest these values through `wasi:config/store` (by
    /// default none). A key given twice keeps its last value.
    pub fn with_config(mut self, config: impl IntoIterator<Item = (String, String)>) -> App {
        self.vars.set_config(config);
        self
    }

    /// Gives the app's guest `store` through wasi:keyvalue (by default it has none).
    pub fn with_keyvalue(mut self, store: Arc<AppStore>) -> App {
        self.keyvalue = store;
        self
    }

    /// Counts the app's requests, instances, faults and refusals in `metrics` (by
    /// default in series no registry reads). Versions of one app share one.
    pub fn with_metrics(mut self, metrics: Arc<AppMetrics>) -> App {
        self.output = self.output.with_metrics(metrics.clone());
        self.metrics = metrics;
        self
    }

    /// The component the app runs (a module it was loaded as made one).
    pub fn component(&self) -> &Component {
        self.pre.component()
    }

    /// The app's name, as it appears in logs.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// A store for one instance of this app; `stdio`: a WAGI program's request and
    /// response.
    pub(super) fn new_store(&self, stdio: Option<ProgramStdio>) -> Store<GuestState> {
        super::store::new_store(
            self.pre.engine(),
            &self.output,
            &self.limits,
            &self.outbound,
            &self.vars,
            &self.keyvalue,
            stdio,
        )
    }

    /// Whether requests go to reused instances rather than a fresh one each: p3
    /// components always, p2 ones that asked for more than one request per instance.
    pub(crate) fn reuses_instances(&self) -> bool {
        self.pre.is_p3() || self.limits.reuse.requests.is_some_and(|n| n > 1)
    }

    /// 503 for a request no instance slot was found for; `Retry-After` tells
    /// clients to back off rather than retry at once.
    pub(super) fn busy(&self, refused: Refused) -> Response<ResponseBody> {
        self.metrics.refused();
        let limits = self.admission.limits();
        let why = match refused {
            Refused::QueueFull => format!("{} requests already wait", limits.queue),
            Refused::TimedOut => format!("none came free within {:?}", limits.queue_timeout),
            Refused::Abandoned => {
                // The client's doing, as often as it likes: not worth a line each.
                tracing::debug!(
                    "app `{}`: request refused: its connection abandoned {} requests \
                     still running (max_abandoned_per_connection)",
                    self.name,
                    limits.max_abandoned_per_connection
                );
                let text = "503 Service Unavailable: this connection abandoned too many \
                            requests that still run; retry later\n";
                return retry_later(plain(StatusCode::SERVICE_UNAVAILABLE, text.into()));
            }
        };
        self.output.warn(format_args!(
            "request refused: all {} instances busy and {why}",
            limits.max_concurrent
        ));
        retry_later(plain(
            StatusCode::SERVICE_UNAVAILABLE,
            format!("503 Service Unavailable: the app is busy ({why}); retry later\n"),
        ))
    }

    /// Logs a fault with the app's name and counts it.
    pub(super) fn report(&self, fault: &Fault) {
        self.output.fault(format_args!("{fault}"));
        self.metrics.fault(fault.kind());
    }

    pub(super) fn fault_response(
        &self,
        fault: &Fault,
        body_exceeded: bool,
    ) -> Response<ResponseBody> {
        if body_exceeded {
            return too_large(self.limits.max_body);
        }
        let status = fault.status();
        let reason = status.canonical_reason().unwrap_or("error");
        if *fault == Fault::PoolExhausted {
            return retry_later(plain(
                status,
                format!(
                    "{} {reason}: the host is busy; retry later\n",
                    status.as_u16()
                ),
            ));
        }
        plain(
            status,
            format!("{} {reason}: the handler failed\n", status.as_u16()),
        )
    }
}

/// The component a core module becomes with `adapter`, or, for a wasi:http module
/// that embeds no component world, why it cannot be served and what to do instead. A
/// WAGI program needs none: the command adapter gives it `wasi:cli/run`.
fn module_to_component(module: &[u8], adapter: Adapter) -> Result<Vec<u8>> {
    if adapter == Adapter::Reactor && !componentize::embeds_world(module)? {
        bail!(
            "this is a core wasm module that embeds no wasi:http world, not a component; \
             build it for `wasm32-wasip2`, or generate its wasi:http bindings with \
             wit-bindgen (a `wasm32-wasip1` module that embeds the world is made a \
             component when it is loaded), or wrap it with `wasm-tools component new`; \
             or, if it is a CGI program (it answers on stdout), serve it as WAGI \
             (`--wagi`, or `executor = \"wagi\"`)"
        );
    }
    componentize::componentize(module, adapter)
}

/// What [`App::load`] compiles and pre-instantiates.
pub(crate) struct Load<'a> {
    cache: &'a ArtifactCache,
    wasm: &'a [u8],
    adapter: Option<Adapter>,
    executor: Executor,
}

/// A component compiled (or loaded from the cache) and pre-instantiated.
struct Prepared {
    component: Component,
    pre: Pre,
    /// The engine its code is for.
    engine: Engine,
    from_cache: bool,
    /// Compiled by Winch: what it takes to compile it with Cranelift.
    baseline: Option<Baseline>,
}

impl<'a> Load<'a> {
    pub(crate) fn new(
        cache: &'a ArtifactCache,
        wasm: &'a [u8],
        adapter: Option<Adapter>,
        executor: Executor,
    ) -> Self {
        Load {
            cache,
            wasm,
            adapter,
            executor,
        }
    }

    /// What the cache is keyed by: what was loaded, so a cached module is not
    /// componentized again.
    pub(crate) fn source(&self) -> Vec<&'a [u8]> {
        match self.adapter {
            None => vec![self.wasm],
            Some(adapter) => vec![adapter.identity(), self.wasm],
        }
    }

    /// The component compiled (or loaded from the cache) and pre-instantiated for the
    /// engine that will serve it ([`Load::engines`]). A component the cache holds for
    /// one of them is loaded from there before anything is compiled. With tiered
    /// compilation on, a component not in the cache is compiled by Winch
    /// (`engine::baseline`), or by Cranelift if Winch cannot compile it. Only a failed
    /// compile moves on to the next engine or compiler: a component that compiled but
    /// does not link (or lacks the export its executor calls) would fail on every one,
    /// so its error is reported at once.
    fn prepare(&self, engine: &Engine) -> Result<Prepared> {
        let candidates = self.engines(engine);
        let source = self.source();
        for &(engine, p3) in &candidates {
            let Some(component) = self.cache.load(engine, &source) else {
                continue;
            };
            match self.pre_on(engine, &component, p3) {
                Ok(pre) => {
                    return Ok(Prepared {
                        component,
                        pre,
                        engine: engine.clone(),
                        from_cache: true,
                        baseline: None,
                    });
                }
                Err(err) => tracing::debug!("not served from the cached artifact: {err:#}"),
            }
        }
        let bytes = self.component_bytes()?;
        // Winch's code on each engine first, then (should Winch refuse the
        // component) Cranelift's.
        let baseline = candidates.iter().filter_map(|&(optimized, p3)| {
            super::engine::baseline(optimized).map(|baseline| (baseline, Some(optimized), p3))
        });
        let optimized = candidates
            .iter()
            .map(|&(optimized, p3)| (optimized, None, p3));
        let mut failed = None;
        for (engine, tiers_up_to, p3) in baseline.chain(optimized) {
            let compiler = if tiers_up_to.is_some() {
                "Winch"
            } else {
                "Cranelift"
            };
            let concurrency = if p3 { "with" } else { "without" };
            let started = Instant::now();
            let component = match Component::new(engine, &bytes) {
                Ok(component) => component,
                Err(err) => {
                    tracing::debug!(
                        "not compiled by {compiler} for the engine {concurrency} \
                         component-model concurrency: {err:#}"
                    );
                    failed = Some(anyhow::Error::from(err));
                    continue;
                }
            };
            tracing::debug!(
                "compiled by {compiler} for the engine {concurrency} component-model \
                 concurrency in {} ms",
                started.elapsed().as_millis()
            );
            let pre = self.pre_on(engine, &component, p3)?;
            let baseline = tiers_up_to.map(|optimized| {
                Baseline::new(
                    self.wasm,
                    self.adapter,
                    self.executor,
                    p3,
                    optimized.clone(),
                    self.cache.clone(),
                )
            });
            return Ok(Prepared {
                component,
                pre,
                engine: engine.clone(),
                from_cache: false,
                baseline,
            });
        }
        Err(failed.expect("the engine with concurrency is always a candidate"))
    }

    /// The engines (with whether each has component-model concurrency) the component
    /// may be served by, the one it should run on first: a WASI 0.2 wasi:http
    /// component (fresh or reused instances: wedge calls its handler plainly either
    /// way) runs on the engine without component-model concurrency
    /// (`engine::without_concurrency`), linked with WASI 0.2 only; WASI 0.3
    /// components and components importing what only the other engine links
    /// (`needs_concurrency`, told from the component before it is compiled) and WAGI
    /// programs run on `engine`, the second candidate for the others (for a
    /// component only it compiles).
    fn engines<'e>(&self, engine: &'e Engine) -> Vec<(&'e Engine, bool)> {
        // A module made a component by the preview 1 adapter imports WASI 0.2.
        let needs_concurrency =
            || self.adapter.is_none() && super::needs_concurrency::needs_concurrency(self.wasm);
        let without = super::engine::without_concurrency(engine)
            .filter(|_| self.executor == Executor::WasiHttp && !needs_concurrency());
        without
            .map(|without| (without, false))
            .into_iter()
            .chain([(engine, true)])
            .collect()
    }

    /// The component to compile: the bytes loaded, or the component a module becomes.
    fn component_bytes(&self) -> Result<Cow<'a, [u8]>> {
        Ok(match self.adapter {
            None => Cow::Borrowed(self.wasm),
            Some(adapter) => Cow::Owned(module_to_component(self.wasm, adapter)?),
        })
    }

    /// Compiled for `engine` (not taken from the cache) and pre-instantiated; `p3`:
    /// `engine` has component-model concurrency, so WASI 0.3 is linked.
    pub(crate) fn compile_on(&self, engine: &Engine, p3: bool) -> Result<(Component, Pre)> {
        let component = Component::new(engine, self.component_bytes()?)?;
        let pre = self.pre_on(engine, &component, p3)?;
        Ok((component, pre))
    }

    fn pre_on(&self, engine: &Engine, component: &Component, p3: bool) -> Result<Pre> {
        Ok(match self.executor {
            Executor::WasiHttp => {
                let world = check_exports(engine, component)?;
                if world == World::P3 && !p3 {
                    bail!("a WASI 0.3 component needs component-model concurrency");
                }
                Pre::Http(pre_instantiate(engine, component, world, p3)?)
            }
            Executor::Wagi => Pre::Wagi(pre_instantiate_command(engine, component)?),
        })
    }
}

/// Which wasi:http world a component serves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum World {
    P2,
    P3,
}

/// The world whose handler the component exports; p3 wins if it exports both.
fn check_exports(engine: &Engine, component: &Component) -> Result<World> {
    let ty = component.component_type();
    let exports: Vec<String> = ty
        .exports(engine)
        .map(|(name, _)| name.to_string())
        .collect();
    if exports.iter().any(|e| e.starts_with(HANDLER_P3)) {
        return Ok(World::P3);
    }
    if exports.iter().any(|e| e.starts_with(INCOMING_HANDLER_P2)) {
        return Ok(World::P2);
    }
    let found = if exports.is_empty() {
        "nothing".to_string()
    } else {
        exports.join(", ")
    };
    bail!(
        "component exports neither `wasi:http/incoming-handler@0.2.x` nor \
         `wasi:http/handler@0.3.x` (it exports: {found}); wedge serves components \
         targeting the `wasi:http/proxy` (WASI 0.2) or `wasi:http/service` (WASI 0.3) world"
    )
}

/// Links all of WASI 0.2 and (`p3`: on an engine with component-model concurrency)
/// 0.3 with nothing granted plus wasi:http (both), wasi:config and wasi:keyvalue
/// (each version wedge serves; Spin's key-value only with `p3`), and resolves the component's imports once so each
/// instance only instantiates. Both versions are linked whatever the world: a p3
/// component built for `wasm32-wasip2` still imports WASI 0.2 through the Rust
/// standard library.
fn link(engine: &Engine, component: &Component, p3: bool) -> Result<InstancePre<GuestState>> {
    let mut linker = Linker::<GuestState>::new(engine);
    wasmtime_wasi::p2::add_to_linker_async(&mut linker)?;
    wasmtime_wasi_http::p2::add_only_http_to_linker_async(&mut linker)?;
    if p3 {
        wasmtime_wasi::p3::add_to_linker(&mut linker)?;
        wasmtime_wasi_http::p3::add_to_linker(&mut linker)?;
    }
    wasmtime_wasi_config::add_to_linker(&mut linker, GuestState::config)?;
    super::keyvalue::add_to_linker(&mut linker, GuestState::keyvalue, p3)?;
    linker
        .instantiate_pre(component)
        .map_err(anyhow::Error::from)
        .context("the component imports something wedge does not provide")
}

fn pre_instantiate(
    engine: &Engine,
    component: &Component,
    world: World,
    p3: bool,
) -> Result<ProxyPre<GuestState>> {
    let pre = link(engine, component, p3)?;
    let pre = match world {
        World::P2 => wasmtime_wasi_http::p2::bindings::ProxyPre::new(pre).map(ProxyPre::P2),
        World::P3 => ServicePre::new(pre).map(ProxyPre::P3),
    };
    pre.map_err(anyhow::Error::from)
        .context("the component's wasi:http exports do not match what wedge expects")
}

/// A WAGI program: a component exporting `wasi:cli/run@0.2.x` (what the command
/// adapter gives a preview 1 module).
fn pre_instantiate_command(
    engine: &Engine,
    component: &Component,
) -> Result<CommandPre<GuestState>> {
    let exports: Vec<String> = component
        .component_type()
        .exports(engine)
        .map(|(name, _)| name.to_string())
        .collect();
    if !exports.iter().any(|e| e.starts_with(CLI_RUN)) {
        bail!(
            "a WAGI program is a WASI preview 1 command module (a `main`, built for \
             `wasm32-wasip1`) or a component exporting `wasi:cli/run@0.2.x`; this \
             component exports {}",
            if exports.is_empty() {
                "nothing".to_string()
            } else {
                exports.join(", ")
            }
        );
    }
    CommandPre::new(link(engine, component, true)?)
        .map_err(anyhow::Error::from)
        .context("the component's wasi:cli/run export does not match what wedge expects")
}

/// Tiered compilation (`tiered`): what an app running Winch's code does.
impl App {
    /// Whether it runs Winch's code (tiered compilation, the cache did not hold it).
    pub fn runs_baseline_code(&self) -> bool {
        self.baseline.is_some()
    }

    /// Calls `then` at the app's first request, if it runs Winch's code; at once if
    /// that request already came (once; a second `then` is ignored).
    pub fn on_first_request(&self, then: impl FnOnce() + Send + 'static) {
        if let Some(baseline) = &self.baseline {
            baseline.first_request.then(Box::new(then));
        }
    }

    /// A request arrived: the first one of an app running Winch's code calls what
    /// `on_first_request` was given.
    pub fn request_arrived(&self) {
        if let Some(baseline) = &self.baseline {
            baseline.first_request.arrived();
        }
    }

    /// This app compiled by Cranelift, stored in the precompiled cache: what should
    /// replace it. `None` if it already runs Cranelift's code, or was given to
    /// Cranelift before (the component's bytes go with the first try, so a failed
    /// one does not keep them). Blocks for as long as Cranelift takes (seconds for a
    /// big component): run it [`in_background`].
    pub fn optimized(&self) -> Option<Result<App>> {
        let baseline = self.baseline.as_ref()?;
        let wasm = crate::sync::lock(&baseline.wasm).take()?;
        let load = Load::new(&baseline.cache, &wasm, baseline.adapter, baseline.executor);
        let compiled = load.compile_on(&baseline.optimized, baseline.p3);
        Some(compiled.map(|(component, pre)| {
            if baseline.cache.is_enabled() {
                baseline
                    .cache
                    .store(&baseline.optimized, &load.source(), &component);
            }
            self.with_pre(pre)
        }))
    }
}
