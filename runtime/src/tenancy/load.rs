//! Loads `[[app]]` entries into tenants and a directory of routes. On a reload, an
//! app whose entry and component bytes are unchanged keeps its tenant (its slots,
//! queue and compiled component); the others are loaded anew.

use std::collections::HashMap;
use std::sync::{Arc, Weak};

use anyhow::{Context, Result, anyhow};
use sha2::{Digest, Sha256};
use wasmtime::Engine;

use super::{Directory, Serving, Tenant, tier_up_on_first_request};
use crate::config::{AppConfig, ComponentSource};
use crate::host::admission::Admission;
use crate::host::keyvalue::KeyValueHost;
use crate::host::{App, ArtifactCache};
use crate::metrics::Metrics;
use crate::oci::{Reference, Registry};

/// What each tenant of a load was made from, to recognise unchanged apps next time.
pub struct Loaded {
    sources: HashMap<String, Source>,
    /// The admission of each app removed since, while its versions' requests or
    /// instances still hold it: an app of the same name deployed again shares its
    /// slots and places, so that a removal and a deploy cannot double them either.
    removed: HashMap<String, Weak<Admission>>,
}

/// An app's entry and the digest of its component, with the tenant made from them.
#[derive(Clone)]
struct Source {
    entry: AppConfig,
    digest: [u8; 32],
    /// An OCI component's reference pinned to the manifest it resolved to.
    resolved: Option<Reference>,
    tenant: Arc<Tenant>,
}

impl Loaded {
    /// The SHA-256 (hex) of the component app `name` serves.
    pub fn digest(&self, name: &str) -> Option<String> {
        let source = self.sources.get(name)?;
        Some(crate::hex::hex(&source.digest))
    }

    /// What app `name`'s OCI reference resolved to, pinned by digest (`None` for a
    /// component file).
    pub fn resolved(&self, name: &str) -> Option<Reference> {
        self.sources.get(name)?.resolved.clone()
    }

    /// Retires the tenants of this load that `next` does not keep (apps replaced by
    /// a new version, or removed): requests no longer reach them.
    pub fn retire_replaced(&self, next: &Loaded) {
        for (name, source) in &self.sources {
            let kept = next
                .sources
                .get(name)
                .is_some_and(|now| Arc::ptr_eq(&now.tenant, &source.tenant));
            if !kept {
                source.tenant.retire();
            }
        }
    }

    /// Sizes each served app's slots and places to its version's limits, once the
    /// load is what requests reach (see [`Admission::commit`]).
    pub fn commit_limits(&self) {
        for source in self.sources.values() {
            if let Serving::App(app) = source.tenant.slot().current() {
                app.admission.commit();
            }
        }
    }

    /// Instances of app `name` running and requests waiting for one.
    pub fn load_of(&self, name: &str) -> (usize, usize) {
        match self.sources.get(name).map(|s| s.tenant.slot().current()) {
            Some(Serving::App(app)) => (app.admission.running(), app.admission.waiting()),
            _ => (0, 0),
        }
    }
}

/// What apps are loaded with: the engine and its precompiled cache, the registry
/// `oci://` components come from, the key-value stores, the metrics (when on).
pub struct Loader<'a> {
    pub engine: &'a Engine,
    pub cache: &'a ArtifactCache,
    pub registry: &'a Registry,
    pub keyvalue: &'a KeyValueHost,
    pub metrics: Option<&'a Metrics>,
}

