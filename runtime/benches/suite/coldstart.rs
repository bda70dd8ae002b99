//! Cold start (issue 20): the componentize-js hello (tests/fixtures/js-hello, built
//! from npm here), from `wedge serve` to its first 200, with and without the
//! precompiled cache, `--compile optimized` and `tiered`. The timing itself is
//! `runtime/benches/coldstart.sh`'s (a process start per round, curl polling);
//! this module builds the component, runs the script and reads its table.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result, bail};

use crate::Settings;

/// The goals of issue 20: the first answer of a component the cache does not hold
/// (tiered), and of one it holds.
pub const GOAL_UNCACHED_MS: f64 = 1000.0;
pub const GOAL_CACHED_MS: f64 = 50.0;

/// What the suite reports: the script's table, or why there is none.
pub struct ColdStart {
    pub component_mib: f64,
    pub command: String,
    /// The script's output: load averages and a markdown table, a row per mode.
    pub output: String,
}

impl ColdStart {
    /// The median and "median [min–max]" cell of the first-200 column of `mode`'s row.
    pub fn first_200(&self, mode: &str) -> Option<(f64, String)> {
        let row = self
            .output
            .lines()
            .find(|l| l.starts_with(&format!("| {mode} |")))?;
        let cell = row.split('|').nth(2)?.trim().to_string();
        let median = cell.split_whitespace().next()?.parse().ok()?;
        Some((median, cell))
    }
}

/// Whether the run measures the cold start: always, unless `ONLY` leaves its key,
/// `cold`, out.
pub fn selected(settings: &Settings) -> bool {
    settings
        .only
        .as_deref()
        .is_none_or(|only| only.split(',').any(|o| "cold".contains(o)))
}

/// Builds the component and times its starts with `wedge`.
pub fn measure(settings: &Settings, wedge: &Path) -> Result<ColdStart> {
    let component = build_js_hello(&settings.repo)?;
    let component_mib = std::fs::metadata(&component)?.len() as f64 / (1 << 20) as f64;
    let rounds = if settings.quick { 1 } else { settings.rounds };
    eprintln!(
        "suite: cold start of {} ({rounds} rounds)",
        component.display()
    );
    let script = settings.repo.join("runtime/benches/coldstart.sh");
    let out = Command::new("timeout")
        .args(["-k", "10", "1800"])
        .arg(&script)
        .arg(wedge)
        .arg(&component)
        .env("ROUNDS", rounds.to_string())
        .output()
        .context("running coldstart.sh")?;
    if !out.status.success() {
        bail!(
            "coldstart.sh failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(ColdStart {
        component_mib,
        command: format!(
            "ROUNDS={rounds} runtime/benches/coldstart.sh {} target/bench-js-hello/dist/app.wasm",
            wedge
                .strip_prefix(&settings.repo)
                .unwrap_or(wedge)
                .display()
        ),
        output: String::from_utf8_lossy(&out.stdout).into_owned(),
    })
}

/// tests/fixtures/js-hello built with its pinned componentize-js (installed once,
/// as the tests do: `support::js`) in target/bench-js-hello.
fn build_js_hello(repo: &Path) -> Result<PathBuf> {
    let dir =
        support::js::project(&repo.join("target/bench-js-hello")).map_err(anyhow::Error::msg)?;
    npm(&dir, &["run", "build"])?;
    Ok(dir.join("dist/app.wasm"))
}

fn npm(dir: &Path, args: &[&str]) -> Result<()> {
    eprintln!("suite: npm {} in {}", args.join(" "), dir.display());
    let out = Command::new("timeout")
        .args(["-k", "10", "600", "npm"])
        .args(args)
        .current_dir(dir)
        .output()
        .context("running npm (apt-get install nodejs npm)")?;
    if !out.status.success() {
        bail!(
            "npm {} failed ({}): {}",
            args.join(" "),
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(())
}
