//! Where every engine (HTTP/1.1, HTTP/2, HTTP/3) hands a request: the app version
//! current now, what the listener adds to responses, and the access log.

use std::sync::Arc;

use bytes::Bytes;
use http::{Request, Response};
use http_body::Body;
use tokio::time::Instant;

use super::access_log::{AccessLog, Entry};
use super::response_hook::ResponseHook;
use crate::host::{AppSlot, RequestScheme, ResponseBody};

/// One listener's way to the app; cheap to clone per connection.
#[derive(Clone)]
pub struct Frontend {
    slot: Arc<AppSlot>,
    hook: ResponseHook,
    access_log: AccessLog,
}

impl Frontend {
    pub fn new(slot: Arc<AppSlot>, access_log: AccessLog) -> Self {
        Frontend {
            slot,
            hook: ResponseHook::none(),
            access_log,
        }
    }

    /// The same way to the app, with `hook` applied to every response.
    pub fn with_hook(&self, hook: ResponseHook) -> Self {
        Frontend {
            hook,
            ..self.clone()
        }
    }

    /// Answers `request` with the app version current now.
    pub async fn respond<B>(
        &self,
        request: Request<B>,
        scheme: RequestScheme,
    ) -> Response<ResponseBody>
    where
        B: Body<Data = Bytes> + Send + Unpin + 'static,
        B::Error: Into<wasmtime_wasi_http::Error>,
    {
        // Copied only when logging: the request moves into the guest.
        let logged = self.access_log.is_on().then(|| {
            let target = request.uri().path_and_query().map_or("/", |p| p.as_str());
            (
                Instant::now(),
                request.method().clone(),
                target.to_string(),
                request.version(),
            )
        });
        let response = self.slot.handle(request, scheme).await;
        let response = self.finish(response);
        if let Some((started, method, path, version)) = logged {
            self.access_log.record(&Entry {
                method: &method,
                path: &path,
                status: response.status(),
                elapsed: started.elapsed(),
                version,
            });
        }
        response
    }

    /// A response wedge made itself on the way out: the listener's additions applied.
    pub fn finish(&self, mut response: Response<ResponseBody>) -> Response<ResponseBody> {
        self.hook.apply(&mut response);
        response
    }
}
