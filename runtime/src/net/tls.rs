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
pub fn acceptor(key: CertifiedKey) -> Result<TlsAcceptor> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .context("configuring TLS versions")?
        .with_no_client_auth()
        .with_single_cert(key.chain, key.key)
        .context("the TLS certificate and key do not fit together")?;
    config.alpn_protocols = vec![ALPN_H2.to_vec(), ALPN_HTTP11.to_vec()];
    Ok(TlsAcceptor::from(Arc::new(config)))
}

/// What ALPN chose; no ALPN at all means HTTP/1.1.
pub fn negotiated(conn: &rustls::ServerConnection) -> Negotiated {
    match conn.alpn_protocol() {
        Some(ALPN_H2) => Negotiated::H2,
        _ => Negotiated::H1,
    }
}
