//! The linear-memory limit: an instance's memories and tables grow only up to the
//! app's `memory`.

use wasmtime::ResourceLimiter;

/// Denies linear-memory growth past the app's limit and remembers that it did,
/// so the resulting trap is reported as "memory limit exceeded".
pub struct MemoryLimiter {
    pub(crate) limit: u64,
    pub(crate) denied: bool,
}

impl MemoryLimiter {
    pub(crate) fn limit(&self) -> u64 {
        self.limit
    }
}

impl ResourceLimiter for MemoryLimiter {
    fn memory_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        let allowed = desired as u64 <= self.limit;
        if !allowed {
            self.denied = true;
        }
        Ok(allowed)
    }

    fn table_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        // Tables hold references, a few bytes each; bound them so a guest
        // cannot use them to get around the memory limit.
        Ok((desired as u64).saturating_mul(16) <= self.limit)
    }
}
