//! `wedge push COMPONENT REFERENCE`: checks that COMPONENT is a component wedge can
//! serve, pushes it to an OCI registry as a wasm artifact (the layout `wkg oci push`
//! writes) and prints the manifest's digest, to pin the reference with.

use std::path::PathBuf;

use anyhow::{Context, Result, anyhow, bail};
use clap::Args;

use super::registry_args::RegistryArgs;
use crate::host::{self, App, ArtifactCache, Executor, Limits, PoolConfig};
use crate::oci::{ComponentInfo, Reference};

#[derive(Args)]
pub struct PushArgs {
    /// The component (.wasm).
    component: PathBuf,

    /// Where to push it: `[oci://]REGISTRY/REPOSITORY:TAG`.
    reference: String,

    /// Where wedge keeps its data (the check compiles the component, and keeps
    /// the result for `wedge serve`).
    #[arg(long, env = "WEDGE_DATA_DIR")]
    data_dir: Option<PathBuf>,

    /// Check it as a WAGI program (see `wedge serve --wagi`) rather than a
    /// wasi:http handler.
    #[arg(long)]
    wagi: bool,

    #[command(flatten)]
    registry: RegistryArgs,
}

pub fn run(args: PushArgs) -> Result<()> {
    let reference = Reference::parse_lenient(&args.reference).map_err(|why| anyhow!(why))?;
    if reference.digest().is_some() {
        bail!(
            "push to a tag, not a digest (`{reference}`): the digest is what the push gives back"
        );
    }
    let path = &args.component;
    let wasm = std::fs::read(path).with_context(|| format!("cannot read {}", path.display()))?;
    let data_dir = args
        .data_dir
        .clone()
        .unwrap_or_else(super::default_data_dir);
    let name = path
        .file_stem()
        .map(|stem| stem.to_string_lossy().into_owned())
        .unwrap_or_else(|| "component".into());
    let cache = ArtifactCache::new(data_dir.join("precompiled"));
    let executor = if args.wagi {
        Executor::Wagi
    } else {
        Executor::WasiHttp
    };
    let info = check(&name, &wasm, executor, &cache).with_context(|| path.display().to_string())?;
    let registry = args.registry.registry(&data_dir);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    let digest = runtime
        .block_on(registry.push(&reference, wasm, &info))
        .with_context(|| format!("pushing {} to {reference}", path.display()))?;
    tracing::info!("pushed {} as {}", path.display(), reference.pinned(digest));
    println!("{digest}");
    Ok(())
}

/// Loads `wasm` as `wedge serve` would (a component exporting
/// `wasi:http/incoming-handler`, importing only what wedge provides, or a module
/// made one) and names the component's imports and exports for the artifact's config.
fn check(
    name: &str,
    wasm: &[u8],
    executor: Executor,
    cache: &ArtifactCache,
) -> Result<ComponentInfo> {
    // What is pushed is checked with the code a server would cache.
    let engine = host::build_engine(
        &PoolConfig {
            max_instances: 1,
            // Nothing runs: no pages to keep (nor a warning about them under swap).
            keep_resident: 0,
            ..PoolConfig::default()
        },
        host::Compile::Optimized,
    )?;
    let app = App::load(&engine, cache, name, wasm, executor, Limits::default())?;
    // The engine App::load chose for it (see `host::app::Load::prepare`).
    let engine = app.pre.engine();
    let ty = app.component().component_type();
    let names = |items: &mut dyn Iterator<Item = String>| {
        let mut names: Vec<String> = items.collect();
        names.sort();
        names
    };
    Ok(ComponentInfo {
        exports: names(&mut ty.exports(engine).map(|(name, _)| name.to_string())),
        imports: names(&mut ty.imports(engine).map(|(name, _)| name.to_string())),
    })
}
