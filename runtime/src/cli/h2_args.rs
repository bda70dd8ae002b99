//! `--h2-*` flags: every field of [`H2Config`], defaults taken from it (and shown in
//! `--help`).

use super::engine_flags::engine_flags;
use super::value_parsers::parse_positive_duration;
use crate::net::h2::H2Config;

engine_flags! {
    /// HTTP/2 engine settings, limits and timeouts.
    #[command(next_help_heading = "HTTP/2")]
    pub struct H2Args for H2Config {
        /// Streams one connection may have open; more are refused (REFUSED_STREAM).
        h2_max_concurrent_streams: u32 => core.max_concurrent_streams;

        /// Per-stream receive window in octets: the most request body buffered for a
        /// handler that has not read it (at most 2147483647).
        h2_initial_window_size: u32 => core.initial_window_size,
            parser = clap::value_parser!(u32).range(0..=2_147_483_647);

        /// Connection receive window in octets; credited as request bodies are buffered
        /// (at most 2147483647).
        h2_connection_window_size: u32 => core.connection_window_size,
            parser = clap::value_parser!(u32).range(0..=2_147_483_647);

        /// Largest frame payload accepted, in octets (16384..=16777215).
        h2_max_frame_size: u32 => core.max_frame_size,
            parser = clap::value_parser!(u32).range(16_384..=16_777_215);

        /// Largest request header list in octets; larger requests are answered 431,
        /// larger request trailers reset the stream (ENHANCE_YOUR_CALM).
        h2_max_header_list_size: u32 => core.max_header_list_size;

        /// CONTINUATION frames one header block may use (CONTINUATION flood).
        h2_max_continuation_frames: u32 => core.max_continuation_frames;

        /// HPACK dynamic table size in octets a client may make wedge keep.
        h2_header_table_size: u32 => core.header_table_size;

        /// Streams a client may reset before their response ends, earned back by
        /// completed responses (rapid reset, CVE-2023-44487).
        h2_peer_reset_budget: u32 => core.peer_reset_budget;

        /// Stream resets a client's frames may cause, earned back by completed
        /// responses (MadeYouReset, CVE-2025-8671).
        h2_server_reset_budget: u32 => core.server_reset_budget;

        /// SETTINGS frames allowed without requests or body bytes between them.
        h2_settings_flood_budget: u32 => core.settings_flood_budget;

        /// PING frames allowed without requests or body bytes between them.
        h2_ping_flood_budget: u32 => core.ping_flood_budget;

        /// Empty DATA frames allowed without body bytes between them.
        h2_empty_data_flood_budget: u32 => core.empty_data_flood_budget;

        /// Frames wedge reads and ignores (PRIORITY, unknown types) allowed without
        /// requests or body bytes between them.
        h2_ignored_frame_flood_budget: u32 => core.ignored_frame_flood_budget;

        /// Frames a client may still send on a stream once its response ended before
        /// its request did: judged and discarded, then RST_STREAM(NO_ERROR); 0 resets
        /// at once.
        h2_finished_stream_frames: u32 => core.finished_stream_frames;

        /// Response octets one stream may stage per write: bounds what a zero-window
        /// client pins per stream.
        h2_stream_send_buffer: usize => stream_send_buffer;

        /// Time a client has for the connection preface and its first SETTINGS.
        h2_handshake_timeout: humantime::Duration => handshake_timeout,
            parser = parse_positive_duration::<humantime::Duration>;

        /// Time a client has to acknowledge wedge's SETTINGS; then GOAWAY
        /// SETTINGS_TIMEOUT.
        h2_settings_timeout: humantime::Duration => settings_timeout,
            parser = parse_positive_duration::<humantime::Duration>;

        /// Time a client has to finish a request header block it started (slowloris).
        h2_header_read_timeout: humantime::Duration => header_read_timeout,
            parser = parse_positive_duration::<humantime::Duration>;

        /// A connection with no open streams is closed after this long.
        h2_idle_timeout: humantime::Duration => idle_timeout,
            parser = parse_positive_duration::<humantime::Duration>;

        /// A connection whose responses all wait on a zero flow-control window is closed
        /// after this long.
        h2_zero_window_timeout: humantime::Duration => zero_window_timeout,
            parser = parse_positive_duration::<humantime::Duration>;

        /// A connection whose client takes none of the octets wedge has for it for this
        /// long is dropped (a client that stopped reading).
        h2_write_timeout: humantime::Duration => write_timeout,
            parser = parse_positive_duration::<humantime::Duration>;
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use clap::Parser;
    use wedge_proto::h2::ConnConfig;

    use super::*;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        h2: H2Args,
    }

    #[test]
    fn no_flags_give_the_engine_defaults() {
        let cli = Cli::parse_from(["wedge"]);
        assert_eq!(cli.h2.to_config(), H2Config::default());
    }

    #[test]
    fn every_flag_reaches_the_config() {
        let cli = Cli::parse_from([
            "wedge",
            "--h2-max-concurrent-streams=7",
            "--h2-initial-window-size=1000",
            "--h2-connection-window-size=2000",
            "--h2-max-frame-size=20000",
            "--h2-max-header-list-size=3000",
            "--h2-max-continuation-frames=4",
            "--h2-header-table-size=0",
            "--h2-peer-reset-budget=5",
            "--h2-server-reset-budget=6",
            "--h2-settings-flood-budget=8",
            "--h2-ping-flood-budget=9",
            "--h2-empty-data-flood-budget=10",
            "--h2-ignored-frame-flood-budget=12",
            "--h2-finished-stream-frames=11",
            "--h2-stream-send-buffer=4096",
            "--h2-handshake-timeout=1s",
            "--h2-settings-timeout=6s",
            "--h2-header-read-timeout=2s",
            "--h2-idle-timeout=3m",
            "--h2-zero-window-timeout=4s",
            "--h2-write-timeout=5s",
        ]);
        let config = cli.h2.to_config();
        assert_eq!(
            config,
            H2Config {
                core: ConnConfig {
                    max_concurrent_streams: 7,
                    initial_window_size: 1000,
                    connection_window_size: 2000,
                    max_frame_size: 20_000,
                    max_header_list_size: 3000,
                    max_continuation_frames: 4,
                    header_table_size: 0,
                    peer_reset_budget: 5,
                    server_reset_budget: 6,
                    settings_flood_budget: 8,
                    ping_flood_budget: 9,
                    empty_data_flood_budget: 10,
                    ignored_frame_flood_budget: 12,
                    finished_stream_frames: 11,
                },
                stream_send_buffer: 4096,
                handshake_timeout: Duration::from_secs(1),
                settings_timeout: Duration::from_secs(6),
                header_read_timeout: Duration::from_secs(2),
                idle_timeout: Duration::from_secs(180),
                zero_window_timeout: Duration::from_secs(4),
                write_timeout: Duration::from_secs(5),
            }
        );
    }

    #[test]
    fn a_frame_size_below_the_rfc_minimum_is_refused() {
        assert!(Cli::try_parse_from(["wedge", "--h2-max-frame-size=100"]).is_err());
        assert!(Cli::try_parse_from(["wedge", "--h2-max-frame-size=16777216"]).is_err());
    }

    #[test]
    fn windows_past_2_pow_31_minus_1_are_refused() {
        for flag in ["--h2-initial-window-size", "--h2-connection-window-size"] {
            assert!(Cli::try_parse_from(["wedge", &format!("{flag}=2147483648")]).is_err());
            assert!(Cli::try_parse_from(["wedge", &format!("{flag}=2147483647")]).is_ok());
        }
    }
}
