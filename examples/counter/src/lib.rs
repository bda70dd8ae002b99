//! `counter`: named counters in the app's key-value store (`wedge_sdk::kv`),
//! incremented atomically: concurrent requests, on any instance or (with a Redis
//! backend) on any wedge sharing it, never lose a count.
//!
//! - `POST /:name` adds 1 (or `?by=N`, N may be negative) and answers the new
//!   value, `N\n`.
//! - `GET /:name` answers the value (`0` for a counter never incremented).
//! - `GET /` lists every counter as `name=N`, one a line, in name order.
//! - `GET` or `POST /control/:name` answers `0` the way the routes above answer,
//!   without touching the store: a benchmark's control (`runtime/benches/suite`),
//!   so the store's cost can be told apart from the router's and the instance's.
//!
//! A store that refuses or fails (a quota, a backend that is down) is a `500`
//! naming why; the app keeps serving.

use wedge_sdk::kv::Store;
use wedge_sdk::{Error, Request, Response, Router};

async fn increment(req: Request) -> Result<Response, Error> {
    let name = req.param("name").unwrap_or_default();
    let by = match req.query_param("by") {
        Some(by) => by
            .parse::<i64>()
            .map_err(|_| Error::http(400, format!("`by` must be a whole number, not `{by}`")))?,
        None => 1,
    };
    let value = Store::open_default()?.increment(name, by)?;
    Ok(Response::text(format!("{value}\n")))
}

async fn current(req: Request) -> Result<Response, Error> {
    let name = req.param("name").unwrap_or_default();
    let value = Store::open_default()?.get_text(name)?;
    Ok(Response::text(format!(
        "{}\n",
        value.as_deref().unwrap_or("0")
    )))
}

async fn all(_req: Request) -> Result<Response, Error> {
    let store = Store::open_default()?;
    let mut lines = String::new();
    for name in store.keys()? {
        let value = store.get_text(&name)?.unwrap_or_default();
        lines.push_str(&format!("{name}={value}\n"));
    }
    Ok(Response::text(lines))
}

/// `current` and `increment` without the store: routed the same, the same answer
/// for a counter never incremented.
async fn control(_req: Request) -> Result<Response, Error> {
    Ok(Response::text("0\n"))
}

async fn handle(req: Request) -> Response {
    let router = Router::new()
        .get("/", all)
        .get("/:name", current)
        .post("/:name", increment)
        .get("/control/:name", control)
        .post("/control/:name", control);
    router.handle(req).await
}

wedge_sdk::export_handler!(handle);
