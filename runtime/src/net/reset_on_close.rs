//! Closing a connection with a reset instead of a FIN, for a peer that stopped
//! reading: a FIN waits behind everything still queued for it, and the kernel keeps
//! that queue (megabytes) for as long as the peer answers its probes with a zero
//! window, long after wedge let go of the socket (seen: 1.6 MB in FIN-WAIT-1 after
//! 90 s). A reset frees it at once; what was queued was cut off anyway.

use tokio::net::TcpStream;

use super::rewind::Rewind;

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
