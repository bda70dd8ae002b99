//! `wedge new NAME`: scaffolds a guest crate that `wedge dev NAME` serves (a wasi:http
//! handler on the SDK, or with `--wagi` a WAGI program on the standard library alone),
//! in a git repository of its own unless it is created inside one.

use std::path::{Component, Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result, anyhow, bail};
use clap::Args;

#[derive(Args)]
pub struct NewArgs {
    /// Name of the app, of its crate and of the directory created for it:
    /// lowercase letters, digits, `-` and `_`, starting with a letter.
    name: String,

    /// The wedge-sdk crate to depend on: its directory [default: the one in the
    /// source tree wedge was built from]. Written relative to the new crate when
    /// both are in one git repository, else as an absolute path.
    #[arg(long, value_name = "PATH", conflicts_with = "wagi")]
    sdk: Option<PathBuf>,

    /// A WAGI program instead (CGI over WASI preview 1: the request in its
    /// environment and stdin, the response on its stdout), built for wasm32-wasip1
    /// with the standard library alone.
    #[arg(long)]
    wagi: bool,
}

/// Where the SDK was when this binary was built.
const BUILT_SDK: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../guest-sdk");

pub fn run(args: NewArgs) -> Result<()> {
    // The crate's name is the app's (`wedge dev` and `wedge serve DIR` serve it
    // under it), so it must be one `wedge deploy` and wedge.toml take too.
    crate::config::check_app_name(&args.name).map_err(|reason| anyhow!(reason))?;
    let dir = PathBuf::from(&args.name);
    if dir.exists() {
        bail!("{} already exists", dir.display());
    }
    let cwd = std::env::current_dir()
        .and_then(|cwd| cwd.canonicalize())
        .context("finding the current directory")?;
    let repository = repository(&cwd);
    let (files, source, sdk_line) = if args.wagi {
        (wagi_files(&args.name), "src/main.rs", None)
    } else {
        let sdk = sdk_dir(args.sdk.as_deref())?;
        let sdk_dependency = match &repository {
            // Moved or cloned together, they stay together: a relative path keeps working.
            Repository::Inside(top) if sdk.starts_with(top) => relative(&sdk, &cwd.join(&dir)),
            _ => sdk.clone(),
        };
        let sdk_line = format!(
            "  wedge-sdk: {} (another with `wedge new --sdk PATH`)",
            sdk.display()
        );
        let files = handler_files(&args.name, &sdk_dependency);
        (files, "src/lib.rs", Some(sdk_line))
    };
    for (path, text) in files {
        let path = dir.join(path);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)
                .with_context(|| format!("creating {}", parent.display()))?;
        }
        std::fs::write(&path, text).with_context(|| format!("writing {}", path.display()))?;
    }
    println!(
        "created `{}`: edit {}/{source}, then run `wedge dev {}`",
        args.name, args.name, args.name
    );
    if let Some(line) = sdk_line {
        println!("{line}");
    }
    match repository {
        Repository::Inside(top) => println!("  git: inside the repository at {}", top.display()),
        Repository::Outside => match git_init(&dir) {
            Ok(()) => println!("  git: a new repository in {}/", args.name),
            Err(err) => eprintln!("wedge: no git repository created: {err:#}"),
        },
        Repository::NoGit => eprintln!("wedge: git is not installed: no repository created"),
    }
    Ok(())
}

/// Whether a directory is in a git work tree.
enum Repository {
    /// In the one at this (absolute) top directory.
    Inside(PathBuf),
    /// In none, as far as git looks (up to `GIT_CEILING_DIRECTORIES`).
    Outside,
    /// `git` is not on PATH.
    NoGit,
}

fn repository(dir: &Path) -> Repository {
    let out = Command::new("git")
        .args(["rev-parse", "--show-toplevel"])
        .current_dir(dir)
        .output();
    match out {
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => Repository::NoGit,
        Ok(out) if out.status.success() => {
            let top = String::from_utf8_lossy(&out.stdout);
            Repository::Inside(PathBuf::from(top.trim_end_matches('\n')))
        }
        // Not a repository, or git could not tell: a new one does no harm.
        _ => Repository::Outside,
    }
}

