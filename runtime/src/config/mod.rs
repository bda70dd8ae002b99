//! `wedge.toml`: the listeners and the apps (`[[app]]`) one wedge hosts, each
//! with its routes, limits, outbound allow-list, env and config values.
//!
//! Loading reports every problem at once, each as `file:line: key: message`,
//! so an operator fixes a file in one pass. See `examples/wedge.toml` for
//! every key with its default.

mod errors;
mod parse;
mod reader;
mod schema;
#[cfg(test)]
mod tests;

use std::path::Path;

use toml::de::DeTable;

pub use errors::{ConfigError, ConfigErrors};
use parse::{Files, Paths};
use reader::Doc;
pub use schema::{AdminConfig, AppConfig, Config, PemFiles, TlsConfig};

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
    let name = path.display().to_string();
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
        return Err(ConfigErrors::new(name, doc.errors));
    }
    let paths = Paths {
        base: path.parent().unwrap_or(Path::new("")),
        files,
    };
    let config = parse::config(&mut doc, root.get_ref(), &paths);
    if doc.errors.is_empty() {
        Ok(config)
    } else {
        Err(ConfigErrors::new(name, doc.errors))
    }
}
