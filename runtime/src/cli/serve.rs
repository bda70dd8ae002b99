//! `wedge serve`: one app (a component or a guest crate) with no configuration, or
//! the listeners and apps of a `wedge.toml` (`--config`).

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{Context, Result, bail};
use clap::Args;

use super::addr::parse_listen;
use super::admin_args::AdminArgs;
use super::config_watch::{self, AtStart};
use super::host_args::{HostArgs, LISTENERS, PROCESS};
use super::registry_args::RegistryArgs;
use super::server::{self, Addresses, Started};
use super::target::Target;
use crate::admin::{Admin, Endpoint};
use crate::config::{self, Config};
use crate::host::{App, Executor};
use crate::metrics::{AppMetrics, Metrics};
use crate::serve::AccessLog;
use crate::tenancy::Tenancy;
use crate::tenancy::{Serving, Site, Tenant, tier_up_on_first_request};

#[derive(Args)]
pub struct ServeArgs {
    /// A component (.wasm), a directory holding a guest crate, or an
    /// `oci://REGISTRY/REPOSITORY:TAG` (or `@sha256:…`) reference to pull.
    #[arg(required_unless_present = "config_file")]
    target: Option<PathBuf>,

    /// Serve the listeners and apps of this wedge.toml instead of one TARGET;
    /// per-app limits and outbound settings then come from the file (the flags
    /// for them are refused; --memory then sets the least memory the instance pool
    /// holds per instance, which also holds the largest `memory` of the configured
    /// apps: a deploy asking for more is refused).
    #[arg(long = "config", value_name = "FILE",
          conflicts_with_all = ["target", "listen", "tls_listen", "no_tls", "tls_cert", "tls_key", "env", "var",
              "cpu_time", "wall_time", "max_body", "host_memory", "max_resources", "log_rate", "log_burst", "max_cgi_head", "cgi_output_buffer", "max_concurrent", "queue", "max_abandoned_per_connection",
              "queue_timeout", "allow_outbound", "outbound_connect_timeout",
              "outbound_max_concurrent", "instance_reuse", "instance_concurrency",
              "instance_idle", "kv", "kv_durability", "kv_bucket", "kv_max_keys", "kv_max_key_size",
              "kv_max_value_size", "kv_max_bytes", "kv_max_in_flight", "kv_timeout", "kv_sync_interval",
              "kv_max_write_rate", "kv_max_handles", "kv_max_batch", "kv_ca", "wagi"])]
    config_file: Option<PathBuf>,

    /// Cleartext address: HTTP/1.1, and HTTP/2 with prior knowledge (h2c). A host
    /// name (localhost:8080) stands for its first IPv4 address.
    #[arg(long, help_heading = LISTENERS, value_name = "ADDR", default_value = "127.0.0.1:8080",
          value_parser = parse_listen)]
    listen: SocketAddr,

    /// TLS address: HTTP/2 or HTTP/1.1, chosen by ALPN; HTTP/3 on its port over UDP.
    #[arg(long, help_heading = LISTENERS, value_name = "ADDR", default_value = "127.0.0.1:8443",
          value_parser = parse_listen)]
    tls_listen: SocketAddr,

    /// Serve cleartext only (no TLS listener).
    #[arg(long, help_heading = LISTENERS, conflicts_with_all = ["tls_cert", "tls_key"])]
    no_tls: bool,

    #[command(flatten)]
    host: HostArgs,

    /// Log one line per request (app, method, path, status, bytes, time, protocol).
    #[arg(long, help_heading = PROCESS)]
    access_log: bool,

    #[command(flatten)]
    admin: AdminArgs,

    #[command(flatten)]
    registry: RegistryArgs,
}

pub fn run(args: ServeArgs) -> Result<()> {
    let access_log = if args.access_log {
        AccessLog::for_stderr()
    } else {
        AccessLog::Off
    };
    match (&args.config_file, &args.target) {
        (Some(path), _) => serve_config(&args, path, access_log),
        (None, Some(target)) => serve_one(&args, target, access_log),
        (None, None) => bail!("give a component, a guest crate directory or --config FILE"),
    }
}

