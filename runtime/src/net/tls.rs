//! TLS termination with rustls; ALPN picks HTTP/2 or HTTP/1.1.

use std::sync::Arc;

use anyhow::{Context, Result};
use tokio_rustls::TlsAcceptor;

use super::cert::CertifiedKey;

/// ALPN ids we offer, most preferred first.
const ALPN_H2: &[u8] = b"h2";
const ALPN_HTTP11: &[u8] = b"http/1.1";

/// The protocol a TLS connection agreed on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Negotiated {
    H1,
    H2,
}

/// Builds the acceptor for the TLS listener.
pub fn acceptor(key: &CertifiedKey) -> Result<TlsAcceptor> {
    let config = server_config(key, rustls::DEFAULT_VERSIONS, &[ALPN_H2, ALPN_HTTP11])?;
    Ok(TlsAcceptor::from(Arc::new(config)))
}

/// Builds an acceptor offering HTTP/1.1 only (the admin API's listener).
pub fn http1_acceptor(key: &CertifiedKey) -> Result<TlsAcceptor> {
    let config = server_config(key, rustls::DEFAULT_VERSIONS, &[ALPN_HTTP11])?;
    Ok(TlsAcceptor::from(Arc::new(config)))
}

/// A rustls server config on the ring provider presenting `key`, for the TLS listener
/// and (TLS 1.3 only) for QUIC: both present the same certificate.
pub(crate) fn server_config(
    key: &CertifiedKey,
    versions: &[&'static rustls::SupportedProtocolVersion],
    alpn: &[&[u8]],
) -> Result<rustls::ServerConfig> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_protocol_versions(versions)
        .context("configuring TLS versions")?
        .with_no_client_auth()
        .with_single_cert(key.chain.clone(), key.key.clone_key())
        .context("the TLS certificate and key do not fit together")?;
    config.alpn_protocols = alpn.iter().map(|id| id.to_vec()).collect();
    Ok(config)
}

/// What ALPN chose; no ALPN at all means HTTP/1.1.
pub fn negotiated(conn: &rustls::ServerConnection) -> Negotiated {
    match conn.alpn_protocol() {
        Some(ALPN_H2) => Negotiated::H2,
        _ => Negotiated::H1,
    }
}