/// Loads `apps` (compiling on blocking threads) into a directory; apps unchanged
/// since `previous` are taken over as they are (those `reread` names, only if their
/// component's bytes did not change either: a file is read again, a tag resolved
/// again). Errors name the app and its component.
pub async fn load_site(
    loader: &Loader<'_>,
    apps: &[AppConfig],
    previous: Option<&Loaded>,
    reread: impl Fn(&str) -> bool,
) -> Result<(Directory, Loaded)> {
    let Loader {
        engine,
        cache,
        registry,
        keyvalue,
        metrics,
    } = *loader;
    let mut sources = HashMap::new();
    let mut routed = Vec::new();
    let mut removed = previous.map(|p| removed_since(p, apps)).unwrap_or_default();
    for entry in apps {
        let gone = removed.remove(&entry.name).and_then(|old| old.upgrade());
        let before = previous.and_then(|p| p.sources.get(&entry.name));
        // An entry that did not change keeps its tenant; its file is read again only
        // on a config reload (a deploy of another app must not pick up, or trip over,
        // a component being rebuilt in place).
        if let Some(source) = before.filter(|s| !reread(&entry.name) && s.entry == *entry) {
            routed.push((source.tenant.clone(), entry.routes.clone()));
            sources.insert(entry.name.clone(), source.clone());
            continue;
        }
        let (wasm, resolved) = read_component(registry, entry).await?;
        // A component may be 100 MiB: hashed off the async threads (the admin API's
        // probes share them).
        let digest: [u8; 32] = tokio::task::block_in_place(|| Sha256::digest(&wasm).into());
        let unchanged = before.filter(|s| s.digest == digest && s.entry == *entry);
        let tenant = match unchanged {
            Some(source) => source.tenant.clone(),
            None => {
                // A new version shares the slots and places of the one it replaces, or
                // of a removed app of its name (resized if its limits differ): a swap
                // must not let an app run twice its instances.
                let previous = before
                    .and_then(|s| match s.tenant.slot().current() {
                        Serving::App(app) => Some(app.admission.clone()),
                        Serving::BuildFailed(_) => None,
                    })
                    .or(gone);
                let admission = previous.map(|old| match *old.limits() == entry.admission {
                    true => old,
                    false => Arc::new(Admission::succeed(&old, entry.admission.clone())),
                });
                let mut app = load_app(engine, cache, entry, wasm, admission).await?;
                if let Some(metrics) = metrics {
                    app = app.with_metrics(metrics.app(&entry.name));
                }
                let store = keyvalue.store(&entry.name, &entry.keyvalue, app.metrics.clone());
                let store = store.map_err(|bad| {
                    anyhow!("app `{}`: keyvalue.{}: {}", entry.name, bad.key, bad.why)
                })?;
                app = app.with_keyvalue(store);
                let tenant = Arc::new(Tenant::new(&entry.name, Serving::App(Arc::new(app))));
                tier_up_on_first_request(&tenant);
                tenant
            }
        };
        routed.push((tenant.clone(), entry.routes.clone()));
        let source = Source {
            entry: entry.clone(),
            digest,
            resolved,
            tenant,
        };
        sources.insert(entry.name.clone(), source);
    }
    // The config's own checks already refused duplicate routes; this cannot fail
    // for a config that loaded, but say why if it does.
    let directory = Directory::new(routed).map_err(|duplicates| {
        let lines: Vec<String> = duplicates.iter().map(ToString::to_string).collect();
        anyhow::anyhow!("{}", lines.join("; "))
    })?;
    Ok((directory, Loaded { sources, removed }))
}

/// The admissions of the apps `previous` had that `apps` has not, and of those removed
/// before, while anything still holds them.
fn removed_since(previous: &Loaded, apps: &[AppConfig]) -> HashMap<String, Weak<Admission>> {
    let mut removed: HashMap<_, _> = previous
        .removed
        .iter()
        .filter(|(_, admission)| admission.strong_count() > 0)
        .map(|(name, admission)| (name.clone(), admission.clone()))
        .collect();
    for (name, source) in &previous.sources {
        if apps.iter().any(|app| app.name == *name) {
            continue;
        }
        if let Serving::App(app) = source.tenant.slot().current() {
            removed.insert(name.clone(), Arc::downgrade(&app.admission));
        }
    }
    removed
}

/// The bytes of `entry`'s component: its file, or what its OCI reference resolves
/// to now (pulled, or from the cache when pinned by digest), with the reference
/// pinned to that manifest.
async fn read_component(
    registry: &Registry,
    entry: &AppConfig,
) -> Result<(Vec<u8>, Option<Reference>)> {
    match &entry.component {
        ComponentSource::File(path) => tokio::task::block_in_place(|| std::fs::read(path))
            .map(|wasm| (wasm, None))
            .with_context(|| format!("app `{}`: cannot read {}", entry.name, path.display())),
        ComponentSource::Oci(reference) => {
            let pulled = registry.fetch(&entry.name, reference).await;
            let pulled = pulled.with_context(|| format!("app `{}`", entry.name))?;
            Ok((pulled.wasm, Some(reference.pinned(pulled.manifest))))
        }
    }
}

/// Compiles (or takes from the cache) one app's component with its entry's limits,
/// admission, outbound policy and variables.
async fn load_app(
    engine: &Engine,
    cache: &ArtifactCache,
    entry: &AppConfig,
    wasm: Vec<u8>,
    admission: Option<Arc<Admission>>,
) -> Result<App> {
    let (engine, cache, entry) = (engine.clone(), cache.clone(), entry.clone());
    tokio::task::spawn_blocking(move || {
        let limits = entry.limits.clone();
        let app = App::load(&engine, &cache, &entry.name, &wasm, entry.executor, limits)
            .with_context(|| format!("app `{}`: {}", entry.name, entry.component))?;
        Ok(app
            .with_outbound(entry.outbound.clone())
            .with_admission(
                admission.unwrap_or_else(|| Arc::new(Admission::new(entry.admission.clone()))),
            )
            .with_env(entry.env.clone())
            .with_config(entry.config.clone()))
    })
    .await
    .context("loading an app")?
}
