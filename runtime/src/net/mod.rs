//! IO drivers: listeners and the protocol engines that run on them.

pub mod h1;
pub mod listener;

pub use listener::Listener;
