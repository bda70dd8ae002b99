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
/// Build one from a body constructor ([`Response::text`], [`Response::html`],
/// [`Response::bytes`], `Response::json` with the `json` feature,
/// [`Response::stream`]) or from [`Response::new`], then chain
/// [`with_status`](Response::with_status),
/// [`with_header`](Response::with_header) and
/// [`with_body`](Response::with_body).
///
/// Builder mistakes (a status outside 100..=999, an invalid header name or
/// value) do not panic: the response is replaced by a `500` whose body names
/// the mistake when it is sent.
///
/// ```
/// use wedge_sdk::Response;
///
/// let r = Response::text("created\n")
///     .with_status(201)
///     .with_header("location", "/items/1");
/// assert_eq!(r.status(), 201);
/// assert_eq!(r.headers()["location"], "/items/1");
/// ```
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
    ///
    /// ```
    /// let r = wedge_sdk::Response::new(204);
    /// assert_eq!(r.status(), 204);
    /// ```
    pub fn new(status: u16) -> Self {
        Self {
            status: 200,
            headers: HeaderMap::new(),
            body: ResponseBody::Full(Bytes::new()),
            error: None,
        }
        .with_status(status)
    }

    /// A `200` response with `body` as text
    /// (`content-type: text/plain; charset=utf-8`).
    ///
    /// ```
    /// let r = wedge_sdk::Response::text("Hello, world!\n");
    /// assert_eq!(r.headers()["content-type"], "text/plain; charset=utf-8");
    /// ```
    pub fn text(body: impl Into<String>) -> Self {
        Self::with_content_type(TEXT_PLAIN, body.into())
    }

    /// A `200` response with `body` as HTML
    /// (`content-type: text/html; charset=utf-8`).
    ///
    /// ```
    /// let r = wedge_sdk::Response::html("<h1>Hello</h1>\n");
    /// assert_eq!(r.headers()["content-type"], "text/html; charset=utf-8");
    /// ```
    pub fn html(body: impl Into<String>) -> Self {
        Self::with_content_type("text/html; charset=utf-8", body.into())
    }

    /// A `200` response with `body` as raw bytes
    /// (`content-type: application/octet-stream`).
    ///
    /// ```
    /// let r = wedge_sdk::Response::bytes(vec![0u8, 1, 2]);
    /// assert_eq!(r.headers()["content-type"], "application/octet-stream");
    /// ```
    pub fn bytes(body: impl Into<Bytes>) -> Self {
        Self::with_content_type("application/octet-stream", body)
    }

    /// A `200` response with `value` serialized as JSON
    /// (`content-type: application/json`). Needs the `json` feature. A value
    /// that cannot be serialized (e.g. a map with non-string keys) makes the
    /// response a `500` naming the problem.
    ///
    /// ```
    /// use wedge_sdk::Response;
    ///
    /// #[derive(serde::Serialize)]
    /// struct Item {
    ///     id: u64,
    ///     name: &'static str,
    /// }
    ///
    /// let r = Response::json(&Item { id: 1, name: "tea" }).with_status(201);
    /// assert_eq!(r.headers()["content-type"], "application/json");
    /// ```
    #[cfg(feature = "json")]
    pub fn json<T: serde::Serialize + ?Sized>(value: &T) -> Self {
        match serde_json::to_vec(value) {
            Ok(body) => Self::with_content_type("application/json", body),
            Err(e) => {
                let mut response = Self::new(500);
                response.error = Some(Error::new(
                    ErrorKind::BadResponse,
                    format_args!("serializing the JSON body: {e}"),
                ));
                response
            }
        }
    }

    fn with_content_type(content_type: &str, body: impl Into<Bytes>) -> Self {
        Self::new(200)
            .with_header(CONTENT_TYPE.as_str(), content_type)
            .with_body(body)
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
    ///
    /// ```
    /// let r = wedge_sdk::Response::text("hi").with_header("cache-control", "no-store");
    /// assert_eq!(r.headers()["cache-control"], "no-store");
    /// ```
    pub fn with_header(self, name: impl AsRef<str>, value: impl AsRef<[u8]>) -> Self {
        self.header(name.as_ref(), value.as_ref(), |headers, name, value| {
            headers.insert(name, value);
        })
    }

    /// Add `value` to header `name`, keeping the values it had: for fields that
    /// may repeat, such as `set-cookie` (which cannot be joined with commas).
    ///
    /// ```
    /// let r = wedge_sdk::Response::text("hi")
    ///     .append_header("set-cookie", "a=1")
    ///     .append_header("set-cookie", "b=2");
    /// assert_eq!(r.headers().get_all("set-cookie").iter().count(), 2);
    /// ```
    pub fn append_header(self, name: impl AsRef<str>, value: impl AsRef<[u8]>) -> Self {
        self.header(name.as_ref(), value.as_ref(), |headers, name, value| {
            headers.append(name, value);
        })
    }

    /// Puts `name: value` into the headers with `put`, or keeps the first error.
    fn header(
        mut self,
        name: &str,
        value: &[u8],
        put: impl FnOnce(&mut HeaderMap, HeaderName, HeaderValue),
    ) -> Self {
        match (
            HeaderName::from_bytes(name.as_bytes()),
            HeaderValue::from_bytes(value),
        ) {
            (Ok(name), Ok(value)) => {
                put(&mut self.headers, name, value);
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
    ///
    /// ```
    /// let r = wedge_sdk::Response::new(200)
    ///     .with_header("content-type", "image/svg+xml")
    ///     .with_body("<svg xmlns='http://www.w3.org/2000/svg'/>");
    /// # let _ = r;
    /// ```
    pub fn with_body(mut self, body: impl Into<Bytes>) -> Self {
        self.body = ResponseBody::Full(body.into());
        self
    }

    /// Set the status code. One outside `100..=999` makes the response a
    /// `500` naming the mistake when it is sent.
    ///
    /// ```
    /// let r = wedge_sdk::Response::text("no such item\n").with_status(404);
    /// assert_eq!(r.status(), 404);
    /// ```
    pub fn with_status(mut self, status: u16) -> Self {
        self.status = status;
        if StatusCode::from_u16(status).is_err() {
            self.error.get_or_insert_with(|| {
                Error::new(
                    ErrorKind::BadResponse,
                    format_args!("invalid response status {status}"),
                )
            });
        }
        self
    }

    /// The status code.
    ///
    /// ```
    /// assert_eq!(wedge_sdk::Response::text("x").status(), 200);
    /// ```
    pub fn status(&self) -> u16 {
        self.status
    }

    /// The headers set so far.
    ///
    /// ```
    /// assert!(wedge_sdk::Response::new(200).headers().is_empty());
    /// ```
    pub fn headers(&self) -> &HeaderMap {
        &self.headers
    }

    /// What to hand to the host: status, header list, body. Resolves a
    /// builder error into a 500 and adds `content-length` to fixed bodies.
    pub(crate) fn into_parts(self) -> (u16, Vec<(String, Vec<u8>)>, ResponseBody) {
        let response = match self.error {
            Some(error) => error.into_response(),
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
/// the client does, and a slow client slows the handler down.
///
/// ```no_run
/// # use wedge_sdk::{Request, Response};
/// async fn handle(_req: Request) -> Response {
///     Response::stream(200, |mut w| async move {
///         for i in 0..1000 {
///             w.write(format!("{i}\n").as_bytes()).await?; // waits while the client lags
///         }
///         Ok(())
///     })
/// }
/// # wedge_sdk::export_handler!(handle);
/// ```
pub struct BodyWriter {
    stream: Rc<AsyncOutputStream>,
}

impl BodyWriter {
    /// Write all of `bytes`, waiting for stream credit as needed. Fails with
    /// [`ErrorKind::Closed`] once the client is gone.
    ///
    /// ```no_run
    /// # use wedge_sdk::Response;
    /// let r = Response::stream(200, |mut w| async move { w.write(b"one chunk\n").await });
    /// ```
    pub async fn write(&mut self, bytes: &[u8]) -> Result<(), Error> {
        self.stream.write_all(bytes).await.map_err(Error::from)
    }

    /// Ask the host to send what has been written so far, and wait until it
    /// has taken it.
    ///
    /// ```no_run
    /// # use wedge_sdk::Response;
    /// let r = Response::stream(200, |mut w| async move {
    ///     w.write(b"progress: 50%\n").await?;
    ///     w.flush().await // the client sees the line now, not with the next write
    /// });
    /// ```
    pub async fn flush(&mut self) -> Result<(), Error> {
        self.stream.flush().await.map_err(Error::from)
    }
}

impl fmt::Debug for BodyWriter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BodyWriter").finish_non_exhaustive()
    }
}

/// What a handler may return: a [`Response`], an [`Error`], or a `Result`
/// of the two (any error type that converts into [`Error`]). An error
/// answers with [`Error::status`] and its message as a `text/plain` body;
/// errors of status `500` and up are also printed to stderr (the host logs
/// them).
///
/// ```no_run
/// use wedge_sdk::{Error, Request, Response};
///
/// async fn handle(req: Request) -> Result<Response, Error> {
///     match req.path() {
///         "/" => Ok(Response::text("home\n")),
///         _ => Err(Error::http(404, "nothing here")), // 404 "nothing here\n"
///     }
/// }
/// # wedge_sdk::export_handler!(handle);
/// ```
pub trait IntoResponse {
    /// Turn `self` into the response to send.
    ///
    /// ```
    /// use wedge_sdk::{Error, IntoResponse};
    ///
    /// assert_eq!(Error::http(409, "taken").into_response().status(), 409);
    /// ```
    fn into_response(self) -> Response;
}

impl IntoResponse for Response {
    fn into_response(self) -> Response {
        self
    }
}

impl IntoResponse for Error {
    fn into_response(self) -> Response {
        if self.status() >= 500 {
            eprintln!("wedge-sdk: handler error: {self}");
        }
        Response::text(format!("{self}\n")).with_status(self.status())
    }
}

impl<R: IntoResponse, E: Into<Error>> IntoResponse for Result<R, E> {
    fn into_response(self) -> Response {
        match self {
            Ok(r) => r.into_response(),
            Err(e) => e.into().into_response(),
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
            let (status, fields, body) = error.into_response().into_parts();
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
        // Dropping an outgoing-body without `finish` tells the host the body
        // was aborted. A client that left is routine (a browser leaving a page,
        // a load generator ending): that says nothing worth a line of the app's
        // log; any other failure does.
        Err(e) if e.kind() == ErrorKind::Closed => drop(wasi_body),
        Err(e) => {
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
    fn append_header_keeps_every_value_and_with_header_replaces_them() {
        let r = Response::text("x")
            .append_header("Set-Cookie", "a=1")
            .append_header("set-cookie", "b=2");
        let cookies: Vec<_> = r.headers().get_all("set-cookie").iter().collect();
        assert_eq!(cookies, ["a=1", "b=2"]);
        let r = r.with_header("set-cookie", "c=3");
        assert_eq!(r.headers().get_all("set-cookie").iter().count(), 1);
        let bad = Response::text("x").append_header("bad name", "1");
        assert_eq!(bad.into_parts().0, 500, "an invalid name answers 500");
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
    fn body_constructors_set_content_types() {
        for (r, ct) in [
            (Response::html("<p>"), "text/html; charset=utf-8"),
            (Response::bytes(vec![1u8]), "application/octet-stream"),
        ] {
            let (status, fields, _) = r.into_parts();
            assert_eq!(status, 200);
            assert_eq!(header(&fields, "content-type"), Some(ct));
            assert_eq!(
                header(&fields, "content-length"),
                Some(if ct.starts_with("text") { "3" } else { "1" })
            );
        }
    }

    #[cfg(feature = "json")]
    #[test]
    fn json_responses() {
        let value = std::collections::BTreeMap::from([("id", 7)]);
        let (status, fields, body) = Response::json(&value).with_status(201).into_parts();
        assert_eq!(status, 201);
        assert_eq!(header(&fields, "content-type"), Some("application/json"));
        assert_eq!(full(body), r#"{"id":7}"#);
        // Maps with non-string keys cannot be JSON.
        let bad = std::collections::BTreeMap::from([((1, 2), 3)]);
        let (status, _, body) = Response::json(&bad).into_parts();
        assert_eq!(status, 500);
        assert!(full(body).starts_with(b"serializing the JSON body: "));
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
            assert!(text.ends_with(b"\n"), "{text:?}");
        }
    }

    #[test]
    fn errors_answer_with_their_status_and_text() {
        let r: Result<Response, String> = Err("database is down".into());
        let (status, _, body) = r.into_response().into_parts();
        assert_eq!(status, 500);
        assert_eq!(full(body), "database is down\n");
        for (e, expect) in [
            (Error::new(ErrorKind::BodyTooLarge, "too big"), 413),
            (Error::new(ErrorKind::BadRequest, "bad json"), 400),
            (Error::http(404, "no item"), 404),
            (Error::http(1000, "bad status"), 500),
        ] {
            let (status, fields, _) = Err::<Response, _>(e).into_response().into_parts();
            assert_eq!(status, expect);
            assert_eq!(header(&fields, "content-type"), Some(TEXT_PLAIN));
        }
        let ok: Result<Response, Error> = Ok(Response::new(202));
        assert_eq!(ok.into_response().status(), 202);
    }
}
