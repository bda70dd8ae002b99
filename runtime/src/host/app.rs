//! An app: one validated, compiled and pre-instantiated component with its
//! name, limits, admission, outbound policy and guest variables.

use std::sync::Arc;
use std::time::Instant;

use anyhow::{Context, Result, bail};
use wasmtime::Engine;
use wasmtime::component::{Component, Linker};
use wasmtime_wasi_http::p2::bindings::ProxyPre;

use super::admission::Admission;
use super::cache::ArtifactCache;
use super::hooks::OutboundGate;
use super::limits::Limits;
use super::outbound::Outbound;
use super::store::GuestState;
use super::vars::GuestVars;
use crate::metrics::AppMetrics;

/// The export a p2 HTTP handler provides; any 0.2.x minor version is accepted.
const INCOMING_HANDLER_P2: &str = "wasi:http/incoming-handler@0.2.";

/// A component ready to serve requests.
pub struct App {
    pub(crate) name: Arc<str>,
    pub(crate) limits: Limits,
    pub(crate) outbound: Arc<OutboundGate>,
    /// The app's instance slots and queue, shared by its versions.
    pub(crate) admission: Arc<Admission>,
    /// Where its requests, instances, faults and refusals are counted.
    pub(crate) metrics: Arc<AppMetrics>,
    /// The environment variables and wasi:config values its guest sees.
    pub(crate) vars: GuestVars,
    pub(crate) pre: ProxyPre<GuestState>,
}

impl App {
    /// Validates, compiles (or loads from `cache`) and pre-instantiates `wasm`.
    pub fn load(
        engine: &Engine,
        cache: &ArtifactCache,
        name: &str,
        wasm: &[u8],
        limits: Limits,
    ) -> Result<App> {
        check_is_component(wasm)?;
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
        let started = Instant::now();
        let cached = cache.load(engine, wasm);
        let from_cache = cached.is_some();
        let component = match cached {
            Some(component) => component,
            None => Component::new(engine, wasm)?,
        };
        check_exports(engine, &component)?;
        let pre = pre_instantiate(engine, &component)?;
        let elapsed = started.elapsed().as_millis();
        if from_cache {
            tracing::info!("loaded app `{name}` from the precompiled cache in {elapsed} ms");
        } else if cache.is_enabled() {
            // Only a component that passed validation is worth keeping.
            cache.store(engine, wasm, &component);
            tracing::info!(
                "compiled app `{name}` in {elapsed} ms (stored in the precompiled cache)"
            );
        } else {
            tracing::info!("compiled app `{name}` in {elapsed} ms");
        }
        Ok(App {
            name: name.into(),
            limits,
            outbound: Arc::new(OutboundGate::new(Outbound::default())),
            admission: Arc::new(Admission::new(Default::default())),
            metrics: AppMetrics::detached(),
            vars: GuestVars::default(),
            pre,
        })
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

    /// Counts the app's requests, instances, faults and refusals in `metrics` (by
    /// default in series no registry reads). Versions of one app share one.
    pub fn with_metrics(mut self, metrics: Arc<AppMetrics>) -> App {
        self.metrics = metrics;
        self
    }

    /// The app's name, as it appears in logs.
    pub fn name(&self) -> &str {
        &self.name
    }
}

/// Refuses anything that is not a wasm component, naming what it is instead.
fn check_is_component(wasm: &[u8]) -> Result<()> {
    const MAGIC: &[u8] = b"\0asm";
    if wasm.len() < 8 || &wasm[..4] != MAGIC {
        bail!("not a WebAssembly file (no `\\0asm` header)");
    }
    // Bytes 4..8: a core module has version 1 and layer 0; a component has layer 1.
    if wasm[6..8] == [0, 0] {
        bail!(
            "this is a core wasm module, not a component; build for `wasm32-wasip2` \
             (or wrap it with `wasm-tools component new`)"
        );
    }
    Ok(())
}

fn check_exports(engine: &Engine, component: &Component) -> Result<()> {
    let ty = component.component_type();
    let exports: Vec<String> = ty
        .exports(engine)
        .map(|(name, _)| name.to_string())
        .collect();
    if exports.iter().any(|e| e.starts_with(INCOMING_HANDLER_P2)) {
        return Ok(());
    }
    let found = if exports.is_empty() {
        "nothing".to_string()
    } else {
        exports.join(", ")
    };
    bail!(
        "component does not export `wasi:http/incoming-handler@0.2.x` (it exports: {found}); \
         wedge serves components targeting the `wasi:http/proxy` world"
    )
}

/// Links all of WASI 0.2 with nothing granted plus wasi:http and wasi:config,
/// and resolves the component's imports once so each request only instantiates.
fn pre_instantiate(engine: &Engine, component: &Component) -> Result<ProxyPre<GuestState>> {
    let mut linker = Linker::<GuestState>::new(engine);
    wasmtime_wasi::p2::add_to_linker_async(&mut linker)?;
    wasmtime_wasi_http::p2::add_only_http_to_linker_async(&mut linker)?;
    wasmtime_wasi_config::add_to_linker(&mut linker, GuestState::config)?;
    let pre = linker
        .instantiate_pre(component)
        .map_err(anyhow::Error::from)
        .context("the component imports something wedge does not provide")?;
    ProxyPre::new(pre)
        .map_err(anyhow::Error::from)
        .context("the component's wasi:http exports do not match what wedge expects")
}
