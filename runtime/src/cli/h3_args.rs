//! `--h3-*` flags and `--no-h3`: every field of [`H3Config`], defaults taken from it (and
//! shown in `--help`).

use crate::net::h3::H3Config;

fn defaults() -> H3Config {
    H3Config::default()
}

/// HTTP/3 on the TLS listener's port (UDP).
#[derive(clap::Args, Debug, Clone)]
#[command(next_help_heading = "HTTP/3")]
pub struct H3Args {
    /// Serve no HTTP/3 (and advertise none with Alt-Svc).
    #[arg(long)]
    pub no_h3: bool,

    /// Request streams one connection may have open at once (QUIC
    /// max_concurrent_bidi_streams): a client cannot open more.
    #[arg(long, default_value_t = defaults().max_concurrent_streams)]
    pub h3_max_concurrent_streams: u32,

    /// A connection that carries nothing for this long is closed (QUIC idle timeout).
    #[arg(long, default_value_t = defaults().idle_timeout.into())]
    pub h3_idle_timeout: humantime::Duration,

    /// A request head not whole this long after its stream opened is reset
    /// (H3_REQUEST_INCOMPLETE): slowloris.
    #[arg(long, default_value_t = defaults().header_read_timeout.into())]
    pub h3_header_read_timeout: humantime::Duration,

    /// A response blocked on the client's flow control with no progress for this long
    /// is reset (H3_REQUEST_CANCELLED) and its handler dropped.
    #[arg(long, default_value_t = defaults().zero_window_timeout.into())]
    pub h3_zero_window_timeout: humantime::Duration,

    /// Request body octets buffered per stream for a guest that has not read them
    /// (QUIC stream receive window).
    #[arg(long, default_value_t = defaults().stream_receive_window)]
    pub h3_stream_receive_window: u32,

    /// Request body octets buffered per connection across its streams (QUIC
    /// connection receive window).
    #[arg(long, default_value_t = defaults().connection_receive_window)]
    pub h3_connection_receive_window: u32,

    /// Largest request head in octets (SETTINGS_MAX_FIELD_SECTION_SIZE); larger
    /// requests are answered 431.
    #[arg(long, default_value_t = defaults().max_field_section_size,
          value_parser = clap::value_parser!(u64).range(1..=MAX_SECTION_OR_TABLE))]
    pub h3_max_field_section_size: u64,

    /// QPACK dynamic table in octets a client may make wedge keep per connection
    /// (SETTINGS_QPACK_MAX_TABLE_CAPACITY); 0 turns the dynamic table off.
    #[arg(long, default_value_t = defaults().qpack_max_table_capacity,
          value_parser = clap::value_parser!(u64).range(0..=MAX_SECTION_OR_TABLE))]
    pub h3_qpack_max_table_capacity: u64,

    /// Request streams that may wait at once for QPACK entries still on their way
    /// (SETTINGS_QPACK_BLOCKED_STREAMS).
    #[arg(long, default_value_t = defaults().qpack_blocked_streams,
          value_parser = clap::value_parser!(u64).range(0..=MAX_BLOCKED_STREAMS))]
    pub h3_qpack_blocked_streams: u64,

    /// Requests with a handler started that a client may cancel before their response
    /// ended, earned back per completed response; past it the connection closes with
    /// H3_EXCESSIVE_LOAD (rapid reset, CVE-2023-44487).
    #[arg(long, default_value_t = defaults().peer_reset_budget)]
    pub h3_peer_reset_budget: u32,

    /// Requests already handed out that a client's frames may make wedge reset, earned
    /// back per completed response; past it, H3_EXCESSIVE_LOAD (MadeYouReset,
    /// CVE-2025-8671).
    #[arg(long, default_value_t = defaults().server_reset_budget)]
    pub h3_server_reset_budget: u32,

    /// Empty DATA and reserved-type frames a client may send, earned back by requests
    /// and body octets; past it, H3_EXCESSIVE_LOAD.
    #[arg(long, default_value_t = defaults().empty_frame_flood_budget)]
    pub h3_empty_frame_flood_budget: u32,
}

/// Far above any real need, and far below where the wire's 62-bit integers or the
/// core's size arithmetic could overflow.
const MAX_SECTION_OR_TABLE: u64 = 16 * 1024 * 1024;
/// Blocked streams cannot usefully exceed the streams a connection may open.
const MAX_BLOCKED_STREAMS: u64 = 65_536;

impl H3Args {
    /// The engine configuration these flags describe, or `None` with `--no-h3`.
    pub fn to_config(&self) -> Option<H3Config> {
        (!self.no_h3).then(|| H3Config {
            max_concurrent_streams: self.h3_max_concurrent_streams,
            idle_timeout: self.h3_idle_timeout.into(),
            header_read_timeout: self.h3_header_read_timeout.into(),
            zero_window_timeout: self.h3_zero_window_timeout.into(),
            stream_receive_window: self.h3_stream_receive_window,
            connection_receive_window: self.h3_connection_receive_window,
            max_field_section_size: self.h3_max_field_section_size,
            qpack_max_table_capacity: self.h3_qpack_max_table_capacity,
            qpack_blocked_streams: self.h3_qpack_blocked_streams,
            peer_reset_budget: self.h3_peer_reset_budget,
            server_reset_budget: self.h3_server_reset_budget,
            empty_frame_flood_budget: self.h3_empty_frame_flood_budget,
        })
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use clap::Parser;

    use super::*;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        h3: H3Args,
    }

    #[test]
    fn no_flags_give_the_engine_defaults() {
        let cli = Cli::parse_from(["wedge"]);
        assert_eq!(cli.h3.to_config(), Some(H3Config::default()));
    }

    #[test]
    fn every_flag_reaches_the_config() {
        let cli = Cli::parse_from([
            "wedge",
            "--h3-max-concurrent-streams=7",
            "--h3-idle-timeout=5s",
            "--h3-header-read-timeout=2s",
            "--h3-zero-window-timeout=3s",
            "--h3-stream-receive-window=65536",
            "--h3-connection-receive-window=1048576",
            "--h3-max-field-section-size=1000",
            "--h3-qpack-max-table-capacity=4096",
            "--h3-qpack-blocked-streams=16",
            "--h3-peer-reset-budget=5",
            "--h3-server-reset-budget=6",
            "--h3-empty-frame-flood-budget=7",
        ]);
        assert_eq!(
            cli.h3.to_config(),
            Some(H3Config {
                max_concurrent_streams: 7,
                idle_timeout: Duration::from_secs(5),
                header_read_timeout: Duration::from_secs(2),
                zero_window_timeout: Duration::from_secs(3),
                stream_receive_window: 65536,
                connection_receive_window: 1048576,
                max_field_section_size: 1000,
                qpack_max_table_capacity: 4096,
                qpack_blocked_streams: 16,
                peer_reset_budget: 5,
                server_reset_budget: 6,
                empty_frame_flood_budget: 7,
            })
        );
    }

    #[test]
    fn sizes_that_could_overflow_are_refused() {
        for flag in [
            "--h3-max-field-section-size=4611686018427387904",
            "--h3-max-field-section-size=0",
            "--h3-qpack-max-table-capacity=4611686018427387904",
            "--h3-qpack-blocked-streams=4611686018427387904",
        ] {
            assert!(Cli::try_parse_from(["wedge", flag]).is_err(), "{flag}");
        }
    }

    #[test]
    fn no_h3_turns_it_off() {
        let cli = Cli::parse_from(["wedge", "--no-h3"]);
        assert_eq!(cli.h3.to_config(), None);
    }
}
