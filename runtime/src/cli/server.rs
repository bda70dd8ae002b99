//! Runs wedge's listeners around an app slot: what `wedge serve` and `wedge dev` share
//! from their flags (the engine, the host's settings, the start-up line, draining on a
//! signal); the listeners and workers themselves are `crate::serve`'s.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use anyhow::{Context, Result};
use wasmtime::Engine;

use super::host_args::HostArgs;
use super::shutdown::Signals;
use super::vars_args::VarsArgs;
use crate::admin::Readiness;
use crate::host::admission::Admission;
use crate::host::keyvalue::{KeyValue, KeyValueHost};
use crate::host::outbound::Outbound;
use crate::host::{self, ArtifactCache, Compile, DevOverlay, Executor, Limits, PoolConfig};
use crate::metrics::Metrics;
use crate::net::{Listeners, cert};
use crate::serve::server::{Tls, bind_workers, start_workers};
use crate::serve::{AccessLog, Frontend};
use crate::tenancy::Site;

/// What an app is loaded with.
pub struct Host {
    pub engine: Engine,
    pub cache: ArtifactCache,
    pub limits: Limits,
    /// How the app runs (`--wagi`).
    pub executor: Executor,
    /// Where the app's guest may send HTTP requests.
    pub outbound: Outbound,
    /// The app's instance slots and queue (one for all its versions).
    pub admission: Arc<Admission>,
    /// The environment variables and config values its guest sees.
    pub vars: VarsArgs,
    /// The process's key-value stores (files in the data dir, Redis connections).
    pub keyvalue: Arc<KeyValueHost>,
    /// The app's key-value settings (`--kv`, …; a config's apps have their own).
    pub kv: KeyValue,
    /// How far wedge is (the admin API's `/readyz`): `start` has the apps loaded
    /// once it returns; the listeners accept and drain around it.
    pub readiness: Arc<Readiness>,
}

/// Where to listen, and how to name the TLS address in URLs. Each kind listens on
/// one port: its first address's (port 0 resolved); none turns it off.
pub struct Addresses {
    pub plain: Vec<SocketAddr>,
    pub tls: Vec<SocketAddr>,
    /// Printed instead of the TLS address's IP (e.g. `localhost`, which the
    /// development certificate names).
    pub tls_host: Option<&'static str>,
    /// The TLS certificate chain and key files; `None` → the development certificate.
    pub pem: Option<(PathBuf, PathBuf)>,
}

/// What `start` hands back: a name for the start-up line and the site to serve.
pub struct Started {
    pub name: String,
    /// With a config: each app's name and routes, listed under the start-up line
    /// with their URLs. `None` for the one app of `serve TARGET` and `dev`.
    pub apps: Option<Vec<(String, Vec<String>)>>,
    pub site: Arc<Site>,
    /// Counts connections and requests when the metrics are read (admin API).
    pub metrics: Option<Arc<Metrics>>,
    /// `wedge dev`'s build state, shown in responses.
    pub overlay: Option<Arc<DevOverlay>>,
}

