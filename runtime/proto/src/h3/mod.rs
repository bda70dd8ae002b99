//! HTTP/3 (RFC 9114), server side: a [`Connection`] that a QUIC driver feeds with each
//! stream's octets and that reports [`Event`]s; failures carry an [`ErrorCode`].
//!
//! It builds on QUIC variable-length integers (`varint`, RFC 9000 §16), the frame codec
//! (`frame`, RFC 9114 §7) and QPACK (`qpack`, RFC 9204), public only with the
//! `internals` feature.

mod conn;
mod error;
internals! {
    mod frame;
    mod qpack;
    mod varint;
}

pub use conn::{Config, Connection, ConnectionError, Event};
pub use error::ErrorCode;
#[cfg(feature = "internals")]
pub use error::H3Error;
