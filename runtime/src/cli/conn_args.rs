//! `--handshake-timeout` and `--h1-header-read-timeout`: how long a TCP connection may
//! take before HTTP/2's own timeouts (`--h2-*`) take over. Defaults from
//! [`ConnTimeouts`] (and shown in `--help`).

use crate::net::listener::ConnTimeouts;

fn defaults() -> ConnTimeouts {
    ConnTimeouts::default()
}

/// Connections: the TLS handshake, the cleartext port's first bytes, HTTP/1.1 heads.
#[derive(clap::Args, Debug, Clone)]
#[command(next_help_heading = "Connections and HTTP/1.1")]
pub struct ConnArgs {
    /// Time a new connection has to finish its TLS handshake, or on the cleartext
    /// port to send enough to tell HTTP/1.1 from h2c (slowloris before any request).
    #[arg(long, default_value_t = defaults().handshake.into())]
    pub handshake_timeout: humantime::Duration,

    /// Time an HTTP/1.1 client has to send a whole request head, counted from when
    /// wedge waits for it (on a kept-alive connection: from the previous response);
    /// past it the connection is closed (slowloris, idle keep-alive).
    #[arg(long, default_value_t = defaults().h1_header_read.into())]
    pub h1_header_read_timeout: humantime::Duration,
}

impl ConnArgs {
    /// The timeouts these flags describe.
    pub fn to_timeouts(&self) -> ConnTimeouts {
        ConnTimeouts {
            handshake: self.handshake_timeout.into(),
            h1_header_read: self.h1_header_read_timeout.into(),
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
        assert_eq!(cli.conn.to_timeouts(), ConnTimeouts::default());
    }

    #[test]
    fn every_flag_reaches_the_timeouts() {
        let cli = Cli::parse_from([
            "wedge",
            "--handshake-timeout=300ms",
            "--h1-header-read-timeout=2s",
        ]);
        assert_eq!(
            cli.conn.to_timeouts(),
            ConnTimeouts {
                handshake: Duration::from_millis(300),
                h1_header_read: Duration::from_secs(2),
            }
        );
    }
}
