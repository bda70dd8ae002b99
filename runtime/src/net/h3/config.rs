//! The HTTP/3 engine's limits (DESIGN 4.5), each with a default safe to face the
//! internet with: what quinn enforces per connection and what the h3 core enforces.

use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result};
use quinn::crypto::rustls::QuicServerConfig;
use wedge_proto::h3;

use crate::net::cert::CertifiedKey;
use crate::net::tls;

/// ALPN id of HTTP/3 (RFC 9114 §3.1).
const ALPN_H3: &[u8] = b"h3";

/// Everything an operator can tune about HTTP/3 connections: what quinn enforces per
/// connection, what the sans-IO core enforces, and the driver's timeouts.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct H3Config {
    /// Field section size, QPACK and flood budgets the protocol core enforces.
    pub core: h3::Config,
    /// Request streams a client may have open at once (quinn's
    /// `max_concurrent_bidi_streams`): the client cannot open more.
    pub max_concurrent_streams: u32,
    /// A connection that carries nothing for this long is closed (QUIC idle timeout).
    pub idle_timeout: Duration,
    /// A request stream whose head is not whole this long after it opened is reset
    /// with H3_REQUEST_INCOMPLETE (slowloris; QUIC's idle timeout does not see it
    /// while the client keeps the connection alive).
    pub header_read_timeout: Duration,
    /// A response blocked on the client's flow control that has made no progress for
    /// this long is reset with H3_REQUEST_CANCELLED and its handler dropped (a client
    /// that never grants credit would park the guest forever).
    pub zero_window_timeout: Duration,
    /// Request body octets quinn buffers per stream before the guest reads them (QUIC
    /// stream flow control): what one stream whose guest never reads can pin.
    pub stream_receive_window: u32,
    /// Request body octets quinn buffers per connection across its streams (QUIC
    /// connection flow control). Streams whose guests never read hold their share
    /// until the connection ends, so this is sized for several of them.
    pub connection_receive_window: u32,
}

impl Default for H3Config {
    fn default() -> Self {
        H3Config {
            core: h3::Config::default(),
            max_concurrent_streams: 100,
            idle_timeout: Duration::from_secs(30),
            header_read_timeout: Duration::from_secs(30),
            zero_window_timeout: Duration::from_secs(30),
            stream_receive_window: 256 * 1024,
            connection_receive_window: 8 * 1024 * 1024,
        }
    }
}

impl H3Config {
    /// quinn's server configuration: TLS 1.3 with ALPN `h3` presenting `key` (the TLS
    /// listener's certificate), and these limits.
    pub fn server_config(&self, key: &CertifiedKey) -> Result<quinn::ServerConfig> {
        let tls = tls::server_config(key, &[&rustls::version::TLS13], &[ALPN_H3])?;
        let crypto = QuicServerConfig::try_from(tls).context("configuring TLS for QUIC")?;
        let mut config = quinn::ServerConfig::with_crypto(Arc::new(crypto));
        let transport = Arc::get_mut(&mut config.transport)
            .expect("a fresh server config owns its transport config");
        transport.max_concurrent_bidi_streams(self.max_concurrent_streams.into());
        // The client's control stream and QPACK streams, plus room for grease.
        transport.max_concurrent_uni_streams(8u32.into());
        // quinn's defaults (1.25 MB a stream, no connection limit) would let one
        // connection pin over 100 MB of request bodies its guests never read.
        transport.stream_receive_window(self.stream_receive_window.into());
        transport.receive_window(self.connection_receive_window.into());
        transport.send_window(u64::from(self.connection_receive_window));
        transport.max_idle_timeout(Some(
            self.idle_timeout
                .try_into()
                .context("the HTTP/3 idle timeout is too long for QUIC")?,
        ));
        Ok(config)
    }
}
