//! `wedge serve`: one app on one listener.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use clap::Args;

use super::h2_args::H2Args;
use super::h3_args::H3Args;
use crate::host::{self, App, ArtifactCache, Limits, PoolConfig};
use crate::net::listener::H3Server;
use crate::net::{Listeners, cert, tls};

#[derive(Args)]
pub struct ServeArgs {
    /// A component (.wasm) or a directory holding a guest crate.
    target: PathBuf,

    /// Cleartext address: HTTP/1.1, and HTTP/2 with prior knowledge (h2c).
    #[arg(long, default_value = "127.0.0.1:8080")]
    listen: SocketAddr,

    /// TLS address: HTTP/2 or HTTP/1.1, chosen by ALPN; HTTP/3 on its port over UDP.
    #[arg(long, default_value = "127.0.0.1:8443")]
    tls_listen: SocketAddr,

    /// PEM certificate chain for TLS; without it wedge uses a self-signed
    /// development certificate for localhost kept in the data dir.
    #[arg(long, requires = "tls_key")]
    tls_cert: Option<PathBuf>,

    /// PEM private key for --tls-cert.
    #[arg(long, requires = "tls_cert")]
    tls_key: Option<PathBuf>,

    /// Serve cleartext only (no TLS listener).
    #[arg(long, conflicts_with_all = ["tls_cert", "tls_key"])]
    no_tls: bool,

    /// Linear memory per instance (e.g. 128MiB).
    #[arg(long, default_value = "128MiB", value_parser = parse_size)]
    memory: u64,

    /// CPU time per request: time spent running guest code, not waiting.
    #[arg(long, default_value = "1s", value_parser = humantime::parse_duration)]
    cpu_time: Duration,

    /// Wall-clock time per request.
    #[arg(long, default_value = "60s", value_parser = humantime::parse_duration)]
    wall_time: Duration,

    /// Largest request body accepted (e.g. 100MiB).
    #[arg(long, default_value = "100MiB", value_parser = parse_size)]
    max_body: u64,

    /// On Ctrl-C/SIGTERM, how long requests in flight may take to finish.
    #[arg(long, default_value = "30s", value_parser = humantime::parse_duration)]
    drain_timeout: Duration,

    /// Where wedge keeps its data (precompiled components, certificates).
    #[arg(long, env = "WEDGE_DATA_DIR")]
    data_dir: Option<PathBuf>,

    #[command(flatten)]
    h2: H2Args,

    #[command(flatten)]
    h3: H3Args,
}

fn parse_size(text: &str) -> Result<u64, String> {
    text.parse::<bytesize::ByteSize>()
        .map(|size| size.as_u64())
        .map_err(|err| format!("`{text}` is not a size like 128MiB: {err}"))
}

pub fn run(args: ServeArgs) -> Result<()> {
    let (name, wasm_path) = resolve_target(&args.target)?;
    let wasm = std::fs::read(&wasm_path)
        .with_context(|| format!("cannot read {}", wasm_path.display()))?;
    let limits = Limits {
        memory: args.memory,
        cpu_time: args.cpu_time,
        wall_time: args.wall_time,
        max_body: args.max_body,
    };
    let data_dir = args
        .data_dir
        .clone()
        .unwrap_or_else(super::default_data_dir);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    let tls_listen = (!args.no_tls).then_some(args.tls_listen);
    let h3 = args.h3.to_config().filter(|_| tls_listen.is_some());
    // Operator certificates are input: check them before anything else runs.
    let operator_key = match (&args.tls_cert, &args.tls_key) {
        (Some(cert), Some(key)) => Some(cert::load_pem(cert, key)?),
        _ => None,
    };
    runtime.block_on(async move {
        // Bind first: a busy port is reported before anything is compiled.
        let listeners = Listeners::bind(Some(args.listen), tls_listen, h3.is_some()).await?;
        let engine = host::build_engine(&PoolConfig {
            max_memory: limits.memory,
            ..PoolConfig::default()
        })?;
        let cache = ArtifactCache::new(data_dir.join("precompiled"));
        // Compiling is CPU-bound and can take seconds for big components.
        let app =
            tokio::task::spawn_blocking(move || App::load(&engine, &cache, &name, &wasm, limits))
                .await
                .context("loading the component")?
                .with_context(|| format!("{}", wasm_path.display()))?;
        let key = match tls_listen {
            Some(_) => Some(certified_key(operator_key, &data_dir)?),
            None => None,
        };
        let acceptor = key.as_ref().map(tls::acceptor).transpose()?;
        let h3 = match (h3, &key) {
            (Some(config), Some(key)) => Some(H3Server {
                quinn: config.server_config(key)?,
                config: Arc::new(config),
            }),
            _ => None,
        };
        println!("wedge: serving `{}` on {}", app.name(), urls(&listeners));
        listeners
            .serve(
                Arc::new(app),
                Arc::new(args.h2.to_config()),
                acceptor,
                h3,
                shutdown_signal(),
                args.drain_timeout,
            )
            .await?;
        tracing::info!("stopped");
        Ok(())
    })
}

/// The TLS listener's (and HTTP/3's) certificate: the given PEM files or the
/// development certificate.
fn certified_key(
    operator_key: Option<cert::CertifiedKey>,
    data_dir: &Path,
) -> Result<cert::CertifiedKey> {
    match operator_key {
        Some(key) => Ok(key),
        None => {
            let dev = cert::dev_cert(data_dir)?;
            let verb = if dev.created { "created" } else { "using" };
            tracing::info!(
                "TLS: {verb} a self-signed development certificate for localhost, {}; \
                 trust it with `curl --cacert {}` (or use `curl -k`)",
                dev.cert.display(),
                dev.cert.display()
            );
            cert::load_pem(&dev.cert, &dev.key)
        }
    }
}

/// The URLs wedge serves on, for the start-up line.
fn urls(listeners: &Listeners) -> String {
    let mut urls = Vec::new();
    if let Some(addr) = listeners.plain_addr() {
        urls.push(format!("http://{addr}/"));
    }
    if let Some(addr) = listeners.tls_addr() {
        urls.push(format!("https://{addr}/"));
    }
    let mut line = urls.join(" and ");
    if let Some(addr) = listeners.h3_addr() {
        line.push_str(&format!(" (h3 on udp {})", addr.port()));
    }
    line
}

/// Resolves TARGET to an app name and a component file, building a guest
/// crate directory first.
fn resolve_target(target: &Path) -> Result<(String, PathBuf)> {
    if target.is_dir() {
        let built = super::guest_build::build(target)?;
        return Ok((built.name, built.wasm));
    }
    if !target.exists() {
        bail!("{} does not exist", target.display());
    }
    let name = target
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| "app".into());
    Ok((name, target.to_path_buf()))
}

/// Resolves on Ctrl-C or SIGTERM.
async fn shutdown_signal() {
    use tokio::signal::unix::{SignalKind, signal};
    let mut term = match signal(SignalKind::terminate()) {
        Ok(term) => term,
        Err(err) => {
            tracing::warn!("cannot watch SIGTERM: {err}");
            let _ = tokio::signal::ctrl_c().await;
            return;
        }
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = term.recv() => {}
    }
    tracing::info!("shutting down: no new connections, finishing requests in flight");
}
