//! What an app's instances may use, and how each limit is enforced: linear memory
//! (`linear_memory`), CPU time (`cpu`), host memory (`host_memory`). The values
//! themselves, and their defaults, are the config's (`wedge_config::limits`).

pub mod cpu;
pub mod host_memory;
pub mod linear_memory;

pub use wedge_config::limits::*;
