//! The HTTP/2 engine's settings, limits and timeouts (DESIGN 4.5): each has a default
//! that is safe to face the internet with.

use std::time::Duration;

use wedge_proto::h2::conn::ConnConfig;

/// Everything an operator can tune about HTTP/2 connections.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct H2Config {
    /// Streams one connection may have open; more are refused with REFUSED_STREAM.
    pub max_concurrent_streams: u32,
    /// Per-stream receive window: the most request body buffered for a handler that
    /// has not read it yet.
    pub initial_window_size: u32,
    /// Connection receive window; credited as DATA is buffered.
    pub connection_window_size: u32,
    /// Largest frame payload we accept.
    pub max_frame_size: u32,
    /// Largest request header list (names + values + 32 per field); larger is a 431.
    pub max_header_list_size: u32,
    /// CONTINUATION frames one header block may use.
    pub max_continuation_frames: u32,
    /// HPACK dynamic table the client may make us keep.
    pub header_table_size: u32,
    /// Streams a client may reset before their response ends (rapid reset,
    /// CVE-2023-44487); earned back by completed responses.
    pub peer_reset_budget: u32,
    /// Resets a client's frames may make us send (CVE-2025-8671); earned back by
    /// completed responses.
    pub server_reset_budget: u32,
    /// SETTINGS frames without a request or body bytes between them.
    pub settings_flood_budget: u32,
    /// PING frames without a request or body bytes between them.
    pub ping_flood_budget: u32,
    /// Empty DATA frames (no END_STREAM) without body bytes between them.
    pub empty_data_flood_budget: u32,
    /// Response bytes one stream may stage per write turn: a body that never waits
    /// still lets the connection write, and a zero-window peer pins no more than this
    /// per stream.
    pub stream_send_buffer: usize,
    /// Time for the client preface and first SETTINGS.
    pub handshake_timeout: Duration,
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
        let core = ConnConfig::default();
        H2Config {
            max_concurrent_streams: core.max_concurrent_streams,
            initial_window_size: core.initial_window_size,
            connection_window_size: core.connection_window_size,
            max_frame_size: core.max_frame_size,
            max_header_list_size: core.max_header_list_size,
            max_continuation_frames: core.max_continuation_frames,
            header_table_size: core.header_table_size,
            peer_reset_budget: core.peer_reset_budget,
            server_reset_budget: core.server_reset_budget,
            settings_flood_budget: core.settings_flood_budget,
            ping_flood_budget: core.ping_flood_budget,
            empty_data_flood_budget: core.empty_data_flood_budget,
            stream_send_buffer: 16 * 1024,
            handshake_timeout: Duration::from_secs(10),
            header_read_timeout: Duration::from_secs(30),
            idle_timeout: Duration::from_secs(120),
            zero_window_timeout: Duration::from_secs(30),
            write_timeout: Duration::from_secs(30),
        }
    }
}

impl H2Config {
    /// The part the sans-IO core enforces.
    pub fn core(&self) -> ConnConfig {
        ConnConfig {
            max_concurrent_streams: self.max_concurrent_streams,
            initial_window_size: self.initial_window_size,
            connection_window_size: self.connection_window_size,
            max_frame_size: self.max_frame_size,
            max_header_list_size: self.max_header_list_size,
            max_continuation_frames: self.max_continuation_frames,
            header_table_size: self.header_table_size,
            peer_reset_budget: self.peer_reset_budget,
            server_reset_budget: self.server_reset_budget,
            settings_flood_budget: self.settings_flood_budget,
            ping_flood_budget: self.ping_flood_budget,
            empty_data_flood_budget: self.empty_data_flood_budget,
        }
    }
}