/// Binds `addresses`, runs `start` to get the app, serves until Ctrl-C/SIGTERM and
/// drains. A busy port is reported before anything is compiled.
/// `largest_memory` sizes the instance pool's memories: no app loaded into it may be
/// given more.
pub fn run<F, Fut>(
    args: &HostArgs,
    addresses: Addresses,
    access_log: AccessLog,
    largest_memory: u64,
    compile: Compile,
    start: F,
) -> Result<()>
where
    F: FnOnce(Host) -> Fut,
    Fut: Future<Output = Result<Started>>,
{
    let limits = args.limits();
    // Every app's outbound client is built with these: set before any is.
    host::outbound_client::configure(args.outbound.client_settings())?;
    let data_dir = args.data_dir();
    // The control runtime: loading apps, the admin API, the config watcher, signals.
    // Connections are the workers' (`serve/workers.rs`). Two threads: a deploy hashes and
    // writes up to --max-upload synchronously, and /healthz and /readyz must still
    // answer meanwhile.
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    let h3 = args.h3.to_config().filter(|_| !addresses.tls.is_empty());
    // Operator certificates are input: check them before anything else runs.
    let operator_key = match &addresses.pem {
        Some((cert, key)) => Some(cert::load_pem(cert, key)?),
        None => None,
    };
    let listeners = bind_workers(
        &addresses.plain,
        &addresses.tls,
        h3.is_some(),
        args.conn.to_limits(),
        args.workers(),
    )?;
    let workers = runtime.block_on(async move {
        let engine = host::build_engine(
            &PoolConfig {
                max_memory: largest_memory,
                max_instances: args.max_instances(),
                keep_resident: args.pool_keep_resident(),
            },
            compile,
        )?;
        let cache = ArtifactCache::new(data_dir.join("precompiled"));
        let readiness = Arc::new(Readiness::default());
        let started = start(Host {
            engine,
            cache,
            limits,
            executor: args.executor(),
            outbound: args.outbound.to_policy(),
            admission: Arc::new(Admission::new(args.admission())),
            vars: args.vars.clone(),
            keyvalue: KeyValueHost::new(&data_dir),
            kv: args.kv.settings(),
            readiness: readiness.clone(),
        })
        .await?;
        readiness.apps_loaded();
        let tls = match addresses.tls.is_empty() {
            true => Tls::default(),
            false => Tls::new(operator_key, &data_dir, h3)?,
        };
        // Ready before the start-up line: whoever reads the line finds /readyz 200.
        // Connections arriving before the workers accept wait in the listeners' backlog.
        readiness.listening();
        let (serving, table) = match &started.apps {
            None => (format!("`{}`", started.name), String::new()),
            Some(apps) => (started.name.clone(), route_table(&listeners[0], apps)),
        };
        println!(
            "wedge: serving {serving} on {}{table}",
            urls(&listeners[0], addresses.tls_host)
        );
        tracing::info!("workers: {}", listeners.len());
        let frontend = frontend(started, access_log);
        let h2 = args.h2.to_config();
        let workers = start_workers(listeners, frontend, h2, tls, args.drain_timeout)?;
        let mut signals = Signals::catch()?;
        tokio::select! {
            () = signals.first() => {}
            // A worker that failed stops the others.
            () = workers.stopping() => {}
        }
        readiness.draining();
        workers.stop();
        signals.unless_second(workers.drained()).await;
        anyhow::Ok(workers)
    })?;
    workers.join()?;
    tracing::info!("stopped");
    Ok(())
}

/// The URLs wedge serves on, for the start-up line.
fn urls(listeners: &Listeners, tls_host: Option<&str>) -> String {
    let mut urls = Vec::new();
    if let Some(addr) = listeners.plain_addr() {
        urls.push(format!("http://{addr}/"));
    }
    if let Some(addr) = listeners.tls_addr() {
        match tls_host {
            Some(host) => urls.push(format!("https://{host}:{}/", addr.port())),
            None => urls.push(format!("https://{addr}/")),
        }
    }
    let mut line = urls.join(" and ");
    if let Some(addr) = listeners.h3_addr() {
        line.push_str(&format!(" (h3 on udp {})", addr.port()));
    }
    line
}

/// Under the start-up line, each app's routes as URLs on `listeners`, one route a
/// line: `/api` on the cleartext and TLS addresses, `api.example.com/` with their
/// ports.
fn route_table(listeners: &Listeners, apps: &[(String, Vec<String>)]) -> String {
    let width = apps.iter().map(|(name, _)| name.len()).max().unwrap_or(0);
    let schemes = [
        ("http", listeners.plain_addr()),
        ("https", listeners.tls_addr()),
    ];
    let mut table = String::new();
    for (name, routes) in apps {
        let lines: Vec<String> = routes
            .iter()
            .map(|route| {
                // Every route has a path; what is before it is the host, if any.
                let (host, path) = route.split_at(route.find('/').unwrap_or(route.len()));
                let urls: Vec<String> = schemes
                    .iter()
                    .filter_map(|(scheme, addr)| {
                        let addr = (*addr)?;
                        Some(match host {
                            "" => format!("{scheme}://{addr}{path}"),
                            host => format!("{scheme}://{host}:{}{path}", addr.port()),
                        })
                    })
                    .collect();
                urls.join("  ")
            })
            .collect();
        let lines = if lines.is_empty() {
            vec!["(no route: no request reaches it)".to_string()]
        } else {
            lines
        };
        for (i, line) in lines.iter().enumerate() {
            let label = if i == 0 { name.as_str() } else { "" };
            table.push_str(&format!("\n  {label:width$}  {line}"));
        }
    }
    table
}

/// The listeners' way to the apps, counting into the metrics if there are any, with
/// the overlay if there is one.
fn frontend(started: Started, access_log: AccessLog) -> Frontend {
    let mut frontend = Frontend::new(started.site, access_log);
    if let Some(metrics) = started.metrics {
        frontend = frontend.with_metrics(metrics);
    }
    if let Some(overlay) = started.overlay {
        frontend = frontend.with_overlay(overlay);
    }
    frontend
}
