//! A response head's fields as HTTP/2 and HTTP/3 send them, and whether content
//! may follow it.

use http::{HeaderMap, StatusCode};

/// Whether a response may carry content: not one to a HEAD request (RFC 9110 §9.3.2),
/// nor a 204 or 304 (§15.3.5, §15.4.5); whatever body the handler gives is dropped,
/// as hyper does for HTTP/1.1. HTTP/2 and HTTP/3 clients treat content there as a
/// malformed response (RFC 9113 §8.1.1, RFC 9114 §4.1.2).
pub(crate) fn has_content(head_request: bool, status: StatusCode) -> bool {
    !head_request && !matches!(status.as_u16(), 204 | 304)
}

/// Fields that mean something only to one HTTP/1.1 connection (RFC 9113 §8.2.2,
/// RFC 9114 §4.2); a handler's response may carry them, HTTP/2 and HTTP/3 must not.
fn is_connection_specific(name: &http::HeaderName) -> bool {
    use http::header::{CONNECTION, TRANSFER_ENCODING, UPGRADE};
    name == CONNECTION
        || name == TRANSFER_ENCODING
        || name == UPGRADE
        || name.as_str() == "keep-alive"
        || name.as_str() == "proxy-connection"
}

/// The fields to send, names lowercase as `http` keeps them.
pub(crate) fn fields(headers: &HeaderMap) -> impl Iterator<Item = (&[u8], &[u8])> {
    headers
        .iter()
        .filter(|(name, _)| !is_connection_specific(name))
        .map(|(name, value)| (name.as_str().as_bytes(), value.as_bytes()))
}
