//! `--h3-*` flags and `--no-h3`: every field of [`H3Config`], defaults taken from it (and
//! shown in `--help`).

use super::engine_flags::engine_flags;
use super::value_parsers::parse_positive_duration;
use crate::net::h3::H3Config;

/// HTTP/3 on the TLS listener's port (UDP).
#[derive(clap::Args, Debug, Clone)]
#[command(next_help_heading = "HTTP/3")]
pub struct H3Args {
    /// Serve no HTTP/3 (and advertise none with Alt-Svc).
    #[arg(long)]
    pub no_h3: bool,

    #[command(flatten)]
    pub engine: H3Flags,
}

impl H3Args {
    /// The engine configuration these flags describe, or `None` with `--no-h3`.
    pub fn to_config(&self) -> Option<H3Config> {
        (!self.no_h3).then(|| self.engine.to_config())
    }
}

engine_flags! {
    /// The HTTP/3 engine's limits and timeouts.
    #[command(next_help_heading = "HTTP/3")]
    pub struct H3Flags for H3Config {
        /// Request streams one connection may have open at once (QUIC
        /// max_concurrent_bidi_streams): a client cannot open more.
        h3_max_concurrent_streams: u32 => max_concurrent_streams;

        /// A connection that carries nothing for this long is closed (QUIC idle timeout).
        h3_idle_timeout: humantime::Duration => idle_timeout,
            parser = parse_positive_duration::<humantime::Duration>;

        /// A request head not whole this long after its stream opened is reset
        /// (H3_REQUEST_INCOMPLETE): slowloris.
        h3_header_read_timeout: humantime::Duration => header_read_timeout,
            parser = parse_positive_duration::<humantime::Duration>;

        /// A response blocked on the client's flow control with no progress for this
        /// long is reset (H3_REQUEST_CANCELLED) and its handler dropped.
        h3_zero_window_timeout: humantime::Duration => zero_window_timeout,
            parser = parse_positive_duration::<humantime::Duration>;

        /// Request body octets buffered per stream for a guest that has not read them
        /// (QUIC stream receive window).
        h3_stream_receive_window: u32 => stream_receive_window;

        /// Request body octets buffered per connection across its streams (QUIC
        /// connection receive window).
        h3_connection_receive_window: u32 => connection_receive_window;

        /// Largest request head or trailers in octets (SETTINGS_MAX_FIELD_SECTION_SIZE);
        /// larger requests are answered 431, larger trailers reset the stream
        /// (H3_EXCESSIVE_LOAD).
        h3_max_field_section_size: u64 => core.max_field_section_size,
            parser = clap::value_parser!(u64).range(1..=MAX_SECTION_OR_TABLE);

        /// QPACK dynamic table in octets a client may make wedge keep per connection
        /// (SETTINGS_QPACK_MAX_TABLE_CAPACITY); 0 turns the dynamic table off.
        h3_qpack_max_table_capacity: u64 => core.qpack_max_table_capacity,
            parser = clap::value_parser!(u64).range(0..=MAX_SECTION_OR_TABLE);

        /// Request streams that may wait at once for QPACK entries still on their way
        /// (SETTINGS_QPACK_BLOCKED_STREAMS).
        h3_qpack_blocked_streams: u64 => core.qpack_blocked_streams,
            parser = clap::value_parser!(u64).range(0..=MAX_BLOCKED_STREAMS);

        /// Requests with a handler started that a client may cancel before their
        /// response ended, earned back per completed response; past it the connection
        /// closes with H3_EXCESSIVE_LOAD (rapid reset, CVE-2023-44487).
        h3_peer_reset_budget: u32 => core.peer_reset_budget;

        /// Requests already handed out that a client's frames may make wedge reset,
        /// earned back per completed response; past it, H3_EXCESSIVE_LOAD (MadeYouReset,
        /// CVE-2025-8671).
        h3_server_reset_budget: u32 => core.server_reset_budget;

        /// Empty DATA and reserved-type frames a client may send, earned back by
        /// requests and body octets; past it, H3_EXCESSIVE_LOAD.
        h3_empty_frame_flood_budget: u32 => core.empty_frame_flood_budget;
    }
}

/// Far above any real need, and far below where the wire's 62-bit integers or the
/// core's size arithmetic could overflow.
const MAX_SECTION_OR_TABLE: u64 = 16 * 1024 * 1024;
/// Blocked streams cannot usefully exceed the streams a connection may open.
const MAX_BLOCKED_STREAMS: u64 = 65_536;

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use clap::Parser;
    use wedge_proto::h3;

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
                core: h3::Config {
                    max_field_section_size: 1000,
                    qpack_max_table_capacity: 4096,
                    qpack_blocked_streams: 16,
                    peer_reset_budget: 5,
                    server_reset_budget: 6,
                    empty_frame_flood_budget: 7,
                },
                max_concurrent_streams: 7,
                idle_timeout: Duration::from_secs(5),
                header_read_timeout: Duration::from_secs(2),
                zero_window_timeout: Duration::from_secs(3),
                stream_receive_window: 65536,
                connection_receive_window: 1048576,
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
