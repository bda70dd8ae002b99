//! IO drivers: listeners, TLS, and the protocol engines that run on them.

pub mod access_log;
pub mod cert;
pub mod conn_gate;
pub mod frontend;
pub mod h1;
pub mod h2;
pub mod h3;
pub mod handler;
pub mod listener;
pub mod request_body;
mod response_fields;
pub mod response_hook;
mod reuseport;
mod rewind;
mod sniff;
pub mod tally;
pub mod tls;

pub use access_log::AccessLog;
pub use frontend::Frontend;
pub use listener::Listeners;
