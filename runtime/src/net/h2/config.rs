//! The HTTP/2 engine's settings, limits and timeouts (DESIGN 4.5): each has a default
//! that is safe to face the internet with.

use std::time::Duration;

use wedge_proto::h2::ConnConfig;

/// Everything an operator can tune about HTTP/2 connections: what the sans-IO core
/// enforces, and the driver's buffers and timeouts around it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct H2Config {
    /// Settings, windows and flood budgets the protocol core enforces.
    pub core: ConnConfig,
    /// Response bytes one stream may stage per write turn: a body that never waits
    /// still lets the connection write, and a zero-window peer pins no more than this
    /// per stream.
    pub stream_send_buffer: usize,
    /// Time for the client preface and first SETTINGS.
    pub handshake_timeout: Duration,
    /// Time for the client to acknowledge our SETTINGS (RFC 9113 §6.5.3); then GOAWAY
    /// SETTINGS_TIMEOUT.
    pub settings_timeout: Duration,
    /// Time to finish a request header block once started (slowloris).
    pub header_read_timeout: Duration,
    /// A connection with no open streams is closed after this long.
    pub idle_timeout: Duration,
    /// A connection whose responses are all stuck on a zero flow-control window is
    /// closed after this long.
    pub zero_window_timeout: Duration,
    /// A connection with octets to send that the peer takes none of for this long is
    /// dropped without waiting for them (a peer that stopped reading its socket); a
    /// connection with nothing left but to flush (closing, or gone away with every
    /// stream done) gets no more than this from its last progress, however slowly the
    /// peer keeps reading.
    pub write_timeout: Duration,
}

impl Default for H2Config {
    fn default() -> Self {
        H2Config {
            core: ConnConfig::default(),
            stream_send_buffer: 16 * 1024,
            handshake_timeout: Duration::from_secs(10),
            settings_timeout: Duration::from_secs(10),
            header_read_timeout: Duration::from_secs(30),
            idle_timeout: Duration::from_secs(120),
            zero_window_timeout: Duration::from_secs(30),
            write_timeout: Duration::from_secs(30),
        }
    }
}
