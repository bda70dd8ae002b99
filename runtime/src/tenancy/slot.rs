//! The version of an app a listener serves now. `wedge dev` swaps it when a rebuild
//! succeeds: each request takes the version current when it arrived and keeps it to
//! the end, so requests in flight finish on the old version while new ones get the new.

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
}

impl AppSlot {
    pub fn new(serving: Serving) -> Self {
        AppSlot {
            current: RwLock::new(serving),
        }
    }

    /// What requests arriving now are served by.
    pub fn current(&self) -> Serving {
        crate::sync::read(&self.current).clone()
    }

    /// Serves `serving` from the next request on; returns what was served before.
    pub fn replace(&self, serving: Serving) -> Serving {
        let mut current = crate::sync::write(&self.current);
        std::mem::replace(&mut *current, serving)
    }

    /// Serves `serving` from the next request on if `app` is what is served now;
    /// whether it was.
    pub(crate) fn replace_if(&self, app: &Arc<App>, serving: Serving) -> bool {
        let mut current = crate::sync::write(&self.current);
        let served = matches!(&*current, Serving::App(now) if Arc::ptr_eq(now, app));
        if served {
            *current = serving;
        }
        served
    }

    /// Whether an app (rather than a build failure) is being served.
    pub fn has_app(&self) -> bool {
        matches!(self.current(), Serving::App(_))
    }
}

impl Serving {
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
