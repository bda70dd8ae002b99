//! `wedge dev [DIR]`: builds a guest crate (or another toolchain's project), serves it
//! on h1/h2c and TLS (h1/h2/h3), watches its sources and swaps in each successful
//! rebuild.

mod command_build;
mod crate_tree;
mod project;
mod reload;
mod tree;
mod watch;

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::path::PathBuf;
use std::sync::Arc;

use anyhow::Result;
use clap::Args;

use super::addr::parse_host;
use super::host_args::{HostArgs, LISTENERS};
use super::server::{self, Addresses, Started};
use crate::host::{self, DevOverlay};
use crate::serve::AccessLog;
use crate::tenancy::{Site, Tenant};
use project::{BuildFlags, Project};
use reload::Reloader;

/// The help heading of the flags for projects other toolchains build.
const OTHER_TOOLCHAINS: &str = "Projects other toolchains build";

#[derive(Args)]
pub struct DevArgs {
    /// The project to build, serve and watch: a guest crate, or another toolchain's
    /// project (with --build and --component, or a [dev] table in its wedge.toml).
    #[arg(default_value = ".")]
    dir: PathBuf,

    /// Build with this shell command, run in DIR, instead of cargo (e.g.
    /// "npm run build"); needs --component.
    #[arg(long, help_heading = OTHER_TOOLCHAINS, value_name = "COMMAND")]
    build: Option<String>,

    /// The component file the build command writes, relative to DIR (e.g.
    /// dist/app.wasm).
    #[arg(long, help_heading = OTHER_TOOLCHAINS, value_name = "PATH")]
    component: Option<PathBuf>,

    /// Rebuild when this file or directory (relative to DIR) changes; repeatable.
    /// Default: all of DIR but node_modules, target, the component's directory and
    /// hidden entries.
    #[arg(long, help_heading = OTHER_TOOLCHAINS, value_name = "PATH")]
    watch: Vec<PathBuf>,

    /// Port for HTTP/1.1 and h2c on 127.0.0.1.
    #[arg(long, help_heading = LISTENERS, value_name = "PORT", default_value_t = 8080)]
    port: u16,

    /// Port for TLS (HTTP/1.1 and HTTP/2 by ALPN) and HTTP/3 (UDP) on localhost
    /// (127.0.0.1 and ::1).
    #[arg(long, help_heading = LISTENERS, value_name = "PORT", default_value_t = 8443)]
    tls_port: u16,

    /// Serve cleartext only (no TLS listener).
    #[arg(long, help_heading = LISTENERS, conflicts_with_all = ["tls_cert", "tls_key"])]
    no_tls: bool,

    /// Listen on this address (both ports) instead of localhost, e.g. 0.0.0.0 or ::
    /// in a container: an IP address, or a host name (its first IPv4 address).
    #[arg(long = "host", help_heading = LISTENERS, value_name = "ADDR", value_parser = parse_host)]
    bind: Option<IpAddr>,

    #[command(flatten)]
    host: HostArgs,
}

pub fn run(args: DevArgs) -> Result<()> {
    let flags = BuildFlags {
        build: args.build.clone(),
        component: args.component.clone(),
        watch: args.watch.clone(),
    };
    let project = Arc::new(Project::find(&args.dir, flags)?);
    let local = |port| SocketAddr::from((Ipv4Addr::LOCALHOST, port));
    // The TLS URL says `localhost`, which browsers resolve to both loopbacks: a
    // browser that follows Alt-Svc to QUIC on ::1 has no fallback to 127.0.0.1.
    let localhost = |port| vec![local(port), SocketAddr::from((Ipv6Addr::LOCALHOST, port))];
    // --host: that address instead of localhost's (the URLs then name it, unless
    // it reaches localhost too: a loopback or unspecified address).
    let (plain, tls) = match args.bind {
        Some(ip) => (
            vec![SocketAddr::new(ip, args.port)],
            vec![SocketAddr::new(ip, args.tls_port)],
        ),
        None => (vec![local(args.port)], localhost(args.tls_port)),
    };
    let reaches_localhost = args
        .bind
        .is_none_or(|ip| ip.is_loopback() || ip.is_unspecified());
    let addresses = Addresses {
        plain,
        tls: if args.no_tls { Vec::new() } else { tls },
        // The development certificate is for `localhost`.
        tls_host: (args.host.tls_cert.is_none() && reaches_localhost).then_some("localhost"),
        pem: args.host.pem(),
    };
    server::run(
        &args.host,
        addresses,
        AccessLog::for_stderr(),
        args.host.limits().memory,
        args.host
            .compile
            .unwrap_or_else(host::development_compile_mode),
        |host| async move {
            let slot_name = project.name().to_string();
            // Watching starts before the first build so no save is missed.
            let changes = watch::watch(project.dir(), project.sources())?;
            // The browser's view of the build: banner, error page, events.
            let overlay = Arc::new(DevOverlay::new(
                &slot_name,
                host.readiness.draining_signal(),
            ));
            let mut reloader = Reloader::new(project.clone(), host, changes, overlay.clone());
            let first = reloader.first_version().await;
            let tenant = Arc::new(Tenant::new(&slot_name, first));
            tokio::spawn(reloader.run(tenant.clone()));
            Ok(Started {
                name: slot_name,
                apps: None,
                site: Arc::new(Site::single(tenant)),
                metrics: None,
                overlay: Some(overlay),
            })
        },
    )
}
