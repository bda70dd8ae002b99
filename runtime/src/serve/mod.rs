//! The wiring between the listeners and engines (`net`), the sites and their apps
//! (`tenancy`) and the wasm host (`host`): the [`Frontend`] every engine hands its
//! requests to (routing, the access log, the metrics, what a listener adds to
//! responses), how net's bodies and host's meet, and the worker threads that serve
//! the listeners.

pub mod access_log;
mod bridge;
pub mod frontend;
pub mod response_hook;
pub mod server;
pub mod tally;
pub mod workers;

pub use access_log::AccessLog;
pub use frontend::Frontend;
