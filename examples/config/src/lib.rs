//! `config`: what an app hands its guest. Config values come through
//! `wasi:config/store` (`--var KEY=VALUE`, `[app.config]`), environment
//! variables through WASI's environment (`--env KEY=VALUE`, `[app.env]`).
//!
//! - `GET /config/:key`, `GET /env/:key`: the value, or `404` naming the key.
//! - `GET /config`, `GET /env`: every `KEY=VALUE`, one a line, sorted by key
//!   (an empty body when there are none).

use wedge_sdk::{Error, Request, Response, Router};

async fn one_config(req: Request) -> Result<Response, Error> {
    let key = req.param("key").unwrap_or_default();
    let value = wedge_sdk::config::get(key)?;
    found(value, "config value", key)
}

async fn one_env(req: Request) -> Result<Response, Error> {
    let key = req.param("key").unwrap_or_default();
    found(std::env::var(key).ok(), "environment variable", key)
}

async fn all_config(_req: Request) -> Result<Response, Error> {
    Ok(listing(wedge_sdk::config::get_all()?))
}

async fn all_env(_req: Request) -> Response {
    listing(std::env::vars().collect())
}

fn found(value: Option<String>, what: &str, key: &str) -> Result<Response, Error> {
    match value {
        Some(value) => Ok(Response::text(format!("{value}\n"))),
        None => Err(Error::http(404, format!("no {what} `{key}`"))),
    }
}

fn listing(mut pairs: Vec<(String, String)>) -> Response {
    pairs.sort();
    let lines: String = pairs.iter().map(|(k, v)| format!("{k}={v}\n")).collect();
    Response::text(lines)
}

async fn handle(req: Request) -> Response {
    let router = Router::new()
        .get("/config", all_config)
        .get("/config/:key", one_config)
        .get("/env", all_env)
        .get("/env/:key", one_env);
    router.handle(req).await
}

wedge_sdk::export_handler!(handle);
