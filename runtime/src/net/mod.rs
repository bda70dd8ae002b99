//! IO drivers: listeners, TLS, and the protocol engines that run on them.

pub mod cert;
pub mod h1;
pub mod h2;
pub mod listener;
mod rewind;
mod sniff;
pub mod tls;

pub use listener::Listeners;
