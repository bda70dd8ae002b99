use crate::error::{Error, ErrorKind};
use bytes::Bytes;
use http::header::{CONTENT_LENGTH, CONTENT_TYPE};
use http::{HeaderMap, HeaderName, HeaderValue, StatusCode};
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use wstd::io::AsyncOutputStream;

/// `content-type` of [`Response::text`] and of error responses.
const TEXT_PLAIN: &str = "text/plain; charset=utf-8";

type StreamFn = Box<dyn FnOnce(BodyWriter) -> Pin<Box<dyn Future<Output = Result<(), Error>>>>>;

/// An HTTP response: status, headers, and a body that is either a fixed
/// buffer or written by an async closure ([`Response::stream`]).
///
/// Builder mistakes (a status outside 100..=999, an invalid header name or
/// value) do not panic: the response is replaced by a `500` whose body names
/// the mistake when it is sent.
pub struct Response {
    status: u16,
    headers: HeaderMap,
    body: ResponseBody,
    error: Option<Error>,
}

pub(crate) enum ResponseBody {
    Full(Bytes),
    Stream(StreamFn),
}

impl Response {
    /// A response with `status` and an empty body (`content-length: 0` is
    /// added when sent, except for 1xx, 204 and 304).
    pub fn new(status: u16) -> Self {
        let error = StatusCode::from_u16(status).err().map(|_| {
            Error::new(
                ErrorKind::BadResponse,
                format_args!("invalid response status {status}"),
            )
        });
        Self {
            status,
            headers: HeaderMap::new(),
            body: ResponseBody::Full(Bytes::new()),
            error,
        }
    }

    /// A `200` response with `body` as text
    /// (`content-type: text/plain; charset=utf-8`).
    pub fn text(body: impl Into<String>) -> Self {
        Self::new(200)
            .with_header(CONTENT_TYPE.as_str(), TEXT_PLAIN)
            .with_body(body.into())
    }

    /// A response whose body is written as it is produced: `write` is called
    /// with a [`BodyWriter`] once the status and headers have been handed to
    /// the host, and no `content-length` is added.
    ///
    /// The body is finished when the closure's future returns `Ok(())`. If it
    /// returns `Err`, the body is *not* finished: the host sees an aborted
    /// body (the client gets a truncated response or a stream reset) and the
    /// error is printed to stderr.
    ///
    /// ```no_run
    /// # use wedge_sdk::Response;
    /// let response = Response::stream(200, |mut w| async move {
    ///     for i in 0..3 {
    ///         w.write(format!("line {i}\n").as_bytes()).await?;
    ///         w.flush().await?;
    ///     }
    ///     Ok(())
    /// });
    /// ```
    pub fn stream<F, Fut>(status: u16, write: F) -> Self
    where
        F: FnOnce(BodyWriter) -> Fut + 'static,
        Fut: Future<Output = Result<(), Error>> + 'static,
    {
        let mut response = Self::new(status);
        response.body = ResponseBody::Stream(Box::new(move |w| Box::pin(write(w))));
        response
    }

    /// Set header `name` to `value`, replacing any value it had.
    pub fn with_header(mut self, name: impl AsRef<str>, value: impl AsRef<[u8]>) -> Self {
        let name = name.as_ref();
        match (
            HeaderName::from_bytes(name.as_bytes()),
            HeaderValue::from_bytes(value.as_ref()),
        ) {
            (Ok(name), Ok(value)) => {
                self.headers.insert(name, value);
            }
            (Err(_), _) => {
                self.error.get_or_insert_with(|| {
                    Error::new(
                        ErrorKind::BadResponse,
                        format_args!("invalid header name {name:?}"),
                    )
                });
            }
            (Ok(_), Err(_)) => {
                self.error.get_or_insert_with(|| {
                    Error::new(
                        ErrorKind::BadResponse,
                        format_args!("invalid value for header {name:?}"),
                    )
                });
            }
        }
        self
    }

    /// Use `body` as the whole body (replacing any body or stream set
    /// before). A `content-length` is added when sent unless you set one.
    pub fn with_body(mut self, body: impl Into<Bytes>) -> Self {
        self.body = ResponseBody::Full(body.into());
        self
    }

    /// The status code.
    pub fn status(&self) -> u16 {
        self.status
    }

    /// The headers set so far.
    pub fn headers(&self) -> &HeaderMap {
        &self.headers
    }

