//! `wedge serve --config`'s admin API flags; they override the config file's
//! `admin` and `admin_token_file`.

use std::net::SocketAddr;
use std::path::PathBuf;

use anyhow::Result;
use clap::Args;

use crate::admin::{self, Token};
use crate::config::AdminConfig;
use crate::host::limits::parse_size;

#[derive(Args)]
pub struct AdminArgs {
    /// Serve the admin API (deploy, replace and remove apps; list them; metrics)
    /// on this address. Needs a bearer token.
    #[arg(long, value_name = "ADDR", requires = "config_file")]
    admin: Option<SocketAddr>,

    /// File holding the admin API's bearer token; else `admin_token_file` of
    /// the config, else $WEDGE_ADMIN_TOKEN.
    #[arg(long, value_name = "FILE", requires = "config_file")]
    admin_token_file: Option<PathBuf>,

    /// Largest upload (component and settings) the admin API accepts.
    #[arg(long, value_name = "SIZE", default_value = admin::DEFAULT_MAX_UPLOAD,
          value_parser = parse_size)]
    admin_max_upload: u64,
}

impl AdminArgs {
    /// The admin API's settings, if the flags or the config's `admin` turn it
    /// on; an error if it has no token.
    pub fn settings(&self, config: Option<&AdminConfig>) -> Result<Option<admin::Settings>> {
        let Some(listen) = self.admin.or(config.map(|admin| admin.listen)) else {
            return Ok(None);
        };
        let file = self
            .admin_token_file
            .as_deref()
            .or(config.and_then(|admin| admin.token_file.as_deref()));
        Ok(Some(admin::Settings {
            listen,
            token: Token::resolve(file)?,
            max_upload: self.admin_max_upload,
        }))
    }
}
