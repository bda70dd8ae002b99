//! Builds a guest crate directory into a component with cargo.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use anyhow::{Context, Result, bail};

const WASM_TARGET: &str = "wasm32-wasip2";

/// A component built from a guest crate.
pub struct Built {
    pub name: String,
    pub wasm: PathBuf,
}

/// Runs `cargo build --release --target wasm32-wasip2` in `dir`, showing
/// cargo's progress and errors, and returns the component it produced.
pub fn build(dir: &Path) -> Result<Built> {
    let manifest = dir.join("Cargo.toml");
    if !manifest.is_file() {
        bail!(
            "{} is a directory without a Cargo.toml (expected a guest crate)",
            dir.display()
        );
    }
    let manifest = manifest
        .canonicalize()
        .with_context(|| format!("cannot resolve {}", manifest.display()))?;
    ensure_wasm_target()?;
    eprintln!("wedge: building {} for {WASM_TARGET}", dir.display());
    let mut child = Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()))
        .args(["build", "--release", "--target", WASM_TARGET])
        .arg("--manifest-path")
        .arg(&manifest)
        .arg("--message-format=json-render-diagnostics")
        // The crate's own .cargo/config.toml applies only from inside it.
        .current_dir(dir)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .context("cannot run cargo (is Rust installed?)")?;
    let mut built = None;
    if let Some(stdout) = child.stdout.take() {
        for line in BufReader::new(stdout).lines() {
            let line = line.context("reading cargo's output")?;
            if let Some(artifact) = component_artifact(&line, &manifest) {
                built = Some(artifact);
            }
        }
    }
    let status = child.wait().context("waiting for cargo")?;
    if !status.success() {
        bail!(
            "building {} failed (cargo's errors are above)",
            dir.display()
        );
    }
    built.with_context(|| {
        format!(
            "{} built, but produced no component: its Cargo.toml needs `[lib] crate-type = [\"cdylib\"]`",
            dir.display()
        )
    })
}

/// Picks the cdylib `.wasm` of the crate at `manifest` out of one line of
/// cargo's JSON messages.
fn component_artifact(line: &str, manifest: &Path) -> Option<Built> {
    let msg: serde_json::Value = serde_json::from_str(line).ok()?;
    if msg["reason"] != "compiler-artifact" {
        return None;
    }
    let from_this_crate = msg["manifest_path"].as_str().map(Path::new) == Some(manifest);
    let is_cdylib = msg["target"]["kind"]
        .as_array()?
        .iter()
        .any(|kind| kind == "cdylib");
    if !from_this_crate || !is_cdylib {
        return None;
    }
    let wasm = msg["filenames"]
        .as_array()?
        .iter()
        .filter_map(|f| f.as_str())
        .find(|f| f.ends_with(".wasm"))?;
    Some(Built {
        name: msg["target"]["name"].as_str()?.to_string(),
        wasm: PathBuf::from(wasm),
    })
}

/// Installs the wasm target with rustup when it is missing.
fn ensure_wasm_target() -> Result<()> {
    let Ok(output) = Command::new("rustup")
        .args(["target", "list", "--installed"])
        .output()
    else {
        // No rustup: cargo will say what is missing.
        return Ok(());
    };
    let installed = String::from_utf8_lossy(&output.stdout);
    if installed.lines().any(|t| t.trim() == WASM_TARGET) {
        return Ok(());
    }
    eprintln!(
        "wedge: the {WASM_TARGET} target is missing; installing it with `rustup target add {WASM_TARGET}`"
    );
    let status = Command::new("rustup")
        .args(["target", "add", WASM_TARGET])
        .status()
        .context("running rustup")?;
    if !status.success() {
        bail!("`rustup target add {WASM_TARGET}` failed");
    }
    Ok(())
}