/// The zero-config case: one app answering every request.
fn serve_one(args: &ServeArgs, target: &Path, access_log: AccessLog) -> Result<()> {
    args.admin.refuse()?;
    let target = Target::resolve(target)?;
    let registry = args.registry.registry(&args.host.data_dir());
    let addresses = Addresses {
        plain: vec![args.listen],
        tls: (!args.no_tls)
            .then_some(args.tls_listen)
            .into_iter()
            .collect(),
        tls_host: None,
        pem: args.host.pem(),
    };
    let memory = args.host.limits().memory;
    server::run(
        &args.host,
        addresses,
        access_log,
        memory,
        args.host.compile.unwrap_or_default(),
        |host| async move {
            let (name, wasm, origin, built_as) = target.component(&registry).await?;
            // `--wagi`, or a crate whose metadata says so.
            let executor = match built_as {
                Executor::Wagi => Executor::Wagi,
                Executor::WasiHttp => host.executor,
            };
            let store = host.keyvalue.store(&name, &host.kv, AppMetrics::detached());
            let store = store.map_err(|bad| anyhow::anyhow!("{}: {}", bad.flag, bad.why))?;
            // Compiling is CPU-bound and can take seconds for big components.
            let app = tokio::task::spawn_blocking(move || {
                let limits = host.limits;
                App::load(&host.engine, &host.cache, &name, &wasm, executor, limits).map(|app| {
                    app.with_outbound(host.outbound)
                        .with_admission(host.admission)
                        .with_env(host.vars.env)
                        .with_config(host.vars.config)
                        .with_keyvalue(store)
                })
            })
            .await
            .context("loading the component")?
            .with_context(|| origin)?;
            let name = app.name().to_string();
            let tenant = Arc::new(Tenant::new(&name, Serving::App(Arc::new(app))));
            tier_up_on_first_request(&tenant);
            Ok(Started {
                name,
                apps: None,
                site: Arc::new(Site::single(tenant)),
                metrics: None,
                overlay: None,
            })
        },
    )
}

/// The apps of a wedge.toml, routed by host and path.
fn serve_config(args: &ServeArgs, path: &Path, access_log: AccessLog) -> Result<()> {
    let config: Config = config::load(path)?;
    let addresses = Addresses {
        plain: config.listen.into_iter().collect(),
        tls: config.tls.iter().map(|tls| tls.listen).collect(),
        tls_host: None,
        pem: config
            .tls
            .as_ref()
            .and_then(|tls| tls.pem.as_ref())
            .map(|pem| (pem.cert.clone(), pem.key.clone())),
    };
    if addresses.plain.is_empty() && addresses.tls.is_empty() {
        bail!(
            "{}: no listener: set `listen` and/or `tls_listen`",
            path.display()
        );
    }
    let listeners = (config.listen, config.tls.as_ref().map(|tls| tls.listen));
    let admin = args.admin.settings(config.admin.as_ref())?;
    let data_dir = args.host.data_dir();
    let registry = args.registry.registry(&data_dir);
    // The instance pool holds the largest memory any configured app is given.
    let memory = config
        .apps
        .iter()
        .map(|app| app.limits.memory)
        .fold(args.host.limits().memory, u64::max);
    // The flag wins over the file.
    let compile = args.host.compile.or(config.compile).unwrap_or_default();
    let at_start = AtStart {
        listeners,
        compile_flag: args.host.compile,
        compile,
    };
    server::run(
        &args.host,
        addresses,
        access_log,
        memory,
        compile,
        |host| async move {
            // Bound before the apps load (compiling, pulling): its /healthz answers
            // while they do, so a liveness probe does not kill a slow start.
            let endpoint = match admin {
                Some(settings) => Some(Endpoint::bind(settings, host.readiness.clone()).await?),
                None => None,
            };
            // Only the admin API reads the metrics: without it nothing is recorded.
            let metrics = endpoint.is_some().then(|| Arc::new(Metrics::new()));
            let tenancy = Tenancy::start(
                host.engine,
                host.cache,
                registry,
                host.keyvalue,
                config.apps,
                metrics.clone(),
            )
            .await?;
            let tenancy = Arc::new(tenancy);
            if let Some(endpoint) = endpoint {
                let mut admin = Admin::restore(tenancy.clone(), &data_dir, host.readiness).await;
                if let Some(metrics) = &metrics {
                    admin = admin.with_metrics(metrics.clone());
                }
                endpoint.install(admin);
            }
            let site = tenancy.site();
            let apps: Vec<(String, Vec<String>)> = tenancy
                .apps()
                .await
                .into_iter()
                .map(|app| (app.name, app.routes))
                .collect();
            let count = apps.len();
            tokio::spawn(config_watch::reload_on_change(
                path.to_path_buf(),
                at_start,
                tenancy,
            ));
            Ok(Started {
                name: format!(
                    "{count} app{} from {}",
                    if count == 1 { "" } else { "s" },
                    path.display()
                ),
                apps: Some(apps),
                site,
                metrics,
                overlay: None,
            })
        },
    )
}
