//! `--handshake-timeout`, `--h1-header-read-timeout`, `--h1-max-head-size`,
//! `--h1-chunk-budget`, `--h1-write-timeout` and `--tcp-notsent-lowat`: what a
//! TCP connection may take before HTTP/2's own limits (`--h2-*`) take over, and what
//! an HTTP/1.1 one may cost. Defaults from [`ConnLimits`] (and shown in `--help`).

use super::value_parsers::parse_positive_duration;
use crate::net::listener::ConnLimits;

fn defaults() -> ConnLimits {
    ConnLimits::default()
}

/// Connections: the TLS handshake, the cleartext port's first bytes, HTTP/1.1 heads.
#[derive(clap::Args, Debug, Clone)]
#[command(next_help_heading = "Connections and HTTP/1.1")]
pub struct ConnArgs {
    /// Time a new connection has to finish its TLS handshake, or on the cleartext
    /// port to send enough to tell HTTP/1.1 from h2c (slowloris before any request).
    #[arg(long, default_value_t = defaults().handshake.into(),
          value_parser = parse_positive_duration::<humantime::Duration>)]
    pub handshake_timeout: humantime::Duration,

    /// Time an HTTP/1.1 client has to send a whole request head, counted from when
    /// wedge waits for it (on a kept-alive connection: from the previous response);
    /// past it the connection is closed (slowloris, idle keep-alive).
    #[arg(long, default_value_t = defaults().h1_header_read.into(),
          value_parser = parse_positive_duration::<humantime::Duration>)]
    pub h1_header_read_timeout: humantime::Duration,

    /// The largest HTTP/1.1 request head (request line and header fields), in
    /// octets: one not complete when this many have arrived is answered 431 and
    /// its connection closed (a head may pass by up to one read past it).
    #[arg(long, value_name = "OCTETS", default_value_t = defaults().h1_max_head_size,
          value_parser = clap::value_parser!(u32).range(crate::net::h1::MIN_MAX_HEAD_SIZE as i64..))]
    pub h1_max_head_size: u32,

    /// HTTP/1.1 request body chunks a connection may send beyond one per 64 octets
    /// of body data: decoding them is the client's cost, not its app's. Past it the
    /// connection is closed (a body sent a byte per chunk).
    #[arg(long, value_name = "N", default_value_t = defaults().h1_chunk_budget,
          value_parser = clap::value_parser!(u32).range(1..))]
    pub h1_chunk_budget: u32,

    /// Time an HTTP/1.1 client that stopped reading may take none of what waits to
    /// be written to it (a response, or what a pipeline of them left); past it the
    /// connection is reset. Any progress, however slow, starts it again.
    #[arg(long, default_value_t = defaults().h1_write_timeout.into(),
          value_parser = parse_positive_duration::<humantime::Duration>)]
    pub h1_write_timeout: humantime::Duration,

    /// Octets the kernel may queue unsent on a TCP connection before wedge's writes
    /// wait (TCP_NOTSENT_LOWAT; what is in flight is not counted, so throughput does
    /// not depend on it). Bounds the kernel memory a client that stopped reading
    /// holds, and lets wedge see a slow reader's progress. 0: the kernel's own bound.
    #[arg(long, value_name = "OCTETS", default_value_t = defaults().tcp_notsent_lowat)]
    pub tcp_notsent_lowat: u32,

    /// TCP connections open at once, all listeners and workers together; past it
    /// a new one is closed on arrival. Keep it below the file limit (`ulimit -n`).
    #[arg(long, value_name = "N", default_value_t = defaults().max_connections,
          value_parser = clap::value_parser!(u32).range(1..))]
    pub max_connections: u32,

    /// TCP connections open at once from one client (an IPv4 address, or an IPv6
    /// /64); past it the client's new ones are closed on arrival.
    #[arg(long, value_name = "N", default_value_t = defaults().max_connections_per_client,
          value_parser = clap::value_parser!(u32).range(1..))]
    pub max_connections_per_client: u32,
}

impl ConnArgs {
    /// The limits these flags describe.
    pub fn to_limits(&self) -> ConnLimits {
        ConnLimits {
            handshake: self.handshake_timeout.into(),
            h1_header_read: self.h1_header_read_timeout.into(),
            h1_max_head_size: self.h1_max_head_size,
            h1_chunk_budget: self.h1_chunk_budget,
            h1_write_timeout: self.h1_write_timeout.into(),
            tcp_notsent_lowat: self.tcp_notsent_lowat,
            max_connections: self.max_connections,
            max_connections_per_client: self.max_connections_per_client,
        }
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
        conn: ConnArgs,
    }

    #[test]
    fn no_flags_give_the_defaults() {
        let cli = Cli::parse_from(["wedge"]);
        assert_eq!(cli.conn.to_limits(), ConnLimits::default());
    }

    #[test]
    fn every_flag_reaches_the_timeouts() {
        let cli = Cli::parse_from([
            "wedge",
            "--handshake-timeout=300ms",
            "--h1-header-read-timeout=2s",
            "--h1-max-head-size=9000",
            "--h1-chunk-budget=7",
            "--h1-write-timeout=4s",
            "--tcp-notsent-lowat=4096",
            "--max-connections=50",
            "--max-connections-per-client=5",
        ]);
        assert_eq!(
            cli.conn.to_limits(),
            ConnLimits {
                handshake: Duration::from_millis(300),
                h1_header_read: Duration::from_secs(2),
                h1_max_head_size: 9000,
                h1_chunk_budget: 7,
                h1_write_timeout: Duration::from_secs(4),
                tcp_notsent_lowat: 4096,
                max_connections: 50,
                max_connections_per_client: 5,
            }
        );
    }
}
