//! What an app's instances may use, and how each limit is enforced: linear memory
//! (`linear_memory`), CPU time (`cpu`), host memory (`host_memory`), output to the
//! log (`guest_output`). The values themselves, and their defaults, are the
//! config's (`wedge_config::limits`).

pub mod cpu;
pub mod guest_output;
pub mod host_memory;
pub mod linear_memory;

pub use wedge_config::limits::*;

/// A size as a limit is written: `16MiB`, `4KiB`, or `100 bytes`.
pub(crate) struct Size(pub u64);

impl std::fmt::Display for Size {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.0 {
            n if n % (1 << 20) == 0 && n > 0 => write!(f, "{}MiB", n >> 20),
            n if n % (1 << 10) == 0 && n > 0 => write!(f, "{}KiB", n >> 10),
            n => write!(f, "{n} bytes"),
        }
    }
}
