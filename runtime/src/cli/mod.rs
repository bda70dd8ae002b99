//! The `wedge` command line.

mod addr;
mod admin_args;
mod admin_client;
mod apps;
mod config_watch;
mod conn_args;
mod deploy;
mod dev;
mod engine_flags;
mod guest_build;
mod h2_args;
mod h3_args;
mod host_args;
mod kv_args;
mod new;
mod outbound_args;
mod push;
mod registry_args;
mod serve;
mod server;
mod shutdown;
mod target;
mod value_parsers;
mod vars_args;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// Exit status for bad input: a missing file, a wrong component, a busy port, a bad flag.
const EXIT_BAD_INPUT: u8 = 2;

#[derive(Parser)]
#[command(
    name = "wedge",
    version,
    about = "Serve WebAssembly HTTP handlers (wasi:http components)."
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Serve a component (.wasm) or a guest crate directory (built with cargo).
    // Boxed: serve's many engine flags would make every `Command` that big.
    Serve(Box<serve::ServeArgs>),
    /// Build a guest crate (or, with a build command, another toolchain's project),
    /// serve it over HTTP/1.1, HTTP/2 and HTTP/3, and rebuild and reload it whenever
    /// its sources change.
    Dev(Box<dev::DevArgs>),
    /// Create a guest crate for a new handler.
    New(new::NewArgs),
    /// Deploy (or replace) an app on a running wedge through its admin API.
    Deploy(deploy::DeployArgs),
    /// List the apps a running wedge serves (through its admin API).
    Apps(apps::AppsArgs),
    /// Remove a deployed app from a running wedge (through its admin API).
    Rm(apps::RmArgs),
    /// Push a component to an OCI registry; prints its digest.
    Push(push::PushArgs),
}

/// Runs the command line and maps every failure to one line on stderr.
pub fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(err) => return clap_error(err),
    };
    init_logging();
    let result = match cli.command {
        Command::Serve(args) => serve::run(*args),
        Command::Dev(args) => dev::run(*args),
        Command::New(args) => new::run(args),
        Command::Deploy(args) => deploy::run(args),
        Command::Apps(args) => apps::list(args),
        Command::Rm(args) => apps::remove(args),
        Command::Push(args) => push::run(args),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            match err.downcast_ref::<crate::config::ConfigErrors>() {
                // Every problem of a config file, one line each.
                Some(errors) => errors
                    .to_string()
                    .lines()
                    .for_each(|l| eprintln!("error: {l}")),
                None => eprintln!("error: {}", one_line(&format!("{err:#}"))),
            }
            ExitCode::from(EXIT_BAD_INPUT)
        }
    }
}

/// Help and version print as usual; usage errors print their first line only.
fn clap_error(err: clap::Error) -> ExitCode {
    use clap::error::ErrorKind;
    match err.kind() {
        ErrorKind::DisplayHelp
        | ErrorKind::DisplayVersion
        | ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand => {
            let _ = err.print();
            ExitCode::SUCCESS
        }
        _ => {
            // clap's message runs until the first blank line (then usage).
            let text = err.render().to_string();
            let message: Vec<&str> = text
                .lines()
                .take_while(|line| !line.trim().is_empty())
                .map(str::trim)
                .collect();
            eprintln!("{} (see `{}`)", message.join(" "), help_command());
            ExitCode::from(EXIT_BAD_INPUT)
        }
    }
}

/// `wedge SUBCOMMAND --help` for the subcommand the command line names, else
/// `wedge --help`.
fn help_command() -> String {
    let cli = <Cli as clap::CommandFactory>::command();
    let subcommand = std::env::args()
        .skip(1)
        .find(|arg| !arg.starts_with('-'))
        .filter(|arg| cli.find_subcommand(arg).is_some());
    match subcommand {
        Some(name) => format!("wedge {name} --help"),
        None => "wedge --help".to_string(),
    }
}

fn one_line(text: &str) -> String {
    text.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect::<Vec<_>>()
        .join(" ")
}

fn init_logging() {
    use tracing_subscriber::EnvFilter;
    let filter = EnvFilter::try_from_env("WEDGE_LOG")
        // wasmtime-wasi-http warns once per malformed outbound request a guest makes
        // (`http request error: …`), naming no app and within no budget: the guest
        // gets the error code, and wedge logs what it refuses within the app's budget.
        .unwrap_or_else(|_| {
            EnvFilter::new("info,wasmtime=warn,wasmtime_wasi_http=error,cranelift=warn")
        });
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .fmt_fields(crate::serve::access_log::LogFields)
        .with_writer(std::io::stderr)
        .with_target(false)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .init();
}

/// wedge's data directory: `$WEDGE_DATA_DIR`, else `$XDG_DATA_HOME/wedge`,
/// else `~/.local/share/wedge`.
pub(crate) fn default_data_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("XDG_DATA_HOME").filter(|d| !d.is_empty()) {
        return PathBuf::from(dir).join("wedge");
    }
    match std::env::var_os("HOME").filter(|d| !d.is_empty()) {
        Some(home) => PathBuf::from(home).join(".local/share/wedge"),
        None => std::env::temp_dir().join("wedge"),
    }
}
