//! wedge: a WebAssembly edge handler runtime.
//!
//! Rooms (see DESIGN.md): `cli` → `host` (wasm side); `net` (IO drivers and
//! protocol engines) → `wedge_proto` (sans-IO cores); `config` → `wedge_config`
//! (the config parser and the plain values it reads: limits, routes, the outbound
//! policy, OCI references). Engines hand the host a request head and body and get
//! back a response head and a streamed body.

pub mod admin;
pub mod cli;
pub mod config;
pub mod host;
pub(crate) mod log_text;
pub mod metrics;
pub mod net;
pub mod oci;
pub mod serve;
pub(crate) mod sync;
pub mod tenancy;

use wedge_config::hex;
