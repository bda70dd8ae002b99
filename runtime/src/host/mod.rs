//! The wasm side: the engine, apps, where a request enters the guest (`call`),
//! per-request stores, limits, request and response bodies, the key-value stores.

pub mod admission;
pub mod ansi;
mod app;
mod build_failure;
mod cache;
pub mod call;
mod componentize;
mod dev_overlay;
mod engine;
mod fault;
mod first_request;
mod guest_log;
mod hooks;
pub mod keyvalue;
pub mod lifecycle;
pub mod limits;
mod needs_concurrency;
pub mod outbound_client;
mod request_body;
mod response;
mod response_body;
mod store;
pub mod tiered;
mod vars;

// The plain values apps are configured with, shared with the config parser, which
// reads them without wasmtime in the wedge-config crate.
pub use wedge_config::{compile, executor, outbound};

pub use app::App;
pub use build_failure::BuildFailure;
pub use cache::ArtifactCache;
pub use call::{BASE_PATH, ClientAddr};
pub use compile::Compile;
pub use dev_overlay::DevOverlay;
pub use engine::{PoolConfig, build_engine, development_compile_mode};
pub use executor::Executor;
pub use fault::Fault;
pub use limits::Limits;
pub use request_body::IncomingBody;
pub use response::plain;
pub use response_body::{BodyError, BoundBody, ResponseBody};
