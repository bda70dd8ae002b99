//! HTTP/2 (RFC 9113), server side: a [`Connection`] takes the peer's octets and reports
//! [`Event`]s, stream by stream ([`StreamId`]); failures carry an [`ErrorCode`].
//!
//! It builds on the frame codec (`frame`, RFC 9113 §4, §6) and HPACK (`hpack`,
//! RFC 7541), public only with the `internals` feature.

mod conn;
mod error;
mod stream_id;
internals! {
    mod frame;
    mod hpack;
}

pub use conn::{ConnConfig, Connection, ConnectionError, Event};
pub use error::ErrorCode;
#[cfg(feature = "internals")]
pub use error::H2Error;
pub use stream_id::StreamId;

/// The client connection preface (RFC 9113 §3.4); a SETTINGS frame follows it.
pub const PREFACE: &[u8; 24] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
