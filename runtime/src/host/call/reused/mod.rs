//! Requests served by reused instances: p3 components always (several requests at
//! once on one instance), p2 components when the app asks for it (`instance_reuse`
//! above 1; one request at a time).
//!
//! p3 instances run in wasmtime-wasi-http's own `handler::ProxyHandler`, the
//! machinery `wasmtime serve` reuses instances with: it keeps workers per app, each
//! one store and one instance living inside `Store::run_concurrent`, hands each
//! request to a worker with room, and reads p3 response bodies inside that event
//! loop. wedge supplies the policy (`policy`: wasmtime's `HandlerState`,
//! `WorkerState`, `WorkerExpiration`): how many requests an instance takes at once
//! and in all, when an idle or overdue one goes, each request's wall-clock deadline,
//! the CPU meter, the metrics, and what each failure answers.
//!
//! p2 instances need none of that machinery, which costs every host call its task
//! bookkeeping and needs an engine with component-model concurrency: wedge drives
//! them itself (`p2`), one plain call per request (driven by the request's task or
//! by one of its own, `driven_call`), kept between requests in an idle pool
//! (`idle`), with the same limits and the same answers to each failure.
//!
//! Isolation: an instance serves requests of one app version only (one
//! `ProxyHandler` and one idle pool per `App`), so state never crosses apps; between
//! requests of the same app it may (globals, caches), which is what the app asked
//! for. A trap fails the instance and every request on it (each gets its fault's
//! status, 500 for a trap); the next request gets a fresh instance.

mod body;
mod claim;
mod driven_call;
mod entry;
mod idle;
mod p2;
mod policy;

pub(super) use entry::serve;
pub(crate) use idle::Idle;
pub(crate) use p2::Kept;
pub(crate) use policy::Retired;
