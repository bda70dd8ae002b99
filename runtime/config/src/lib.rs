//! `wedge.toml`: the listeners and the apps (`[[app]]`) one wedge hosts, each
//! with its routes, limits, outbound allow-list, env and config values, key-value
//! store.
//!
//! Loading reports every problem at once, each as `file:line: key: message`,
//! so an operator fixes a file in one pass. See `examples/wedge.toml` for
//! every key with its default.
//!
//! The values it reads into live here too (limits, routes, the outbound policy, OCI
//! references); the runtime re-exports them where it uses them. A crate of its own,
//! free of wasmtime and tokio, so the parser builds for fuzzing in seconds
//! (`runtime/proto/fuzz`, target `config`).

pub mod admission;
pub mod compile;
mod dev;
mod errors;
pub mod executor;
pub mod guest_crate;
pub mod hex;
mod ip_class;
pub mod keyvalue;
pub mod limits;
pub mod oci;
pub mod outbound;
mod parse;
mod reader;
pub mod routes;
mod schema;
#[cfg(test)]
mod tests;

use std::path::{Path, PathBuf};

use toml::de::DeTable;

pub use dev::DevConfig;
pub use errors::{ConfigError, ConfigErrors};
use guest_crate::GuestCrate;
use parse::{Files, Paths};
use reader::Doc;
pub use schema::{AdminConfig, AppConfig, ComponentSource, Config, PemFiles, TlsConfig};

/// Reads and checks the config at `path`; the files it names (components,
/// TLS material, the admin token) must exist. Relative paths in it are
/// resolved against `path`'s directory.
pub fn load(path: &Path) -> Result<Config, ConfigErrors> {
    let name = path.display().to_string();
    let text = std::fs::read_to_string(path).map_err(|err| {
        let error = ConfigError {
            line: None,
            key: String::new(),
            message: format!("cannot read: {err}"),
        };
        ConfigErrors::new(name.clone(), vec![error])
    })?;
    read(&text, path, Files::MustExist)
}

/// Checks config `text` without touching the disk: `path` names the file in
/// messages and its directory resolves relative paths, whose files are not
/// checked to exist.
pub fn parse(text: &str, path: &Path) -> Result<Config, ConfigErrors> {
    read(text, path, Files::Unchecked)
}

fn read(text: &str, path: &Path, files: Files) -> Result<Config, ConfigErrors> {
    let paths = Paths {
        base: path.parent().unwrap_or(Path::new("")),
        files,
    };
    checked(text, path.display().to_string(), |doc, root| {
        parse::config(doc, root, &paths)
    })
}

/// The app `name` deployed through the admin API, with the settings in `text`:
/// the keys of an `[[app]]` table but `name`. It serves `uploaded` (the component
/// file the deploy carried) or, without one, the `oci://` reference `text` gives
/// as `component` (exactly one of the two). `source` names the text in messages.
/// Its routes may still clash with other apps'; that is the host's to refuse.
pub fn parse_app(
    text: &str,
    source: &str,
    name: &str,
    uploaded: Option<PathBuf>,
) -> Result<AppConfig, ConfigErrors> {
    checked(text, source.to_string(), |doc, root| {
        parse::deployed_app(doc, root, name, uploaded)
    })
}

/// The `[dev]` table of the `wedge.toml` in `text` (`None` without one), for
/// `wedge dev`; the file's other keys are `wedge serve`'s and not read here.
/// `path` names the file in messages and its directory resolves relative paths.
pub fn parse_dev(text: &str, path: &Path) -> Result<Option<DevConfig>, ConfigErrors> {
    let base = path.parent().unwrap_or(Path::new(""));
    checked(text, path.display().to_string(), |doc, root| {
        let mut root = reader::Table::new(String::new(), 0..0, root);
        root.take("dev").map(|field| dev::table(doc, &field, base))
    })
}

/// The `[package.metadata.wedge]` table of the guest crate manifest `text` (a
/// `Cargo.toml`), named `source` in messages.
pub fn parse_guest_crate(text: &str, source: &str) -> Result<GuestCrate, ConfigErrors> {
    checked(text, source.to_string(), guest_crate::guest_crate)
}

/// Checks that `name` is an app name (`[[app]]` `name`, `PUT /apps/{name}`):
/// lowercase letters, digits, `-` and `_`, starting with a letter; else why not.
/// Names become directories in the data dir, so nothing else may pass.
pub fn check_app_name(name: &str) -> Result<(), String> {
    parse::app_name(name).map(drop)
}

/// What `check` makes of `text`'s table, or every problem found: the syntax
/// errors alone if any, else `check`'s. `file` names the text in messages.
fn checked<T>(
    text: &str,
    file: String,
    check: impl FnOnce(&mut Doc, &DeTable) -> T,
) -> Result<T, ConfigErrors> {
    let mut doc = Doc::new(text);
    let (root, syntax) = DeTable::parse_recoverable(text);
    if !syntax.is_empty() {
        // What follows a syntax error is guesswork: report the syntax only.
        for error in &syntax {
            match error.span() {
                Some(span) => doc.error(&span, "", error.message().trim()),
                None => doc.error_in_file(error.message().trim()),
            }
        }
        return Err(ConfigErrors::new(file, doc.errors));
    }
    let value = check(&mut doc, root.get_ref());
    if doc.errors.is_empty() {
        Ok(value)
    } else {
        Err(ConfigErrors::new(file, doc.errors))
    }
}
