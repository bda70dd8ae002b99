//! Sans-IO protocol cores for the server side of HTTP/2 ([`h2`], RFC 9113) and HTTP/3
//! ([`h3`], RFC 9114): octets in, events and octets out. Nothing here does IO, spawns
//! tasks, reads a clock or knows about wasm; the driver owns the socket (or the QUIC
//! streams), the timers and the handler.
//!
//! The surface a driver needs is small: a `Connection` and its config, the `Event`s it
//! reports, the protocol's `ErrorCode`s, and the decoded request heads
//! ([`head::RequestHead`]) they carry. The frame codecs, HPACK, QPACK and the field coding
//! they share are public only with the `internals` feature, for the fuzz targets and the
//! tests that write frames by hand.
//!
//! # Driving an HTTP/2 connection
//!
//! What a client sent goes into [`h2::Connection::recv`], which reports requests and body
//! octets as [`h2::Event`]s and appends what we owe the client (SETTINGS ACKs, window
//! updates, PING answers) to an output buffer; the response goes out the same way. Here
//! is one GET, its octets written out by hand where a driver would read them from a
//! socket:
//!
//! ```
//! use wedge_proto::h2::{ConnConfig, Connection, Event, PREFACE};
//!
//! // Octets to write to the client, in order. A new connection owes it our SETTINGS.
//! let mut out = Vec::new();
//! let mut conn = Connection::new(ConnConfig::default(), &mut out);
//!
//! // What the client sent: the preface, an empty SETTINGS, and a HEADERS frame on
//! // stream 1 (END_STREAM | END_HEADERS) whose HPACK block is `:method GET`,
//! // `:scheme https`, `:path /` from the static table and `:authority example.com`.
//! let mut input = PREFACE.to_vec();
//! input.extend_from_slice(&[0, 0, 0, 0x4, 0, 0, 0, 0, 0]);
//! input.extend_from_slice(&[0, 0, 16, 0x1, 0x5, 0, 0, 0, 1]);
//! input.extend_from_slice(&[0x82, 0x87, 0x84, 0x41, 11]);
//! input.extend_from_slice(b"example.com");
//!
//! let mut events = Vec::new();
//! let used = conn.recv(&input, &mut out, &mut events).expect("a well-behaved client");
//! // Octets past `used` are part of a frame: keep them and offer them again with more.
//! assert_eq!(used, input.len());
//!
//! let Some(Event::Request { stream, head, end_stream }) = events.pop() else {
//!     panic!("expected a request");
//! };
//! assert_eq!((head.method(), head.path()), (&b"GET"[..], &b"/"[..]));
//! assert_eq!(head.authority(), Some(&b"example.com"[..]));
//! assert!(end_stream, "no body follows");
//! // The head goes back to the connection's pool once the handler is done with it.
//! conn.give_back(head);
//!
//! // The handler's answer: a head, then a body within the stream's flow credit.
//! let fields = [(&b"content-type"[..], &b"text/plain"[..])];
//! conn.send_head(stream, 200, fields, false, &mut out);
//! let body = b"hello";
//! assert!(conn.send_credit(stream) >= body.len());
//! conn.send_data(stream, body, true, &mut out);
//!
//! // Write `out` to the socket: our SETTINGS, the ACK of the client's, the response's
//! // HEADERS and its one DATA frame, which ends the stream.
//! let data_frame = [&[0, 0, 5, 0x0, 0x1, 0, 0, 0, 1][..], b"hello"].concat();
//! assert!(out.ends_with(&data_frame));
//! assert_eq!(conn.open_streams(), 0, "request and response both ended");
//! ```
//!
//! The HTTP/3 core works the same way per QUIC stream: see [`h3::Connection`] for the
//! driver's side of the bargain.

/// Declares modules that are public with the `internals` feature, for the fuzz targets
/// and the tests that build frames and field sections by hand, and crate-private
/// without it: a driver needs only the connections, their events and error codes, and
/// the request heads.
macro_rules! internals {
    ($(mod $name:ident;)*) => {$(
        #[cfg(feature = "internals")]
        pub mod $name;
        #[cfg(not(feature = "internals"))]
        pub(crate) mod $name;
    )*};
}

pub mod h2;
pub mod h3;
pub mod head;

mod budget;
internals! {
    mod field_coding;
}

#[cfg(test)]
mod test_util;
