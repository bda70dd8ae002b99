//! `--env` and `--var`: the environment variables and wasi:config values the
//! served app's guest sees (`[app.env]` and `[app.config]` of a wedge.toml).

/// What the guest is given to read.
#[derive(clap::Args, Clone)]
#[command(next_help_heading = "Guest environment and config")]
pub struct VarsArgs {
    /// An environment variable for the guest; repeat for more. The guest sees
    /// exactly these, never wedge's own environment.
    #[arg(long = "env", value_name = "KEY=VALUE", value_parser = parse_pair)]
    pub env: Vec<(String, String)>,

    /// A config value the guest reads through wasi:config/store (in Rust,
    /// `wedge_sdk::config::get`); repeat for more.
    #[arg(id = "var", long = "var", value_name = "KEY=VALUE", value_parser = parse_pair)]
    pub config: Vec<(String, String)>,
}

/// `KEY=VALUE`, split at the first `=`, so a value may hold `=` itself.
fn parse_pair(text: &str) -> Result<(String, String), String> {
    match text.split_once('=') {
        Some((key, value)) if !key.is_empty() => Ok((key.to_string(), value.to_string())),
        _ => Err(format!("`{text}` is not KEY=VALUE")),
    }
}
