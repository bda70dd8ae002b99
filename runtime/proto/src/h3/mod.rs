//! HTTP/3 (RFC 9114) building blocks, sans IO: QUIC varints, the frame codec, QPACK
//! (RFC 9204), the error codes they report, and the server connection core that a QUIC
//! driver feeds with stream octets.

pub mod conn;
pub mod error;
pub mod frame;
pub mod qpack;
pub mod varint;

pub use conn::{Config, Connection, ConnectionError, Event, RequestHead};
pub use error::{ErrorCode, H3Error};
