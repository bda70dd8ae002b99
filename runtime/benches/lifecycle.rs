//! Where a fresh instance's time goes, phase by phase, for the `hello` example:
//! the host's own dispatch steps run one after the other on one thread
//! (`wedge::host::lifecycle`). Prints a markdown table the benchmark suite
//! pastes into BENCHMARKS.md.
//!
//! Run: `cargo bench -p wedge --bench lifecycle` (builds the examples first with
//! `cargo build --release --target wasm32-wasip2 --manifest-path examples/Cargo.toml`).
//! `REQUESTS` (default 5000) bounds the run; `COMPONENT` names another component.

use std::path::PathBuf;
use std::sync::Arc;

use anyhow::{Context, Result};
use wedge::host::lifecycle::Lifecycle;
use wedge::host::{App, ArtifactCache, PoolConfig, build_engine};

fn main() -> Result<()> {
    if std::env::args().any(|a| a == "--list") {
        // `cargo test --benches` lists targets; nothing to list here.
        return Ok(());
    }
    let component = match std::env::var_os("COMPONENT") {
        Some(path) => PathBuf::from(path),
        None => PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("../examples/target/wasm32-wasip2/release/hello.wasm"),
    };
    let requests: usize = match std::env::var("REQUESTS") {
        Ok(n) => n.parse().context("REQUESTS is not a number")?,
        Err(_) => 5000,
    };
    let wasm = std::fs::read(&component)
        .with_context(|| format!("reading {} (build the examples first)", component.display()))?;
    let engine = build_engine(&PoolConfig::default(), wedge::host::Compile::Optimized)?;
    let app = Arc::new(App::load(
        &engine,
        &ArtifactCache::disabled(),
        "hello",
        &wasm,
        Default::default(),
        Default::default(),
    )?);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let mut lifecycle = runtime.block_on(Lifecycle::measure(&app, requests / 10, requests))?;
    println!(
        "{requests} sequential GET / requests to `{}`, one fresh instance each:\n",
        component.file_name().unwrap_or_default().to_string_lossy()
    );
    print!("{}", lifecycle.table());
    Ok(())
}
