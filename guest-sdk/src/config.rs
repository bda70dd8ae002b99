//! The app's config values, read through the standard `wasi:config/store`
//! interface.
//!
//! On wedge they come from `[app.config]` in `wedge.toml` or `--var KEY=VALUE`
//! on the command line. Environment variables (`[app.env]`, `--env KEY=VALUE`)
//! are plain WASI environment variables: read them with [`std::env::var`]. A
//! guest sees exactly the variables its app was given, never the host's.
//!
//! ```no_run
//! use wedge_sdk::{Error, Request, Response};
//!
//! async fn handle(_req: Request) -> Result<Response, Error> {
//!     let greeting = wedge_sdk::config::get("greeting")?.unwrap_or_else(|| "hello".into());
//!     let name = std::env::var("NAME").unwrap_or_else(|_| "world".into());
//!     Ok(Response::text(format!("{greeting}, {name}!\n")))
//! }
//!
//! wedge_sdk::export_handler!(handle);
//! ```
//!
//! Importing `wasi:config/store` (which calling these functions does) makes the
//! component need a host that provides it, as wedge does; a component that
//! never calls them does not import it.

use crate::{Error, ErrorKind};

// Only this interface: wasi:http and the rest come from wstd's bindings.
#[path = "config_bindings.rs"]
#[rustfmt::skip]
mod bindings;

use bindings::wasi::config::store;

/// The config value named `key`, or `None` if the app has none by that name.
///
/// An `Err` (kind [`ErrorKind::Config`], answering `500`) means the host could
/// not read its config source; wedge's values are in memory and never fail.
///
/// ```no_run
/// let url = wedge_sdk::config::get("upstream")?
///     .ok_or_else(|| wedge_sdk::Error::msg("no `upstream` configured"))?;
/// # Ok::<(), wedge_sdk::Error>(())
/// ```
pub fn get(key: &str) -> Result<Option<String>, Error> {
    store::get(key).map_err(config_error)
}

/// Every config value of the app as `(key, value)` pairs, in no particular order.
///
/// ```no_run
/// for (key, value) in wedge_sdk::config::get_all()? {
///     println!("{key} = {value}");
/// }
/// # Ok::<(), wedge_sdk::Error>(())
/// ```
pub fn get_all() -> Result<Vec<(String, String)>, Error> {
    store::get_all().map_err(config_error)
}

fn config_error(error: store::Error) -> Error {
    let message = match error {
        store::Error::Upstream(message) => format!("config source: {message}"),
        store::Error::Io(message) => format!("config I/O: {message}"),
    };
    Error::new(ErrorKind::Config, message)
}
