//! Many apps in one process: the apps of `wedge.toml` and those deployed through the
//! admin API, loaded into the site the listeners serve. Every change (a config
//! reload, a deploy, a removal) builds a new directory and swaps it in whole:
//! requests in flight finish on what they started with; apps that did not change
//! keep their tenant (compiled component, slots, queue). Routing is here too: which
//! tenant a request's host and path reach (`routing`), and the version of an app a
//! tenant serves now (`slot`).

mod load;
mod routing;
mod slot;
mod tiering;

use std::collections::BTreeMap;
use std::sync::Arc;

use anyhow::Result;
use tokio::sync::Mutex;
use wasmtime::Engine;

use crate::config::AppConfig;
use crate::host::ArtifactCache;
use crate::host::keyvalue::KeyValueHost;
use crate::metrics::Metrics;
use crate::oci::{Reference, Registry};
use load::{Loaded, Loader};

pub use routing::{Directory, Mount, Site, Tenant};
pub use slot::{AppSlot, Serving};
pub use tiering::tier_up_on_first_request;
// The routes themselves are plain values, read by the config parser.
pub use wedge_config::routes::{DuplicateRoute, Route, RouteTable};

/// The apps served, where they came from, and the site they are served through.
pub struct Tenancy {
    site: Arc<Site>,
    engine: Engine,
    cache: ArtifactCache,
    /// Where `oci://` components are pulled from (and cached).
    registry: Arc<Registry>,
    /// Where the apps' key-value stores are opened.
    keyvalue: Arc<KeyValueHost>,
    /// Where loaded apps count their requests (when the metrics are on).
    metrics: Option<Arc<Metrics>>,
    /// Changes are made one at a time.
    state: Mutex<State>,
}

struct State {
    /// `[[app]]` of the config file, in file order.
    configured: Vec<AppConfig>,
    /// Deployed through the admin API, by name; a deployed app replaces a
    /// configured one of the same name.
    deployed: BTreeMap<String, AppConfig>,
    loaded: Loaded,
}

/// What a deploy put in service.
pub struct Deployed {
    /// SHA-256 (hex) of the component served.
    pub digest: String,
    /// The app's OCI reference pinned to the manifest it resolved to (`None` for an
    /// uploaded component): what a restart must serve again.
    pub resolved: Option<Reference>,
}

/// One app as the admin API lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AppInfo {
    pub name: String,
    /// SHA-256 (hex) of the component served.
    pub digest: String,
    pub routes: Vec<String>,
    /// From the admin API (else from the config file).
    pub deployed: bool,
    /// Instances running and requests waiting for one, now.
    pub running: usize,
    pub waiting: usize,
}

impl Tenancy {
    /// Loads the configured `apps`; any that fails to load fails the whole start.
    pub async fn start(
        engine: Engine,
        cache: ArtifactCache,
        registry: Arc<Registry>,
        keyvalue: Arc<KeyValueHost>,
        apps: Vec<AppConfig>,
        metrics: Option<Arc<Metrics>>,
    ) -> Result<Tenancy> {
        let metrics_ref = metrics.as_deref();
        let loader = Loader {
            engine: &engine,
            cache: &cache,
            registry: &registry,
            keyvalue: &keyvalue,
            metrics: metrics_ref,
        };
        let (directory, loaded) = load::load_site(&loader, &apps, None, |_| true).await?;
        Ok(Tenancy {
            site: Arc::new(Site::new(directory)),
            engine,
            cache,
            registry,
            keyvalue,
            metrics,
            state: Mutex::new(State {
                configured: apps,
                deployed: BTreeMap::new(),
                loaded,
            }),
        })
    }

    /// The site the listeners serve.
    pub fn site(&self) -> Arc<Site> {
        self.site.clone()
    }

    /// Serves `apps` as the configured apps from now on (a config reload). On error
    /// nothing changes.
    pub async fn reconfigure(&self, apps: Vec<AppConfig>) -> Result<()> {
        let mut state = self.state.lock().await;
        let deployed = state.deployed.clone();
        // Apps deployed through the admin API are not the file's: a reload leaves
        // them as deployed (a tag they name is not resolved again).
        let from_admin: Vec<String> = deployed.keys().cloned().collect();
        let reread = |name: &str| !from_admin.iter().any(|app| app == name);
        self.swap(&mut state, apps, deployed, reread).await
    }

    /// Deploys `entry` (its component file already in place), replacing an app of the
    /// same name; its component is read again even if the entry is unchanged (a tag
    /// deployed again is resolved again). On error nothing changes.
    pub async fn deploy(&self, entry: AppConfig) -> Result<Deployed> {
        let mut state = self.state.lock().await;
        let name = entry.name.clone();
        let mut deployed = state.deployed.clone();
        deployed.insert(name.clone(), entry);
        let configured = state.configured.clone();
        self.swap(&mut state, configured, deployed, |app| app == name)
            .await?;
        Ok(Deployed {
            digest: state.loaded.digest(&name).unwrap_or_default(),
            resolved: state.loaded.resolved(&name),
        })
    }

    /// Stops serving deployed app `name`, and gives its settings back; `None` if no
    /// such app was deployed.
    pub async fn remove(&self, name: &str) -> Result<Option<AppConfig>> {
        let mut state = self.state.lock().await;
        let mut deployed = state.deployed.clone();
        let Some(removed) = deployed.remove(name) else {
            return Ok(None);
        };
        let configured = state.configured.clone();
        self.swap(&mut state, configured, deployed, |_| false)
            .await?;
        Ok(Some(removed))
    }

    /// Removes every key a removed app kept in its key-value store.
    pub async fn purge_keyvalue(&self, app: &AppConfig) -> Result<()> {
        self.keyvalue.purge(&app.name, &app.keyvalue).await
    }

    /// The apps served now.
    pub async fn apps(&self) -> Vec<AppInfo> {
        let state = self.state.lock().await;
        merged(&state.configured, &state.deployed)
            .iter()
            .map(|entry| {
                let (running, waiting) = state.loaded.load_of(&entry.name);
                AppInfo {
                    name: entry.name.clone(),
                    digest: state.loaded.digest(&entry.name).unwrap_or_default(),
                    routes: entry.routes.iter().map(ToString::to_string).collect(),
                    deployed: state.deployed.contains_key(&entry.name),
                    running,
                    waiting,
                }
            })
            .collect()
    }

    /// Loads `configured` + `deployed` and swaps them in; on error keeps `state`.
    async fn swap(
        &self,
        state: &mut State,
        configured: Vec<AppConfig>,
        deployed: BTreeMap<String, AppConfig>,
        reread: impl Fn(&str) -> bool,
    ) -> Result<()> {
        let apps = merged(&configured, &deployed);
        let loader = Loader {
            engine: &self.engine,
            cache: &self.cache,
            registry: &self.registry,
            keyvalue: &self.keyvalue,
            metrics: self.metrics.as_deref(),
        };
        let (directory, loaded) =
            load::load_site(&loader, &apps, Some(&state.loaded), reread).await?;
        self.site.replace(directory);
        state.loaded.retire_replaced(&loaded);
        loaded.commit_limits();
        *state = State {
            configured,
            deployed,
            loaded,
        };
        Ok(())
    }
}

/// Configured apps not replaced by a deployed one, in file order, then the deployed
/// ones by name.
fn merged(configured: &[AppConfig], deployed: &BTreeMap<String, AppConfig>) -> Vec<AppConfig> {
    configured
        .iter()
        .filter(|app| !deployed.contains_key(&app.name))
        .chain(deployed.values())
        .cloned()
        .collect()
}
