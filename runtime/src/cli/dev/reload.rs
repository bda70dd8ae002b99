//! Rebuilds the project when its sources change and swaps the new version into the
//! slot; a failed build keeps the last good version serving.

use std::sync::Arc;

use sha2::{Digest, Sha256};

use super::project::Project;
use super::watch::Changes;
use crate::cli::server::Host;
use crate::host::{App, ArtifactCache, BuildFailure, DevOverlay, Executor};
use crate::metrics::AppMetrics;
use crate::tenancy::{Serving, Tenant, tier_up_on_first_request};

/// Builds and loads versions of one project.
pub struct Reloader {
    project: Arc<Project>,
    host: Host,
    changes: Changes,
    /// Told how each build went, for the browser.
    overlay: Arc<DevOverlay>,
    /// The SHA-256 of the component served now: a rebuild that changes nothing
    /// (a save without edits) is not swapped in.
    loaded: Option<[u8; 32]>,
}

impl Reloader {
    pub fn new(
        project: Arc<Project>,
        host: Host,
        changes: Changes,
        overlay: Arc<DevOverlay>,
    ) -> Self {
        Reloader {
            project,
            host,
            changes,
            overlay,
            loaded: None,
        }
    }

    /// The version to serve first: the app, or the build's errors.
    pub async fn first_version(&mut self) -> Serving {
        // The first version is worth caching: restarting `wedge dev` on an unchanged
        // crate then skips compilation.
        let cache = self.host.cache.clone();
        match self.build_and_report(cache).await {
            Ok(Some(app)) => Serving::App(app),
            Ok(None) => unreachable!("nothing was loaded before the first version"),
            Err(failure) => {
                tracing::warn!(
                    "`{}` failed to build; requests get a 500 page with the errors until a build succeeds",
                    failure.app
                );
                Serving::BuildFailed(Arc::new(failure))
            }
        }
    }

    /// Rebuilds after every change, forever (until the server's runtime stops).
    /// Changes during a build make one more build after it.
    pub async fn run(mut self, tenant: Arc<Tenant>) {
        let slot = tenant.slot();
        tier_up_on_first_request(&tenant);
        loop {
            let changed = self.changes.next().await;
            tracing::info!("{changed} changed: rebuilding");
            // Each edit is a new component: caching them would only fill the disk.
            match self.build_and_report(ArtifactCache::disabled()).await {
                Ok(Some(app)) => {
                    let name = app.name().to_string();
                    slot.replace(Serving::App(app));
                    tier_up_on_first_request(&tenant);
                    tracing::info!("reloaded `{name}`: new requests get the new version");
                }
                Ok(None) => tracing::info!("rebuilt: the component did not change"),
                Err(failure) if slot.has_app() => tracing::warn!(
                    "`{}` failed to build; still serving the last version that built",
                    failure.app
                ),
                Err(failure) => {
                    tracing::warn!("`{}` still fails to build", failure.app);
                    slot.replace(Serving::BuildFailed(Arc::new(failure)));
                }
            }
        }
    }

    /// `build_and_load`, and its outcome told to the overlay.
    async fn build_and_report(
        &mut self,
        cache: ArtifactCache,
    ) -> Result<Option<Arc<App>>, BuildFailure> {
        let result = self.build_and_load(cache).await;
        match &result {
            Ok(_) => self.overlay.built(),
            Err(failure) => self.overlay.failed(Arc::new(failure.clone())),
        }
        result
    }

    /// Builds the project and loads its component, unless it is the one served now
    /// (`Ok(None)`).
    async fn build_and_load(
        &mut self,
        cache: ArtifactCache,
    ) -> Result<Option<Arc<App>>, BuildFailure> {
        let failure = |errors: String| BuildFailure {
            app: self.project.name().to_string(),
            errors,
        };
        let project = self.project.clone();
        let building = self.changes.building();
        let built = tokio::task::spawn_blocking(move || project.build()).await;
        drop(building);
        let built = built
            .map_err(|err| failure(format!("the build task failed: {err}")))?
            .map_err(|err| failure(err.errors))?;
        let wasm = std::fs::read(&built.wasm)
            .map_err(|err| failure(format!("cannot read {}: {err}", built.wasm.display())))?;
        let digest: [u8; 32] = Sha256::digest(&wasm).into();
        if self.loaded == Some(digest) {
            return Ok(None);
        }
        let engine = self.host.engine.clone();
        // `--wagi`, or a crate whose metadata says so.
        let executor = match built.executor {
            Executor::Wagi => Executor::Wagi,
            Executor::WasiHttp => self.host.executor,
        };
        let limits = self.host.limits.clone();
        let outbound = self.host.outbound.clone();
        let admission = self.host.admission.clone();
        let vars = self.host.vars.clone();
        let keyvalue = self
            .host
            .keyvalue
            .store(&built.name, &self.host.kv, AppMetrics::detached())
            .map_err(|bad| failure(format!("{}: {}", bad.flag, bad.why)))?;
        let app = tokio::task::spawn_blocking(move || {
            App::load(&engine, &cache, &built.name, &wasm, executor, limits).map(|app| {
                app.with_outbound(outbound)
                    .with_admission(admission)
                    .with_env(vars.env)
                    .with_config(vars.config)
                    .with_keyvalue(keyvalue)
            })
        })
        .await
        .map_err(|err| failure(format!("the load task failed: {err}")))?
        .map_err(|err| failure(format!("{err:#}")))?;
        self.loaded = Some(digest);
        Ok(Some(Arc::new(app)))
    }
}
