//! What wedge sets on the TCP connections it accepts, for the clients that stop
//! reading as much as for those that read:
//! - no Nagle delay: a response's last small write goes out at once;
//! - a bound on what the kernel queues unsent (`TCP_NOTSENT_LOWAT`): without it a
//!   socket takes megabytes (its send buffer grows to 4 MB) before a write waits, so
//!   a client that stopped reading held that much kernel memory, and one reading
//!   slowly showed wedge no progress for as long as the kernel took to drain it (a
//!   50 KB/s reader looked silent for over 6 s). What is in flight stays the
//!   congestion window's business: throughput does not depend on this bound;
//! - a reset instead of a FIN as the close of a connection given up on a client
//!   that stopped reading: a FIN waits behind everything queued for the client, and
//!   the kernel keeps that queue for as long as the client answers its probes with a
//!   zero window, long after wedge let go of the socket (seen: 1.6 MB in FIN-WAIT-1
//!   after 90 s). A reset frees it at once; what was queued was cut off anyway.

#[cfg(any(target_os = "linux", target_os = "android"))]
use socket2::SockRef;
use tokio::net::TcpStream;

use super::rewind::Rewind;

/// What the kernel may queue unsent on an accepted connection, by default.
pub const DEFAULT_NOTSENT_LOWAT: u32 = 16 << 10;

/// Sets up an accepted connection: no Nagle delay, and at most `notsent_lowat`
/// octets queued unsent before a write waits (`0`: the kernel's own bound, none by
/// default). A socket that refuses either still serves.
pub fn tune_accepted(stream: &TcpStream, notsent_lowat: u32) {
    let _ = stream.set_nodelay(true);
    bound_unsent(stream, notsent_lowat);
}

#[cfg(any(target_os = "linux", target_os = "android"))]
fn bound_unsent(stream: &TcpStream, notsent_lowat: u32) {
    if notsent_lowat > 0
        && let Err(err) = SockRef::from(stream).set_tcp_notsent_lowat(notsent_lowat)
    {
        tracing::debug!("TCP_NOTSENT_LOWAT not set: {err}");
    }
}

/// Elsewhere the kernel's own bound stays (socket2 sets the option on Linux only).
#[cfg(not(any(target_os = "linux", target_os = "android")))]
fn bound_unsent(_: &TcpStream, _: u32) {}

/// A connection that can be made to close with a reset when it is dropped.
pub trait ResetOnClose {
    /// From now on, dropping the connection resets it.
    fn reset_on_close(&self);
}

impl ResetOnClose for TcpStream {
    fn reset_on_close(&self) {
        if let Err(err) = self.set_zero_linger() {
            tracing::debug!("connection not set to close with a reset: {err}");
        }
    }
}

impl<IO: ResetOnClose> ResetOnClose for Rewind<IO> {
    fn reset_on_close(&self) {
        self.get_ref().reset_on_close();
    }
}

impl<IO: ResetOnClose> ResetOnClose for tokio_rustls::server::TlsStream<IO> {
    fn reset_on_close(&self) {
        self.get_ref().0.reset_on_close();
    }
}

#[cfg(all(test, any(target_os = "linux", target_os = "android")))]
mod tests {
    use super::*;

    #[tokio::test]
    async fn an_accepted_connection_queues_at_most_the_bound_unsent() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let _client = TcpStream::connect(listener.local_addr().unwrap())
            .await
            .unwrap();
        let (accepted, _) = listener.accept().await.unwrap();
        let kernel_default = SockRef::from(&accepted).tcp_notsent_lowat().unwrap();
        tune_accepted(&accepted, 0);
        assert_eq!(
            SockRef::from(&accepted).tcp_notsent_lowat().unwrap(),
            kernel_default,
            "0 leaves the kernel's own"
        );
        tune_accepted(&accepted, 12345);
        let socket = SockRef::from(&accepted);
        assert_eq!(socket.tcp_notsent_lowat().unwrap(), 12345);
        assert!(socket.tcp_nodelay().unwrap());
    }
}
