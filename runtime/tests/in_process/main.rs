//! wedge's library in process, without the `wedge` binary: the HTTP/2 engine with
//! native handlers and with example components, and the metrics hooks behind wedge's
//! own listeners. What the tests share is tests/support (the `support` crate).
//!
//! A binary of its own because `h2_native_handlers` installs a counting global
//! allocator: it counts per thread, so the other tests here run beside it without
//! blurring its counts, but it should not sit under every end-to-end test.

mod h2_example_apps;
mod h2_native_handlers;
mod metrics_hooks;
