//! HTTP/2 (RFC 9113) building blocks: the frame codec, HPACK (RFC 7541) and the
//! error codes they report. The connection state machine builds on these.

pub mod conn;
pub mod error;
pub mod frame;
pub mod hpack;

pub use error::{ErrorCode, H2Error};
pub use frame::{Frame, FrameHead, FrameType, StreamId};

/// The client connection preface (RFC 9113 §3.4); a SETTINGS frame follows it.
pub const PREFACE: &[u8; 24] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
