//! `--allow-outbound`, the outbound limits and the outbound client's settings:
//! where a guest may send HTTP requests, defaults taken from [`Outbound`] and
//! [`ClientSettings`] (and shown in `--help`).

use std::path::PathBuf;

use clap::builder::TypedValueParser;
use rustls::pki_types::CertificateDer;
use rustls::pki_types::pem::PemObject;

use super::value_parsers::parse_positive_duration;
use crate::host::outbound::{HostPattern, Outbound};
use crate::host::outbound_client::{self, ClientSettings};

fn defaults() -> Outbound {
    Outbound::default()
}

/// Outbound HTTP from guests (wasi:http/outgoing-handler).
#[derive(clap::Args, Debug, Clone)]
#[command(next_help_heading = "Outbound HTTP")]
pub struct OutboundArgs {
    /// A destination guests may send HTTP requests to: `host` (any port),
    /// `host:port` or `*.domain[:port]`; repeat for more. Without any, every
    /// outbound request is denied (the guest gets HTTP-request-denied). A name
    /// that resolves to a loopback, private, link-local or other special
    /// address is denied too, unless the pattern is that IP address or `localhost`.
    /// A pattern may not be 0.0.0.0 or [::] (they reach this host), nor an IPv6
    /// form of a special IPv4 address ([::ffff:127.0.0.1]: write 127.0.0.1).
    #[arg(long = "allow-outbound", value_name = "PATTERN")]
    pub allow_outbound: Vec<HostPattern>,

    /// Time to open a connection to an allowed origin; a guest may ask for less.
    #[arg(long, default_value_t = defaults().connect_timeout.into(),
          value_parser = parse_positive_duration::<humantime::Duration>)]
    pub outbound_connect_timeout: humantime::Duration,

    /// Outbound requests one app may have in flight (head sent, response body not
    /// yet done); more fail at once with connection-limit-reached.
    #[arg(long, default_value_t = defaults().max_concurrent,
          value_parser = clap::value_parser!(u32).range(1..).map(|n| n as usize))]
    pub outbound_max_concurrent: usize,

    /// A PEM file of certificate authorities to trust for outbound TLS besides
    /// the webpki roots (Mozilla's list); repeat for more.
    #[arg(long = "outbound-ca", value_name = "FILE", value_parser = parse_ca)]
    pub outbound_ca: Vec<CaFile>,

    /// Idle connections kept per origin (and app) for reuse; more are closed
    /// once idle. 0 opens a new connection for every request.
    #[arg(long, default_value_t = outbound_client::DEFAULT_MAX_IDLE_PER_HOST)]
    pub outbound_idle_per_host: usize,

    /// How long an idle outbound connection is kept for reuse.
    #[arg(long, default_value_t = outbound_client::DEFAULT_IDLE_TIMEOUT.into(),
          value_parser = parse_positive_duration::<humantime::Duration>)]
    pub outbound_idle_timeout: humantime::Duration,
}

/// The certificates of one `--outbound-ca` (or `wedge deploy --admin-ca`) file.
#[derive(Debug, Clone)]
pub struct CaFile(pub Vec<CertificateDer<'static>>);

/// Reads a PEM file of CA certificates, each checked to be usable as a root.
pub(super) fn parse_ca(path: &str) -> Result<CaFile, String> {
    let path = PathBuf::from(path);
    let certs = CertificateDer::pem_file_iter(&path)
        .and_then(|certs| certs.collect::<Result<Vec<_>, _>>())
        .map_err(|err| format!("cannot read certificates from {}: {err}", path.display()))?;
    if certs.is_empty() {
        return Err(format!("{} holds no PEM certificate", path.display()));
    }
    outbound_client::tls_config(&certs)
        .map_err(|err| format!("{} is not a usable CA certificate: {err}", path.display()))?;
    Ok(CaFile(certs))
}

impl OutboundArgs {
    pub fn to_policy(&self) -> Outbound {
        Outbound {
            allow: self.allow_outbound.clone(),
            connect_timeout: self.outbound_connect_timeout.into(),
            max_concurrent: self.outbound_max_concurrent,
        }
    }

    /// The host-wide settings of the apps' outbound clients.
    pub fn client_settings(&self) -> ClientSettings {
        ClientSettings {
            extra_roots: self
                .outbound_ca
                .iter()
                .flat_map(|ca| ca.0.clone())
                .collect(),
            max_idle_per_host: self.outbound_idle_per_host,
            idle_timeout: self.outbound_idle_timeout.into(),
        }
    }
}
