use std::fmt;

/// The broad class of an [`Error`]; it picks the status code the error
/// answers with (see [`Error::status`]).
///
/// ```
/// use wedge_sdk::{Error, ErrorKind};
///
/// let e = Error::new(ErrorKind::BodyTooLarge, "too big");
/// assert_eq!(e.status(), 413);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ErrorKind {
    /// A request body was longer than the limit given to
    /// [`Body::read_to_end`](crate::Body::read_to_end). Answers `413`.
    BodyTooLarge,
    /// The other end of a body stream is gone: the client disconnected, or
    /// the host closed the stream.
    Closed,
    /// The host reported an I/O failure on a body stream.
    Io,
    /// The request cannot be served as sent: the host handed over a method,
    /// URI or header the SDK cannot represent, or its body is not what the
    /// handler expects (e.g. invalid JSON). Answers `400`.
    BadRequest,
    /// A response could not be built (invalid status, header name or value,
    /// or a header the host forbids).
    BadResponse,
    /// An error made with [`Error::http`]: it answers with the status it was
    /// given.
    Http,
    /// [`fetch`](crate::fetch) got no response: the connection was refused
    /// or timed out, too many requests were in flight, the origin broke the
    /// protocol. Answers `502`.
    Fetch,
    /// [`fetch`](crate::fetch) was refused by the host: the destination is
    /// not on the app's outbound allow-list. Answers `502`.
    FetchDenied,
    /// The host could not read the app's config values
    /// ([`config::get`](crate::config::get)). Answers `500`.
    Config,
    /// The key-value store refused or failed an operation ([`kv`](crate::kv)):
    /// a bucket the app may not open, a quota, a backend fault. Answers `500`.
    KeyValue,
    /// Anything else; see [`Error::msg`]. Answers `500`.
    Other,
}

/// The SDK's error type: a kind, a human-readable message and the HTTP
/// status it answers with.
///
/// A handler returning `Result<Response, Error>` turns an `Err` into a
/// response with [`Error::status`] and the message as `text/plain` body, so
/// `?` on the SDK's own calls answers the client properly: a body over the
/// limit gets `413`, invalid JSON `400`. Make your own with [`Error::msg`]
/// (a `500`) or [`Error::http`] (any status); `std::io::Error`, `String` and
/// `&str` convert into it with `?`.
///
/// ```no_run
/// use wedge_sdk::{Error, Request, Response};
///
/// async fn handle(req: Request) -> Result<Response, Error> {
///     let name = req
///         .query_param("name")
///         .ok_or_else(|| Error::http(400, "missing ?name="))?
///         .into_owned();
///     let body = req.into_body().read_to_end(64 * 1024).await?; // 413 past 64 KiB
///     Ok(Response::text(format!("{name}: {} bytes\n", body.len())))
/// }
/// # wedge_sdk::export_handler!(handle);
/// ```
#[derive(Clone, PartialEq, Eq)]
pub struct Error {
    kind: ErrorKind,
    status: u16,
    message: String,
}

impl Error {
    /// An error of kind [`ErrorKind::Other`] carrying `message`; it answers
    /// `500`.
    ///
    /// ```
    /// let e = wedge_sdk::Error::msg(format_args!("database {} is down", "users"));
    /// assert_eq!((e.status(), e.to_string().as_str()), (500, "database users is down"));
    /// ```
    pub fn msg(message: impl fmt::Display) -> Self {
        Self::new(ErrorKind::Other, message)
    }

    /// An error of the given kind carrying `message`; its status follows
    /// from the kind.
    ///
    /// ```
    /// use wedge_sdk::{Error, ErrorKind};
    ///
    /// assert_eq!(Error::new(ErrorKind::BadRequest, "no").status(), 400);
    /// ```
    pub fn new(kind: ErrorKind, message: impl fmt::Display) -> Self {
        let status = match kind {
            ErrorKind::BodyTooLarge => 413,
            ErrorKind::BadRequest => 400,
            ErrorKind::Fetch | ErrorKind::FetchDenied => 502,
            ErrorKind::Closed
            | ErrorKind::Io
            | ErrorKind::BadResponse
            | ErrorKind::Http
            | ErrorKind::Config
            | ErrorKind::KeyValue
            | ErrorKind::Other => 500,
        };
        Self {
            kind,
            status,
            message: message.to_string(),
        }
    }

    /// An error (kind [`ErrorKind::Http`]) that answers with `status` and
    /// `message`, e.g. `404` for a missing record. A status outside
    /// `100..=999` becomes a `500` when sent, like any builder mistake.
    ///
    /// ```
    /// let e = wedge_sdk::Error::http(404, "no item 7");
    /// assert_eq!(e.status(), 404);
    /// ```
    pub fn http(status: u16, message: impl fmt::Display) -> Self {
        Self {
            status,
            ..Self::new(ErrorKind::Http, message)
        }
    }

    /// What class of failure this is.
    ///
    /// ```
    /// use wedge_sdk::{Error, ErrorKind};
    ///
    /// assert_eq!(Error::msg("x").kind(), ErrorKind::Other);
    /// ```
    pub fn kind(&self) -> ErrorKind {
        self.kind
    }

    /// The HTTP status this error answers with: `413` for
    /// [`ErrorKind::BodyTooLarge`], `400` for [`ErrorKind::BadRequest`], the
    /// given one for [`Error::http`], `500` otherwise.
    ///
    /// ```
    /// assert_eq!(wedge_sdk::Error::http(409, "taken").status(), 409);
    /// ```
    pub fn status(&self) -> u16 {
        self.status
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

impl From<String> for Error {
    /// An [`Error::msg`] (`500`).
    fn from(message: String) -> Self {
        Self::msg(message)
    }
}

impl From<&str> for Error {
    /// An [`Error::msg`] (`500`).
    fn from(message: &str) -> Self {
        Self::msg(message)
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

    #[test]
    fn kinds_pick_statuses() {
        let status = |kind| Error::new(kind, "x").status();
        assert_eq!(status(ErrorKind::BodyTooLarge), 413);
        assert_eq!(status(ErrorKind::BadRequest), 400);
        assert_eq!(status(ErrorKind::Io), 500);
        assert_eq!(status(ErrorKind::Config), 500);
        assert_eq!(status(ErrorKind::KeyValue), 500);
        assert_eq!(status(ErrorKind::Other), 500);
        let e = Error::http(404, "gone");
        assert_eq!((e.kind(), e.status()), (ErrorKind::Http, 404));
        assert_eq!(Error::from("s").status(), 500);
    }
}
