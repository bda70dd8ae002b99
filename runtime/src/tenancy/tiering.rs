//! Tiered compilation, the swap: an app running Winch's code (`host::tiered`) is
//! compiled by Cranelift in the background after its first request and put in its
//! tenant's slot, the way a redeploy replaces an app: requests in flight finish on
//! the Winch code, new ones get Cranelift's.

use std::sync::{Arc, Weak};
use std::time::Instant;

use super::{Serving, Tenant};
use crate::host::App;
use crate::host::tiered::{in_background, release_freed_memory};

/// Has the app `tenant` serves now replaced by its optimized version after its first
/// request, if it runs Winch's code. Call it whenever a tenant is made or its slot
/// given a new app.
pub fn tier_up_on_first_request(tenant: &Arc<Tenant>) {
    let Serving::App(app) = tenant.slot().current() else {
        return;
    };
    if !app.runs_baseline_code() {
        return;
    }
    let (tenant, version) = (Arc::downgrade(tenant), Arc::downgrade(&app));
    app.on_first_request(move || in_background(move || optimize(&tenant, &version)));
}

/// Compiles `version` with Cranelift and puts the result in `tenant`'s slot, unless
/// the slot no longer serves `version` (a newer version in it, or the tenant replaced
/// or removed meanwhile, though a request in flight keeps it alive): checked before
/// the compile and again at the swap.
fn optimize(tenant: &Weak<Tenant>, version: &Weak<App>) {
    let (Some(tenant), Some(app)) = (tenant.upgrade(), version.upgrade()) else {
        return;
    };
    if !tenant.slot().serves(&app) {
        tracing::debug!(
            "app `{}`: not compiled optimized: that version no longer serves",
            app.name()
        );
        return;
    }
    let started = Instant::now();
    let name = app.name().to_string();
    let Some(compiled) = app.optimized() else {
        return;
    };
    let elapsed = started.elapsed().as_millis();
    let switched = match compiled {
        Ok(optimized) => tenant
            .slot()
            .replace_if(&app, Serving::App(Arc::new(optimized))),
        Err(err) => {
            tracing::warn!(
                "app `{name}` keeps running the baseline compiler's code: compiling it optimized failed: {err:#}"
            );
            false
        }
    };
    drop(app);
    // Cranelift's working memory is freed whether or not it succeeded.
    release_freed_memory();
    if switched {
        tracing::info!(
            "app `{name}` now runs optimized code (compiled in the background in {elapsed} ms); \
             requests in flight finish on the baseline code"
        );
    }
}