    /// A `500` with `error`'s text as body; also printed to stderr.
    pub(crate) fn internal_error(error: impl fmt::Display) -> Self {
        let text = error.to_string();
        eprintln!("wedge-sdk: handler error: {text}");
        Self::text(text).with_status(500)
    }

    pub(crate) fn with_status(mut self, status: u16) -> Self {
        self.status = status;
        self
    }

    /// What to hand to the host: status, header list, body. Resolves a
    /// builder error into a 500 and adds `content-length` to fixed bodies.
    pub(crate) fn into_parts(self) -> (u16, Vec<(String, Vec<u8>)>, ResponseBody) {
        let response = match self.error {
            Some(error) => Self::internal_error(error),
            None => self,
        };
        let mut headers = response.headers;
        if let ResponseBody::Full(bytes) = &response.body {
            let bodyless = matches!(response.status, 100..=199 | 204 | 304);
            if !bodyless && !headers.contains_key(CONTENT_LENGTH) {
                headers.insert(CONTENT_LENGTH, HeaderValue::from(bytes.len()));
            }
        }
        let fields = headers
            .iter()
            .map(|(name, value)| (name.as_str().to_owned(), value.as_bytes().to_vec()))
            .collect();
        (response.status, fields, response.body)
    }
}

impl fmt::Debug for Response {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let body = match &self.body {
            ResponseBody::Full(b) => format!("{} bytes", b.len()),
            ResponseBody::Stream(_) => "stream".to_owned(),
        };
        f.debug_struct("Response")
            .field("status", &self.status)
            .field("headers", &self.headers)
            .field("body", &body)
            .field("error", &self.error)
            .finish()
    }
}

/// Writes a streaming response body; handed to the closure of
/// [`Response::stream`].
///
/// Writes are credit-gated: [`BodyWriter::write`] waits (without spinning)
/// whenever the host's body stream has no room (its `check-write` reports 0),
/// for example while the client is not reading. Memory stays bounded whatever
/// the client does.
pub struct BodyWriter {
    stream: Rc<AsyncOutputStream>,
}

impl BodyWriter {
    /// Write all of `bytes`, waiting for stream credit as needed. Fails with
    /// [`ErrorKind::Closed`] once the client is gone.
    pub async fn write(&mut self, bytes: &[u8]) -> Result<(), Error> {
        self.stream.write_all(bytes).await.map_err(Error::from)
    }

    /// Ask the host to send what has been written so far, and wait until it
    /// has taken it.
    pub async fn flush(&mut self) -> Result<(), Error> {
        self.stream.flush().await.map_err(Error::from)
    }
}

impl fmt::Debug for BodyWriter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BodyWriter").finish_non_exhaustive()
    }
}

/// What a handler may return: a [`Response`], or a `Result` whose error
/// becomes a `500` with the error's text as body.
pub trait IntoResponse {
    /// Turn `self` into the response to send.
    fn into_response(self) -> Response;
}

impl IntoResponse for Response {
    fn into_response(self) -> Response {
        self
    }
}

impl<R: IntoResponse, E: fmt::Display> IntoResponse for Result<R, E> {
    fn into_response(self) -> Response {
        match self {
            Ok(r) => r.into_response(),
            Err(e) => Response::internal_error(e),
        }
    }
}

