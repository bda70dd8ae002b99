//! `wedge serve --config`'s admin API flags; they override the config file's
//! `admin`, `admin_token_file` and `admin_tls_cert`/`admin_tls_key`.

use std::net::SocketAddr;
use std::path::PathBuf;

use anyhow::{Result, bail};
use clap::Args;

use super::addr::parse_listen;
use crate::admin::{self, Token};
use crate::config::{AdminConfig, PemFiles};
use crate::host::limits::parse_size;

// No `requires = "config_file"` here: clap drops a requirement on an argument that
// conflicts with one given (`--config` conflicts with TARGET), so `serve app.wasm
// --admin ADDR` passed. `serve` refuses these flags itself ([`AdminArgs::refuse`]).
#[derive(Args)]
#[command(next_help_heading = "Admin API")]
pub struct AdminArgs {
    /// Serve the admin API (deploy, replace and remove apps; list them; metrics)
    /// on this address; needs --config and a bearer token. Off a loopback
    /// address, give it --admin-tls-cert/--admin-tls-key: the token is sent with
    /// every request.
    #[arg(long, value_name = "ADDR", value_parser = parse_listen)]
    admin: Option<SocketAddr>,

    /// File holding the admin API's bearer token; else `admin_token_file` of
    /// the config, else $WEDGE_ADMIN_TOKEN.
    #[arg(long, value_name = "FILE")]
    admin_token_file: Option<PathBuf>,

    /// PEM certificate chain: the admin API serves HTTPS (else `admin_tls_cert`
    /// of the config; without either, cleartext HTTP).
    #[arg(long, value_name = "FILE", requires = "admin_tls_key")]
    admin_tls_cert: Option<PathBuf>,

    /// PEM private key for --admin-tls-cert.
    #[arg(long, value_name = "FILE", requires = "admin_tls_cert")]
    admin_tls_key: Option<PathBuf>,

    /// Largest upload (component and settings) the admin API accepts
    /// [default: 100MiB].
    #[arg(long, value_name = "SIZE", value_parser = parse_size)]
    admin_max_upload: Option<u64>,
}

impl AdminArgs {
    /// The admin flags given, as typed.
    fn given(&self) -> Vec<&'static str> {
        let flags = [
            (self.admin.is_some(), "--admin"),
            (self.admin_token_file.is_some(), "--admin-token-file"),
            (self.admin_tls_cert.is_some(), "--admin-tls-cert"),
            (self.admin_tls_key.is_some(), "--admin-tls-key"),
            (self.admin_max_upload.is_some(), "--admin-max-upload"),
        ];
        flags
            .into_iter()
            .filter_map(|(given, flag)| given.then_some(flag))
            .collect()
    }

    /// An error if any admin flag is given: the zero-config `serve TARGET` has
    /// no admin API (it serves one app answering every request; the admin API
    /// deploys apps next to a wedge.toml's, each on its routes).
    pub fn refuse(&self) -> Result<()> {
        let Some(first) = self.given().first().copied() else {
            return Ok(());
        };
        bail!(
            "{first} needs --config (the admin API deploys apps next to those of a wedge.toml; \
             a lone TARGET answers every request): write a wedge.toml with \
             `listen = \"127.0.0.1:8080\"` and an `[[app]]` (`name`, `component` = your .wasm, \
             `routes = [\"/\"]`), then run `wedge serve --config wedge.toml --admin ADDR`"
        )
    }

    /// The admin API's settings, if the flags or the config's `admin` turn it
    /// on; an error if it has no token, or if flags are given for an admin API
    /// that is off.
    pub fn settings(&self, config: Option<&AdminConfig>) -> Result<Option<admin::Settings>> {
        let Some(listen) = self.admin.or(config.map(|admin| admin.listen)) else {
            if let Some(first) = self.given().first() {
                bail!(
                    "{first} is given but the admin API is off: turn it on with --admin ADDR \
                     (or `admin` in the config)"
                );
            }
            return Ok(None);
        };
        let file = self
            .admin_token_file
            .as_deref()
            .or(config.and_then(|admin| admin.token_file.as_deref()));
        let flags_pem = self
            .admin_tls_cert
            .clone()
            .zip(self.admin_tls_key.clone())
            .map(|(cert, key)| PemFiles { cert, key });
        let pem = flags_pem.or_else(|| config.and_then(|admin| admin.tls.clone()));
        let tls = pem
            .map(|pem| admin::Settings::tls_acceptor(&pem.cert, &pem.key))
            .transpose()?;
        Ok(Some(admin::Settings {
            listen,
            token: Token::resolve(file)?,
            tls,
            max_upload: self.admin_max_upload.unwrap_or(admin::DEFAULT_MAX_UPLOAD),
        }))
    }
}
