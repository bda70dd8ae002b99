//! The wasm side: the engine, apps, per-request stores, limits, the key-value
//! stores, and the bridge the protocol engines dispatch into.

pub mod admission;
pub mod ansi;
mod app;
mod body;
mod build_failure;
mod cache;
mod componentize;
mod dev_overlay;
mod dispatch;
mod engine;
mod fault;
mod guest_log;
mod hooks;
pub mod keyvalue;
pub mod lifecycle;
pub mod limits;
pub mod outbound_client;
mod reuse;
mod site;
mod slot;
mod store;
mod vars;
mod wagi;

// The plain values apps are configured with, shared with the config parser, which
// reads them without wasmtime in the wedge-config crate.
pub use wedge_config::{executor, outbound, routes};

pub use app::App;
pub use body::{BodyError, ResponseBody};
pub use build_failure::BuildFailure;
pub use cache::ArtifactCache;
pub use dev_overlay::DevOverlay;
pub use dispatch::{ClientAddr, RequestScheme, plain};
pub use engine::{PoolConfig, build_engine};
pub use executor::Executor;
pub use fault::Fault;
pub use limits::Limits;
pub use routes::{DuplicateRoute, Route, RouteTable};
pub use site::{BASE_PATH, Directory, Mount, Site, Tenant};
pub use slot::{AppSlot, Serving};
