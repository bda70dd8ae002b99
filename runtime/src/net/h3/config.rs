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

/// Everything an operator can tune about HTTP/3 connections.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct H3Config {
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
    /// SETTINGS_MAX_FIELD_SECTION_SIZE: a larger request head is answered 431.
    pub max_field_section_size: u64,
    /// SETTINGS_QPACK_MAX_TABLE_CAPACITY: the QPACK dynamic table a client may make us
    /// keep per connection; 0, no dynamic table.
    pub qpack_max_table_capacity: u64,
    /// SETTINGS_QPACK_BLOCKED_STREAMS: request streams that may wait on the client's
    /// QPACK encoder stream at once.
    pub qpack_blocked_streams: u64,
    /// Requests with a handler started that a client may cancel (RESET_STREAM or
    /// STOP_SENDING) before their response ended, earned back per completed response:
    /// past it the connection closes with H3_EXCESSIVE_LOAD (rapid reset,
    /// CVE-2023-44487).
    pub peer_reset_budget: u32,
    /// Requests already handed out that a client's frames may make us reset (a body
    /// unlike its content-length, bad trailers), earned back per completed response:
    /// past it, H3_EXCESSIVE_LOAD (MadeYouReset, CVE-2025-8671).
    pub server_reset_budget: u32,
    /// Frames that move nothing (empty DATA, reserved types) a client may send on its
    /// request and control streams, earned back by request heads and body octets: past
    /// it, H3_EXCESSIVE_LOAD.
    pub empty_frame_flood_budget: u32,
}

impl Default for H3Config {
    fn default() -> Self {
        let core = h3::Config::default();
        H3Config {
            max_concurrent_streams: 100,
            idle_timeout: Duration::from_secs(30),
            header_read_timeout: Duration::from_secs(30),
            zero_window_timeout: Duration::from_secs(30),
            stream_receive_window: 256 * 1024,
            connection_receive_window: 8 * 1024 * 1024,
            max_field_section_size: core.max_field_section_size,
            qpack_max_table_capacity: core.qpack_max_table_capacity,
            qpack_blocked_streams: core.qpack_blocked_streams,
            peer_reset_budget: core.peer_reset_budget,
            server_reset_budget: core.server_reset_budget,
            empty_frame_flood_budget: core.empty_frame_flood_budget,
        }
    }
}

impl H3Config {
    /// The part the sans-IO core enforces.
    pub fn core(&self) -> h3::Config {
        h3::Config {
            max_field_section_size: self.max_field_section_size,
            qpack_max_table_capacity: self.qpack_max_table_capacity,
            qpack_blocked_streams: self.qpack_blocked_streams,
            peer_reset_budget: self.peer_reset_budget,
            server_reset_budget: self.server_reset_budget,
            empty_frame_flood_budget: self.empty_frame_flood_budget,
        }
    }

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
