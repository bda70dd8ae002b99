//! What an IO error on a connection says about its peer, for the close reason the
//! listener and the engines count.

use crate::metrics::CloseReason;

/// The peer fault an IO error on a connection shows, if it shows one: a reset (or a
/// write to a peer gone), or TLS that failed (bad records, an alert). A TLS peer that
/// closes without `close_notify` is not one: many clients end connections so.
pub(crate) fn io_fault(err: &std::io::Error) -> Option<CloseReason> {
    use std::io::ErrorKind;
    match err.kind() {
        ErrorKind::ConnectionReset | ErrorKind::ConnectionAborted | ErrorKind::BrokenPipe => {
            Some(CloseReason::Reset)
        }
        ErrorKind::InvalidData => Some(CloseReason::TlsError),
        _ => None,
    }
}
