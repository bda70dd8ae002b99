//! `wedge serve`: one app on one listener.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use clap::Args;

use crate::host::{self, App, ArtifactCache, Limits, PoolConfig};
use crate::net::Listener;

#[derive(Args)]
pub struct ServeArgs {
    /// A component (.wasm) or a directory holding a guest crate.
    target: PathBuf,

    /// Address to serve HTTP/1.1 on.
    #[arg(long, default_value = "127.0.0.1:8080")]
    listen: SocketAddr,

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
    let data_dir = args.data_dir.unwrap_or_else(super::default_data_dir);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    runtime.block_on(async move {
        let listener = Listener::bind(args.listen).await?;
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
        let addr = listener.local_addr()?;
        println!("wedge: serving `{}` on http://{addr}/", app.name());
        listener
            .serve(Arc::new(app), shutdown_signal(), args.drain_timeout)
            .await?;
        tracing::info!("stopped");
        Ok(())
    })
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