/// Hand `response` to the host through `out`, then send its body.
pub(crate) async fn send(response: Response, out: wasip2::http::types::ResponseOutparam) {
    use wasip2::http::types::{Fields, OutgoingBody, OutgoingResponse, ResponseOutparam};

    fn outgoing(status: u16, fields: &[(String, Vec<u8>)]) -> Result<OutgoingResponse, Error> {
        let headers = Fields::from_list(fields).map_err(|e| {
            Error::new(
                ErrorKind::BadResponse,
                format_args!("response headers rejected by the host: {e:?}"),
            )
        })?;
        let response = OutgoingResponse::new(headers);
        response.set_status_code(status).map_err(|()| {
            Error::new(
                ErrorKind::BadResponse,
                format_args!("response status {status} rejected by the host"),
            )
        })?;
        Ok(response)
    }

    let (status, fields, body) = response.into_parts();
    let (response, body) = match outgoing(status, &fields) {
        Ok(response) => (response, body),
        Err(error) => {
            let (status, fields, body) = Response::internal_error(error).into_parts();
            let response = outgoing(status, &fields).expect("a plain 500 is always accepted");
            (response, body)
        }
    };
    let wasi_body = response.body().expect("outgoing body is taken once");
    ResponseOutparam::set(out, Ok(response));
    let stream = Rc::new(AsyncOutputStream::new(
        wasi_body
            .write()
            .expect("outgoing body stream is taken once"),
    ));

    let mut result = match body {
        ResponseBody::Full(bytes) if bytes.is_empty() => Ok(()),
        ResponseBody::Full(bytes) => stream.write_all(&bytes).await.map_err(Error::from),
        ResponseBody::Stream(write) => {
            let future = write(BodyWriter {
                stream: Rc::clone(&stream),
            });
            // The future (and the BodyWriter it owns) is dropped right here.
            future.await
        }
    };
    if result.is_ok() {
        result = stream.flush().await.map_err(Error::from);
    }

    // The stream is a child of the body: it must go before the body is
    // finished or dropped.
    match Rc::try_unwrap(stream) {
        Ok(stream) => drop(stream),
        Err(_escaped) => {
            eprintln!(
                "wedge-sdk: a BodyWriter outlived its Response::stream closure; \
                 the response body is left unfinished"
            );
            std::mem::forget(wasi_body);
            return;
        }
    }
    match result {
        Ok(()) => {
            if let Err(e) = OutgoingBody::finish(wasi_body, None) {
                eprintln!("wedge-sdk: finishing the response body failed: {e:?}");
            }
        }
        Err(e) => {
            // Dropping an outgoing-body without `finish` tells the host the
            // body was aborted.
            eprintln!("wedge-sdk: response body aborted: {e}");
            drop(wasi_body);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header<'a>(fields: &'a [(String, Vec<u8>)], name: &str) -> Option<&'a str> {
        fields
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| std::str::from_utf8(v).unwrap())
    }

    fn full(body: ResponseBody) -> Bytes {
        match body {
            ResponseBody::Full(b) => b,
            ResponseBody::Stream(_) => panic!("expected a full body"),
        }
    }

    #[test]
    fn text_response() {
        let (status, fields, body) = Response::text("Hello, world!\n").into_parts();
        assert_eq!(status, 200);
        assert_eq!(header(&fields, "content-type"), Some(TEXT_PLAIN));
        assert_eq!(header(&fields, "content-length"), Some("14"));
        assert_eq!(full(body), "Hello, world!\n");
    }

    #[test]
    fn with_header_replaces_and_lowercases() {
        let r = Response::text("x").with_header("Content-Type", "text/html");
        assert_eq!(r.headers().get("content-type").unwrap(), "text/html");
        assert_eq!(r.headers().len(), 1);
        let (_, fields, _) = r.with_header("X-A", b"1".as_slice()).into_parts();
        assert_eq!(header(&fields, "x-a"), Some("1"));
    }

    #[test]
    fn explicit_content_length_is_kept() {
        let (_, fields, _) = Response::new(200)
            .with_header("content-length", "3")
            .with_body("abc")
            .into_parts();
        assert_eq!(
            fields.iter().filter(|(k, _)| k == "content-length").count(),
            1
        );
        assert_eq!(header(&fields, "content-length"), Some("3"));
    }

    #[test]
    fn no_content_length_for_bodyless_statuses_and_streams() {
        for status in [101, 204, 304] {
            let (_, fields, _) = Response::new(status).into_parts();
            assert_eq!(header(&fields, "content-length"), None, "{status}");
        }
        let (_, fields, _) = Response::new(404).into_parts();
        assert_eq!(header(&fields, "content-length"), Some("0"));
        let (status, fields, body) = Response::stream(201, |_w| async { Ok(()) })
            .with_header("x", "y")
            .into_parts();
        assert_eq!(status, 201);
        assert_eq!(header(&fields, "content-length"), None);
        assert!(matches!(body, ResponseBody::Stream(_)));
    }

    #[test]
    fn builder_mistakes_become_500() {
        for r in [
            Response::new(42),
            Response::new(200).with_header("bad name", "v"),
            Response::new(200).with_header("x", "bad\nvalue"),
        ] {
            let (status, fields, body) = r.into_parts();
            assert_eq!(status, 500);
            assert_eq!(header(&fields, "content-type"), Some(TEXT_PLAIN));
            let text = full(body);
            assert!(text.starts_with(b"invalid "), "{text:?}");
        }
    }

    #[test]
    fn result_err_becomes_500_with_text() {
        let r: Result<Response, String> = Err("database is down".into());
        let (status, _, body) = r.into_response().into_parts();
        assert_eq!(status, 500);
        assert_eq!(full(body), "database is down");
        let ok: Result<Response, Error> = Ok(Response::new(202));
        assert_eq!(ok.into_response().status(), 202);
    }
}
