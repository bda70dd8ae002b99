//! `--allow-outbound` and the outbound limits: where a guest may send HTTP
//! requests, defaults taken from [`Outbound`] (and shown in `--help`).

use clap::builder::TypedValueParser;

use crate::host::outbound::{HostPattern, Outbound};

fn defaults() -> Outbound {
    Outbound::default()
}

/// Outbound HTTP from guests (wasi:http/outgoing-handler).
#[derive(clap::Args, Debug, Clone)]
#[command(next_help_heading = "Outbound HTTP")]
pub struct OutboundArgs {
    /// A destination guests may send HTTP requests to: `host` (any port),
    /// `host:port` or `*.domain[:port]`; repeat for more. Without any, every
    /// outbound request is denied (the guest gets HTTP-request-denied).
    #[arg(long = "allow-outbound", value_name = "PATTERN")]
    pub allow_outbound: Vec<HostPattern>,

    /// Time to open a connection to an allowed origin; a guest may ask for less.
    #[arg(long, default_value_t = defaults().connect_timeout.into())]
    pub outbound_connect_timeout: humantime::Duration,

    /// Outbound requests one app may have in flight (head sent, response body not
    /// yet done); more fail at once with connection-limit-reached.
    #[arg(long, default_value_t = defaults().max_concurrent,
          value_parser = clap::value_parser!(u32).range(1..).map(|n| n as usize))]
    pub outbound_max_concurrent: usize,
}

impl OutboundArgs {
    pub fn to_policy(&self) -> Outbound {
        Outbound {
            allow: self.allow_outbound.clone(),
            connect_timeout: self.outbound_connect_timeout.into(),
            max_concurrent: self.outbound_max_concurrent,
        }
    }
}
