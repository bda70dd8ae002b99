use std::fmt;

/// The broad class of an [`Error`], so a handler can pick a status code
/// (e.g. answer 413 for [`ErrorKind::BodyTooLarge`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ErrorKind {
    /// A request body was longer than the limit given to
    /// [`Body::read_to_end`](crate::Body::read_to_end).
    BodyTooLarge,
    /// The other end of a body stream is gone: the client disconnected, or
    /// the host closed the stream.
    Closed,
    /// The host reported an I/O failure on a body stream.
    Io,
    /// The request the host handed over could not be represented (bad
    /// method, URI or header).
    BadRequest,
    /// A response could not be built (invalid status, header name or value,
    /// or a header the host forbids).
    BadResponse,
    /// Anything else; see [`Error::msg`].
    Other,
}

/// The SDK's error type: a kind and a human-readable message.
///
/// Create your own with [`Error::msg`]; `std::io::Error` converts into it
/// with `?`.
#[derive(Clone, PartialEq, Eq)]
pub struct Error {
    kind: ErrorKind,
    message: String,
}

impl Error {
    /// An error of kind [`ErrorKind::Other`] carrying `message`.
    pub fn msg(message: impl fmt::Display) -> Self {
        Self::new(ErrorKind::Other, message)
    }

    /// An error of the given kind carrying `message`.
    pub fn new(kind: ErrorKind, message: impl fmt::Display) -> Self {
        Self {
            kind,
            message: message.to_string(),
        }
    }

    /// What class of failure this is.
    pub fn kind(&self) -> ErrorKind {
        self.kind
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl fmt::Debug for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Error({:?}: {})", self.kind, self.message)
    }
}

impl std::error::Error for Error {}

impl From<std::io::Error> for Error {
    /// `ConnectionReset`, `BrokenPipe` and `UnexpectedEof` (how a closed WASI
    /// stream surfaces) become [`ErrorKind::Closed`]; anything else
    /// [`ErrorKind::Io`].
    fn from(e: std::io::Error) -> Self {
        use std::io::ErrorKind as K;
        match e.kind() {
            K::ConnectionReset | K::BrokenPipe | K::UnexpectedEof => {
                Self::new(ErrorKind::Closed, "body stream closed")
            }
            _ => Self::new(ErrorKind::Io, e),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn io_errors_map_to_kinds() {
        let closed: Error = std::io::Error::from(std::io::ErrorKind::ConnectionReset).into();
        assert_eq!(closed.kind(), ErrorKind::Closed);
        let other: Error = std::io::Error::other("boom").into();
        assert_eq!(other.kind(), ErrorKind::Io);
        assert_eq!(other.to_string(), "boom");
    }

    #[test]
    fn msg_is_other_and_displays_verbatim() {
        let e = Error::msg(format_args!("bad {}", 42));
        assert_eq!(e.kind(), ErrorKind::Other);
        assert_eq!(e.to_string(), "bad 42");
    }
}
