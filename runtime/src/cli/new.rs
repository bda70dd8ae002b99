//! `wedge new NAME`: scaffolds a guest crate that `wedge dev NAME` serves.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use clap::Args;

#[derive(Args)]
pub struct NewArgs {
    /// Name of the crate and of the directory created for it.
    name: String,

    /// Path of the wedge-sdk crate to depend on (default: the one in the
    /// source tree wedge was built from).
    #[arg(long)]
    sdk: Option<PathBuf>,
}

/// Where the SDK was when this binary was built.
const BUILT_SDK: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../guest-sdk");

pub fn run(args: NewArgs) -> Result<()> {
    check_crate_name(&args.name)?;
    let dir = PathBuf::from(&args.name);
    if dir.exists() {
        bail!("{} already exists", dir.display());
    }
    let sdk = sdk_path(args.sdk.as_deref())?;
    let files = [
        ("Cargo.toml", cargo_toml(&args.name, &sdk)),
        ("src/lib.rs", LIB_RS.to_string()),
        (".cargo/config.toml", CARGO_CONFIG.to_string()),
        (".gitignore", "/target\n".to_string()),
    ];
    for (path, text) in files {
        let path = dir.join(path);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)
                .with_context(|| format!("creating {}", parent.display()))?;
        }
        std::fs::write(&path, text).with_context(|| format!("writing {}", path.display()))?;
    }
    println!(
        "created `{}`: edit {}/src/lib.rs, then run `wedge dev {}`",
        args.name, args.name, args.name
    );
    Ok(())
}

/// Cargo's rules, kept simple: ASCII letters, digits, `-` and `_`, starting
/// with a letter.
fn check_crate_name(name: &str) -> Result<()> {
    let starts_with_letter = name.chars().next().is_some_and(|c| c.is_ascii_alphabetic());
    let valid_chars = name
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
    if !starts_with_letter || !valid_chars {
        bail!(
            "`{name}` is not a crate name: use letters, digits, `-` and `_`, starting with a letter"
        );
    }
    Ok(())
}

fn sdk_path(given: Option<&Path>) -> Result<PathBuf> {
    let path = given.unwrap_or(Path::new(BUILT_SDK));
    let manifest = path.join("Cargo.toml");
    if !manifest.is_file() {
        bail!(
            "no wedge-sdk crate at {} (pass its directory with --sdk)",
            path.display()
        );
    }
    path.canonicalize()
        .with_context(|| format!("resolving {}", path.display()))
}

fn cargo_toml(name: &str, sdk: &Path) -> String {
    // TOML basic strings escape `\` and `"`; paths here have neither on
    // Unix, but a literal string keeps any path intact.
    format!(
        r#"[package]
name = "{name}"
version = "0.1.0"
edition = "2024"

[lib]
crate-type = ["cdylib"]

[dependencies]
wedge-sdk = {{ path = '{sdk}' }}

[profile.release]
opt-level = "s"
strip = true

# Its own workspace, so it builds wherever it was created.
[workspace]
"#,
        sdk = sdk.display()
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crate_names_follow_cargo() {
        assert!(check_crate_name("my-handler_2").is_ok());
        for bad in ["", "2fast", "-x", "has space", "ünicode", "a/b"] {
            assert!(check_crate_name(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn the_manifest_names_the_crate_and_the_sdk() {
        let toml = cargo_toml("greeter", Path::new("/opt/wedge/guest-sdk"));
        assert!(toml.contains("name = \"greeter\""));
        assert!(toml.contains("wedge-sdk = { path = '/opt/wedge/guest-sdk' }"));
        assert!(toml.contains("crate-type = [\"cdylib\"]"));
    }
}
