//! # wedge-sdk — HTTP handlers for wedge, as WebAssembly components
//!
//! Write an `async fn` from [`Request`] to [`Response`], export it with
//! [`export_handler!`], and build with
//! `cargo build --release --target wasm32-wasip2`. The result is a plain
//! `wasi:http/proxy` component: it runs on wedge and on any other WASI 0.2
//! HTTP host (e.g. `wasmtime serve`).
//!
//! ```no_run
//! use wedge_sdk::{Request, Response};
//!
//! async fn handle(req: Request) -> Response {
//!     Response::text(format!("Hello from {}!\n", req.path()))
//! }
//!
//! wedge_sdk::export_handler!(handle);
//! ```
//!
//! The crate needs `crate-type = ["cdylib"]` in `[lib]` of your Cargo.toml,
//! and no other dependency.
//!
//! Bodies stream in both directions: [`Body::chunk`] hands over request bytes
//! as they arrive, and [`Response::stream`] writes response bytes as they are
//! produced, waiting for the host's flow-control credit. Nothing buffers a
//! whole body unless you ask for it with [`Body::read_to_end`].
//!
//! [`Router`] dispatches by method and path pattern (`/items/:id`), with
//! `404` and `405` answered for you. Handlers may return
//! `Result<Response, Error>`: an [`Error`] becomes a response with its
//! status (a body over a [`Body::read_to_end`] limit is a `413`, invalid
//! JSON a `400`). The `json` feature adds `Request::json` and
//! `Response::json` (serde).
//!
//! [`config::get`] reads the app's config values (`wasi:config/store`);
//! environment variables the app was given are in [`std::env`]. [`kv::Store`] is
//! the app's key-value store (`wasi:keyvalue`): get, set, atomic increments,
//! compare-and-swap.
//!
//! Under the hood this is a thin layer over [`wstd`], the Bytecode
//! Alliance's async runtime for WASI 0.2: handlers run on its single-threaded
//! executor, which parks on WASI pollables (timers, streams, outbound HTTP),
//! so `wstd`'s timers and HTTP client work inside a handler.
#![warn(missing_docs)]

pub mod config;
mod decode;
mod error;
mod fetch;
pub mod kv;
mod request;
mod response;
mod router;

pub use bytes::Bytes;
pub use error::{Error, ErrorKind};
pub use fetch::{FetchBody, FetchResponse, fetch};
pub use http::{self, HeaderMap, Method, Uri};
pub use request::{Body, Request};
pub use response::{BodyWriter, IntoResponse, Response};
pub use router::Router;

/// Export `handler` as this component's `wasi:http/incoming-handler`.
///
/// `handler` is an `async fn(Request) -> R` (or any function returning a
/// future) where `R:` [`IntoResponse`]: a [`Response`], or a
/// `Result<Response, E>` with `E: Display` (an `Err` becomes a `500` whose
/// body is the error's text). Use it once per component, at the crate root
/// or in any module.
///
/// Each incoming request runs `handler` to completion on `wstd`'s executor,
/// sends the response head, then the body. A request the SDK cannot represent
/// (invalid method, URI or header) is answered `400` without calling
/// `handler`.
///
/// ```no_run
/// use wedge_sdk::{Request, Response};
///
/// async fn handle(req: Request) -> Result<Response, wedge_sdk::Error> {
///     let body = req.into_body().read_to_end(1 << 20).await?;
///     Ok(Response::text(format!("got {} bytes\n", body.len())))
/// }
///
/// wedge_sdk::export_handler!(handle);
/// ```
#[macro_export]
macro_rules! export_handler {
    ($handler:expr $(,)?) => {
        const _: () = {
            struct __WedgeHandler;

            impl $crate::__private::wasip2::exports::http::incoming_handler::Guest
                for __WedgeHandler
            {
                fn handle(
                    request: $crate::__private::wasip2::http::types::IncomingRequest,
                    response_out: $crate::__private::wasip2::http::types::ResponseOutparam,
                ) {
                    $crate::__private::serve(request, response_out, $handler)
                }
            }

            $crate::__private::wasip2::http::proxy::export!(
                __WedgeHandler with_types_in $crate::__private::wasip2
            );
        };
    };
}

/// Implementation details of [`export_handler!`]; not a stable API.
#[doc(hidden)]
pub mod __private {
    pub use wasip2;

    use crate::{IntoResponse, Request, Response};
    use wasip2::http::types::{IncomingRequest, ResponseOutparam};

    /// Run one request through `handler` and send what it returns.
    pub fn serve<F, Fut>(request: IncomingRequest, out: ResponseOutparam, handler: F)
    where
        F: FnOnce(Request) -> Fut,
        Fut: Future,
        Fut::Output: IntoResponse,
    {
        wstd::runtime::block_on(async move {
            let response = match Request::from_wasi(request) {
                Ok(request) => handler(request).await.into_response(),
                Err(error) => Response::text(format!("{error}\n")).with_status(400),
            };
            crate::response::send(response, out).await;
        })
    }
}
