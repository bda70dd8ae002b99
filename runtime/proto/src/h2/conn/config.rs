//! What a server connection enforces and advertises.

use crate::h2::frame::{
    DEFAULT_HEADER_TABLE_SIZE, DEFAULT_INITIAL_WINDOW_SIZE, DEFAULT_MAX_FRAME_SIZE,
};
use crate::h2::hpack::DEFAULT_MAX_HEADER_LIST_SIZE;

/// Limits of one server connection; every one is advertised or enforced (DESIGN 4.5).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConnConfig {
    /// SETTINGS_MAX_CONCURRENT_STREAMS: streams past it are refused (REFUSED_STREAM).
    pub max_concurrent_streams: u32,
    /// SETTINGS_INITIAL_WINDOW_SIZE: what one stream may buffer before its handler reads.
    pub initial_window_size: u32,
    /// The connection receive window; credited as DATA is buffered.
    pub connection_window_size: u32,
    /// SETTINGS_MAX_FRAME_SIZE we accept.
    pub max_frame_size: u32,
    /// SETTINGS_MAX_HEADER_LIST_SIZE: larger request heads are answered 431, larger
    /// trailers reset their stream (ENHANCE_YOUR_CALM).
    pub max_header_list_size: u32,
    /// CONTINUATION frames one field block may use (CONTINUATION flood).
    pub max_continuation_frames: u32,
    /// SETTINGS_HEADER_TABLE_SIZE: the HPACK table the peer may make us keep.
    pub header_table_size: u32,
    /// Streams the peer may reset before their response ends (rapid reset).
    pub peer_reset_budget: u32,
    /// Resets the peer's frames may make us send (MadeYouReset).
    pub server_reset_budget: u32,
    /// SETTINGS frames without useful work between them.
    pub settings_flood_budget: u32,
    /// PING frames without useful work between them.
    pub ping_flood_budget: u32,
    /// Empty DATA frames without END_STREAM and without useful work between them.
    pub empty_data_flood_budget: u32,
    /// Frames read and ignored (PRIORITY, unknown types) without useful work between
    /// them.
    pub ignored_frame_flood_budget: u32,
    /// Frames a stream may still receive once our response ended before its request
    /// did: judged and discarded, then RST_STREAM(NO_ERROR). Its octets are bounded by
    /// the stream window, never re-opened once the response ended. 0 resets at once.
    pub finished_stream_frames: u32,
}

impl Default for ConnConfig {
    fn default() -> Self {
        ConnConfig {
            max_concurrent_streams: 100,
            initial_window_size: DEFAULT_INITIAL_WINDOW_SIZE,
            connection_window_size: 1024 * 1024,
            max_frame_size: DEFAULT_MAX_FRAME_SIZE,
            max_header_list_size: DEFAULT_MAX_HEADER_LIST_SIZE as u32,
            max_continuation_frames: 32,
            header_table_size: DEFAULT_HEADER_TABLE_SIZE,
            peer_reset_budget: 200,
            server_reset_budget: 100,
            settings_flood_budget: 100,
            ping_flood_budget: 100,
            empty_data_flood_budget: 100,
            ignored_frame_flood_budget: 100,
            finished_stream_frames: 100,
        }
    }
}
