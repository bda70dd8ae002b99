//! `wedge serve`: one app on one listener.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{Context, Result, bail};
use clap::Args;

use super::host_args::HostArgs;
use super::server::{self, Addresses, Started};
use crate::host::{App, Serving, Site, Tenant};
use crate::net::AccessLog;

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

    /// Serve cleartext only (no TLS listener).
    #[arg(long, conflicts_with_all = ["tls_cert", "tls_key"])]
    no_tls: bool,

    /// Log one line per request (method, path, status, time, protocol).
    #[arg(long)]
    access_log: bool,

    #[command(flatten)]
    host: HostArgs,
}

pub fn run(args: ServeArgs) -> Result<()> {
    let (name, wasm_path) = resolve_target(&args.target)?;
    let wasm = std::fs::read(&wasm_path)
        .with_context(|| format!("cannot read {}", wasm_path.display()))?;
    let addresses = Addresses {
        plain: Some(args.listen),
        tls: (!args.no_tls).then_some(args.tls_listen),
        tls_host: None,
    };
    let access_log = if args.access_log {
        AccessLog::for_stderr()
    } else {
        AccessLog::Off
    };
    server::run(&args.host, addresses, access_log, |host| async move {
        // Compiling is CPU-bound and can take seconds for big components.
        let app = tokio::task::spawn_blocking(move || {
            App::load(&host.engine, &host.cache, &name, &wasm, host.limits).map(|app| {
                app.with_outbound(host.outbound)
                    .with_admission(host.admission)
            })
        })
        .await
        .context("loading the component")?
        .with_context(|| format!("{}", wasm_path.display()))?;
        let name = app.name().to_string();
        let tenant = Tenant::new(&name, Serving::App(Arc::new(app)));
        Ok(Started {
            name,
            site: Arc::new(Site::single(Arc::new(tenant))),
        })
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