fn git_init(dir: &Path) -> Result<()> {
    let out = Command::new("git")
        .args(["init", "--quiet"])
        .current_dir(dir)
        .output()
        .context("running git init")?;
    if !out.status.success() {
        bail!(
            "git init failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(())
}

/// The SDK directory: `given`, else the one wedge was built from; absolute.
fn sdk_dir(given: Option<&Path>) -> Result<PathBuf> {
    let path = given.unwrap_or(Path::new(BUILT_SDK));
    if !path.join("Cargo.toml").is_file() {
        let hint = match given {
            Some(_) => "a wedge-sdk crate's directory holds its Cargo.toml",
            None => "pass the directory of a wedge-sdk checkout with --sdk PATH",
        };
        bail!("no wedge-sdk crate at {} ({hint})", path.display());
    }
    path.canonicalize()
        .with_context(|| format!("resolving {}", path.display()))
}

/// `path` relative to `from`, both absolute and free of `..` and symlinks.
fn relative(path: &Path, from: &Path) -> PathBuf {
    let path: Vec<Component> = path.components().collect();
    let from: Vec<Component> = from.components().collect();
    let shared = path.iter().zip(&from).take_while(|(a, b)| a == b).count();
    let up = from[shared..].iter().map(|_| Component::ParentDir);
    up.chain(path[shared..].iter().copied()).collect()
}

/// A wasi:http handler's crate on the SDK at `sdk`.
fn handler_files(name: &str, sdk: &Path) -> [(&'static str, String); 4] {
    [
        ("Cargo.toml", cargo_toml(name, sdk)),
        ("src/lib.rs", LIB_RS.to_string()),
        (".cargo/config.toml", CARGO_CONFIG.to_string()),
        (".gitignore", "/target\n".to_string()),
    ]
}

/// A WAGI program's crate: a binary on the standard library alone.
fn wagi_files(name: &str) -> [(&'static str, String); 4] {
    [
        ("Cargo.toml", wagi_cargo_toml(name)),
        ("src/main.rs", MAIN_RS.to_string()),
        (".cargo/config.toml", WAGI_CARGO_CONFIG.to_string()),
        (".gitignore", "/target\n".to_string()),
    ]
}

fn wagi_cargo_toml(name: &str) -> String {
    format!(
        r#"[package]
name = "{name}"
version = "0.1.0"
edition = "2024"

# wedge runs it as a WAGI program (CGI over WASI preview 1), built for wasm32-wasip1.
[package.metadata.wedge]
executor = "wagi"

[profile.release]
opt-level = "s"
strip = true

# Its own workspace, so it builds wherever it was created.
[workspace]
"#
    )
}

fn cargo_toml(name: &str, sdk: &Path) -> String {
    // A JSON string is also a TOML basic string.
    let sdk = serde_json::json!(sdk.display().to_string());
    format!(
        r#"[package]
name = "{name}"
version = "0.1.0"
edition = "2024"

[lib]
crate-type = ["cdylib"]

[dependencies]
# Another checkout of the SDK: `wedge new --sdk PATH`, or edit the path.
wedge-sdk = {{ path = {sdk} }}

[profile.release]
opt-level = "s"
strip = true

# Its own workspace, so it builds wherever it was created.
[workspace]
"#
    )
}

const LIB_RS: &str = r#"//! A wedge handler: every request gets a greeting naming its path.

use wedge_sdk::{Request, Response};

async fn handle(req: Request) -> Response {
    Response::text(format!("Hello from {}!\n", req.path()))
}

wedge_sdk::export_handler!(handle);
"#;

const CARGO_CONFIG: &str = r#"# Handlers are WebAssembly components for WASI 0.2.
[build]
target = "wasm32-wasip2"
"#;

const MAIN_RS: &str = r#"//! A WAGI program (CGI, RFC 3875): wedge runs it once per request. The request is in
//! its environment (REQUEST_METHOD, PATH_INFO, QUERY_STRING, HTTP_* for the fields)
//! and its body on stdin; the response goes to stdout: header lines, an empty line,
//! then the body, streamed to the client as it is written. stderr goes to the log.

use std::io::Write;

fn main() -> std::io::Result<()> {
    let method = std::env::var("REQUEST_METHOD").unwrap_or_default();
    let path = std::env::var("PATH_INFO").unwrap_or_default();
    let mut out = std::io::stdout().lock();
    write!(out, "Content-Type: text/plain; charset=utf-8

")?;
    writeln!(out, "Hello from {method} {path}!")
}
"#;

const WAGI_CARGO_CONFIG: &str = r#"# WAGI programs are WASI preview 1 command modules.
[build]
target = "wasm32-wasip1"
"#;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_manifest_names_the_crate_and_the_sdk() {
        let toml = cargo_toml("greeter", Path::new("/opt/wedge/guest-sdk"));
        assert!(toml.contains("name = \"greeter\""));
        assert!(toml.contains(r#"wedge-sdk = { path = "/opt/wedge/guest-sdk" }"#));
        assert!(toml.contains("crate-type = [\"cdylib\"]"));
        let quoted = cargo_toml("greeter", Path::new(r#"/opt/a "b"\c/guest-sdk"#));
        assert!(quoted.contains(r#"wedge-sdk = { path = "/opt/a \"b\"\\c/guest-sdk" }"#));
    }

    #[test]
    fn a_wagi_crate_is_a_binary_wedge_runs_as_wagi() {
        let toml = wagi_cargo_toml("cgi");
        assert!(toml.contains("name = \"cgi\""));
        let metadata = wedge_config::parse_guest_crate(&toml, "Cargo.toml").unwrap();
        assert_eq!(metadata.executor, crate::host::Executor::Wagi);
        assert_eq!(metadata.target.as_str(), "wasm32-wasip1");
        assert!(!toml.contains("[lib]") && !toml.contains("wedge-sdk"));
    }

    #[test]
    fn relative_paths_climb_to_the_shared_directory() {
        let sdk = Path::new("/repo/guest-sdk");
        assert_eq!(
            relative(sdk, Path::new("/repo/apps/greeter")),
            Path::new("../../guest-sdk")
        );
        assert_eq!(
            relative(sdk, Path::new("/repo/greeter")),
            Path::new("../guest-sdk")
        );
    }
}
