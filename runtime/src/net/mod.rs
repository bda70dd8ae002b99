//! IO drivers: listeners, TLS, and the protocol engines that run on them. They hand
//! requests to a [`Service`] and know nothing of what answers them.

pub mod cert;
pub mod conn_gate;
pub mod h1;
pub mod h2;
pub mod h3;
pub mod handler;
mod io_fault;
pub mod listener;
pub mod request_body;
mod response_fields;
mod reuseport;
mod rewind;
pub mod service;
mod sniff;
pub mod tcp_socket;
pub mod tls;
pub mod uri;

pub use listener::Listeners;
pub(crate) use response_fields::has_content;
pub use service::{Counters, Service};
pub use uri::RequestScheme;
