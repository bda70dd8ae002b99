//! The version of an app a listener serves now. `wedge dev` swaps it when a rebuild
//! succeeds: each request takes the version current when it arrived and keeps it to
//! the end, so requests in flight finish on the old version while new ones get the new.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, RwLock};

use http::uri::Scheme;
use http::{Request, Response};

use crate::host::admission::Abandoned;
use crate::host::{App, BuildFailure, IncomingBody, ResponseBody, call};

/// What a slot holds: an app, or the reason there is none yet.
#[derive(Clone)]
pub enum Serving {
    App(Arc<App>),
    /// The app's first build failed: requests get a page showing why.
    BuildFailed(Arc<BuildFailure>),
}

/// One app's current version, replaced atomically.
// A std RwLock, not a crate: readers only clone an Arc out, uncontended except
// during a swap, and a swap happens once per rebuild.
pub struct AppSlot {
    current: RwLock<Serving>,
    /// Its tenant was replaced or removed: no new request reaches it, so nothing
    /// more is put in it (see [`AppSlot::retire`]). Written under `current`'s lock.
    retired: AtomicBool,
}

impl AppSlot {
    pub fn new(serving: Serving) -> Self {
        AppSlot {
            current: RwLock::new(serving),
            retired: AtomicBool::new(false),
        }
    }

    /// What requests arriving now are served by.
    pub fn current(&self) -> Serving {
        crate::sync::read(&self.current).clone()
    }

    /// Serves `serving` from the next request on; returns what was served before,
    /// retired.
    pub fn replace(&self, serving: Serving) -> Serving {
        let mut current = crate::sync::write(&self.current);
        let before = std::mem::replace(&mut *current, serving);
        before.retire();
        before
    }

    /// Marks the slot as no longer reached by new requests (its tenant replaced or
    /// removed; requests in flight may still hold it): [`AppSlot::serves`] is false
    /// from now on and [`AppSlot::replace_if`] refuses, so a background compile
    /// started for its app is neither run nor swapped in.
    pub(crate) fn retire(&self) {
        let current = crate::sync::write(&self.current);
        self.retired.store(true, Ordering::Relaxed);
        current.retire();
    }

    /// Whether `app` is what requests arriving now get (false once retired).
    pub(crate) fn serves(&self, app: &Arc<App>) -> bool {
        let current = crate::sync::read(&self.current);
        !self.retired.load(Ordering::Relaxed) && is_app(&current, app)
    }

    /// Serves `serving` from the next request on if [`AppSlot::serves`] `app`;
    /// whether it did.
    pub(crate) fn replace_if(&self, app: &Arc<App>, serving: Serving) -> bool {
        let mut current = crate::sync::write(&self.current);
        let served = !self.retired.load(Ordering::Relaxed) && is_app(&current, app);
        if served {
            std::mem::replace(&mut *current, serving).retire();
        }
        served
    }

    /// Whether an app (rather than a build failure) is being served.
    pub fn has_app(&self) -> bool {
        matches!(self.current(), Serving::App(_))
    }
}

fn is_app(serving: &Serving, app: &Arc<App>) -> bool {
    matches!(serving, Serving::App(now) if Arc::ptr_eq(now, app))
}

impl Serving {
    /// What it serves gets no new requests from now on.
    fn retire(&self) {
        if let Serving::App(app) = self {
            app.retire();
        }
    }

    /// Answers one request with this version.
    /// `scheme`: what a guest is told the request came with.
    pub async fn handle(
        self,
        request: Request<impl IncomingBody>,
        scheme: Scheme,
        connection: &Abandoned,
    ) -> Response<ResponseBody> {
        match self {
            Serving::App(app) => {
                app.request_arrived();
                call::handle(&app, request, scheme, connection).await
            }
            Serving::BuildFailed(failure) => failure.response(request.headers()),
        }
    }
}
