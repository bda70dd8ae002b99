use crate::decode::query_pairs;
use crate::error::{Error, ErrorKind};
use bytes::Bytes;
use http::{HeaderMap, HeaderName, HeaderValue, Method, Uri};
use std::any::Any;
use std::borrow::Cow;
use wasip2::http::types::{
    IncomingBody, IncomingRequest, IncomingResponse, Method as WasiMethod, Scheme,
};
use wasip2::io::streams::{InputStream, StreamError};
use wstd::runtime::AsyncPollable;

/// Largest chunk [`Body::chunk`] asks the host for in one read.
const MAX_CHUNK: u64 = 64 * 1024;

/// Largest buffer [`Body::read_to_end`] reserves up front from a
/// `content-length` header (the header is the client's claim, not a fact).
const MAX_PREALLOC: usize = 1024 * 1024;

/// An incoming HTTP request: its head, the path parameters a
/// [`Router`](crate::Router) matched, and its body as a stream.
///
/// The body is not read until you ask for it with [`Request::into_body`] (or
/// `Request::json` with the `json` feature).
///
/// ```no_run
/// use wedge_sdk::{Request, Response};
///
/// async fn handle(req: Request) -> Response {
///     Response::text(format!("{} {}\n", req.method(), req.path()))
/// }
/// # wedge_sdk::export_handler!(handle);
/// ```
pub struct Request {
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    params: Vec<(String, String)>,
    body: Body,
}

impl Request {
    /// The request method (`GET`, `POST`, ...).
    ///
    /// ```no_run
    /// # use wedge_sdk::{Method, Request, Response};
    /// async fn handle(req: Request) -> Response {
    ///     if req.method() == Method::POST { Response::new(201) } else { Response::new(200) }
    /// }
    /// # wedge_sdk::export_handler!(handle);
    /// ```
    pub fn method(&self) -> &Method {
        &self.method
    }

    /// The request URI. Its path and query are always present; scheme and
    /// authority are present when the host supplied them.
    ///
    /// ```no_run
    /// # use wedge_sdk::{Request, Response};
    /// async fn handle(req: Request) -> Response {
    ///     Response::text(format!("host: {:?}\n", req.uri().host()))
    /// }
    /// # wedge_sdk::export_handler!(handle);
    /// ```
    pub fn uri(&self) -> &Uri {
        &self.uri
    }

    /// The URI path, e.g. `/users/7` (never empty: at least `/`), still
    /// percent-encoded as sent.
    ///
    /// ```no_run
    /// # use wedge_sdk::{Request, Response};
    /// async fn handle(req: Request) -> Response {
    ///     Response::text(format!("you asked for {}\n", req.path()))
    /// }
    /// # wedge_sdk::export_handler!(handle);
    /// ```
    pub fn path(&self) -> &str {
        self.uri.path()
    }

    /// Where the app is mounted: the path prefix of the wedge route that reached
    /// it (`/api` for an app on the route `/api` or `example.com/api`), or `""` for
    /// an app on `/`. wedge says it in the `x-wedge-base-path` field, dropping
    /// any a client sent. Links and redirects the app makes start with it.
    ///
    /// ```no_run
    /// # use wedge_sdk::{Request, Response};
    /// async fn handle(req: Request) -> Response {
    ///     let login = format!("{}/login", req.base_path());
    ///     Response::new(303).with_header("location", login)
    /// }
    /// # wedge_sdk::export_handler!(handle);
    /// ```
    pub fn base_path(&self) -> &str {
        self.header(BASE_PATH)
            .filter(|base| below(self.path(), base).is_some())
            .unwrap_or("")
    }

    /// The path below where the app is mounted, what a [`Router`](crate::Router)
    /// matches: `/users/7` for `/api/users/7` on `/api`, `/` for `/api`; the whole
    /// path for an app on `/`.
    ///
    /// ```no_run
    /// # use wedge_sdk::{Request, Response};
    /// async fn handle(req: Request) -> Response {
    ///     Response::text(format!("{} within the app\n", req.app_path()))
    /// }
    /// # wedge_sdk::export_handler!(handle);
    /// ```
    pub fn app_path(&self) -> &str {
        let path = self.path();
        self.header(BASE_PATH)
            .and_then(|base| below(path, base))
            .unwrap_or(path)
    }

    /// The URI query without the `?`, e.g. `ms=50` for `/sleep?ms=50`, or
    /// `None` when the URI has no `?`. Not decoded; see
    /// [`Request::query_param`] for decoded values.
    ///
    /// ```no_run
    /// # use wedge_sdk::{Request, Response};
    /// async fn handle(req: Request) -> Response {
    ///     Response::text(format!("raw query: {}\n", req.query().unwrap_or("")))
    /// }
    /// # wedge_sdk::export_handler!(handle);
    /// ```
    pub fn query(&self) -> Option<&str> {
        self.uri.query()
    }

    /// The first value of query parameter `name`, percent-decoded (`+` is a
    /// space), or `None` if it is absent. `?flag` gives `Some("")`.
    ///
    /// ```no_run
    /// # use wedge_sdk::{Request, Response};
    /// // GET /greet?name=J%C3%BCrgen+S -> "Hello, Jürgen S!"
    /// async fn handle(req: Request) -> Response {
    ///     let name = req.query_param("name").unwrap_or("world".into());
    ///     Response::text(format!("Hello, {name}!\n"))
    /// }
    /// # wedge_sdk::export_handler!(handle);
    /// ```
    pub fn query_param(&self, name: &str) -> Option<Cow<'_, str>> {
        self.query_params()
            .find(|(k, _)| k == name)
            .map(|(_, value)| value)
    }

    /// All query parameters in order, as decoded `(name, value)` pairs;
    /// repeated names appear once per occurrence.
    ///
    /// ```no_run
    /// # use wedge_sdk::{Request, Response};
    /// // GET /tags?t=a&t=b -> "a,b"
    /// async fn handle(req: Request) -> Response {
    ///     let tags: Vec<_> = req.query_params().filter(|(k, _)| k == "t").map(|(_, v)| v).collect();
    ///     Response::text(tags.join(","))
    /// }
    /// # wedge_sdk::export_handler!(handle);
    /// ```
    pub fn query_params(&self) -> impl Iterator<Item = (Cow<'_, str>, Cow<'_, str>)> {
        query_pairs(self.query().unwrap_or(""))
    }

    /// The path parameter `name` that the [`Router`](crate::Router) matched
    /// (`:id` in `/users/:id`), percent-decoded; `None` if the route has no
    /// such parameter (or the request did not come through a router).
    ///
    /// ```no_run
    /// use wedge_sdk::{Request, Response, Router};
    ///
    /// async fn user(req: Request) -> Response {
    ///     Response::text(format!("user {}\n", req.param("id").unwrap_or("?")))
    /// }
    ///
    /// async fn handle(req: Request) -> Response {
    ///     Router::new().get("/users/:id", user).handle(req).await
    /// }
    /// # wedge_sdk::export_handler!(handle);
    /// ```
    pub fn param(&self, name: &str) -> Option<&str> {
        self.params
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }

    /// All request headers.
    ///
    /// ```no_run
    /// # use wedge_sdk::{Request, Response};
    /// async fn handle(req: Request) -> Response {
    ///     Response::text(format!("{} headers\n", req.headers().len()))
    /// }
    /// # wedge_sdk::export_handler!(handle);
    /// ```
    pub fn headers(&self) -> &HeaderMap {
        &self.headers
    }

    /// The first value of header `name` (case-insensitive), or `None` if it
    /// is absent or is not visible ASCII text.
    ///
    /// ```no_run
    /// # use wedge_sdk::{Request, Response};
    /// async fn handle(req: Request) -> Response {
    ///     Response::text(req.header("user-agent").unwrap_or("unknown").to_owned())
    /// }
    /// # wedge_sdk::export_handler!(handle);
    /// ```
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name)?.to_str().ok()
    }

    /// Take the request body, to stream it with [`Body::chunk`] or collect it
    /// with [`Body::read_to_end`].
    ///
    /// ```no_run
    /// # use wedge_sdk::{Error, Request, Response};
    /// async fn handle(req: Request) -> Result<Response, Error> {
    ///     let mut body = req.into_body();
    ///     let mut total = 0;
    ///     while let Some(chunk) = body.chunk().await {
    ///         total += chunk?.len();
    ///     }
    ///     Ok(Response::text(format!("{total} bytes\n")))
    /// }
    /// # wedge_sdk::export_handler!(handle);
    /// ```
    pub fn into_body(self) -> Body {
        self.body
    }

    /// Read the whole body (at most `limit` bytes) and parse it as JSON into
    /// `T`. Needs the `json` feature. A body over `limit` fails with
    /// [`ErrorKind::BodyTooLarge`] (a `413` when returned from a handler),
    /// one that is not valid JSON for `T` with [`ErrorKind::BadRequest`]
    /// (`400`) naming what is wrong. The `content-type` is not checked.
    ///
    /// ```no_run
    /// use serde::Deserialize;
    /// use wedge_sdk::{Error, Request, Response};
    ///
    /// #[derive(Deserialize)]
    /// struct Item {
    ///     name: String,
    /// }
    ///
    /// async fn handle(req: Request) -> Result<Response, Error> {
    ///     let item: Item = req.json(64 * 1024).await?;
    ///     Ok(Response::text(format!("got {}\n", item.name)))
    /// }
    /// # wedge_sdk::export_handler!(handle);
    /// ```
    #[cfg(feature = "json")]
    pub async fn json<T: serde::de::DeserializeOwned>(self, limit: usize) -> Result<T, Error> {
        let bytes = self.body.read_to_end(limit).await?;
        serde_json::from_slice(&bytes).map_err(|e| {
            Error::new(
                ErrorKind::BadRequest,
                format_args!("invalid JSON body: {e}"),
            )
        })
    }

    /// Record the path parameters a router matched.
    pub(crate) fn set_params(&mut self, params: Vec<(String, String)>) {
        self.params = params;
    }

    /// Convert the host's `incoming-request`.
    pub(crate) fn from_wasi(request: IncomingRequest) -> Result<Self, Error> {
        let method = method_from_wasi(request.method())?;
        let scheme = request.scheme().map(|s| match s {
            Scheme::Http => "http".to_string(),
            Scheme::Https => "https".to_string(),
            Scheme::Other(s) => s,
        });
        let uri = build_uri(scheme, request.authority(), request.path_with_query())?;
        let headers = headers_from_entries(request.headers().entries())?;
        let content_length = content_length(&headers);
        let body = request
            .consume()
            .map_err(|()| Error::new(ErrorKind::BadRequest, "request body already taken"))?;
        Ok(Self {
            method,
            uri,
            headers,
            params: Vec::new(),
            body: Body::from_wasi(Box::new(request), body, content_length, Source::Request)?,
        })
    }

    #[cfg(test)]
    pub(crate) fn for_test(
        method: Method,
        uri: &str,
        headers: &[(&str, &str)],
        body: Body,
    ) -> Self {
        let entries = headers
            .iter()
            .map(|(k, v)| (k.to_string(), v.as_bytes().to_vec()))
            .collect();
        Self {
            method,
            uri: uri.parse().unwrap(),
            headers: headers_from_entries(entries).unwrap(),
            params: Vec::new(),
            body,
        }
    }
}

impl std::fmt::Debug for Request {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Request")
            .field("method", &self.method)
            .field("uri", &self.uri)
            .field("headers", &self.headers)
            .field("params", &self.params)
            .finish_non_exhaustive()
    }
}

/// A request body, read as a stream of chunks.
///
/// Reading is credit-based: the host only lets the client send more once the
/// handler has read what arrived, so a handler that streams with
/// [`Body::chunk`] holds at most one chunk in memory.
///
/// ```no_run
/// # use wedge_sdk::{Body, Error, Request, Response};
/// async fn count_lines(mut body: Body) -> Result<usize, Error> {
///     let mut lines = 0;
///     while let Some(chunk) = body.chunk().await {
///         lines += chunk?.iter().filter(|&&b| b == b'\n').count();
///     }
///     Ok(lines)
/// }
///
/// async fn handle(req: Request) -> Result<Response, Error> {
///     let lines = count_lines(req.into_body()).await?;
///     Ok(Response::text(format!("{lines} lines\n")))
/// }
/// # wedge_sdk::export_handler!(handle);
/// ```
pub struct Body {
    inner: Inner,
    content_length: Option<u64>,
    from: Source,
}

/// Whose body it is: the client's request, or an upstream's answer to
/// [`fetch`](crate::fetch). A limit or a failure is the client's fault (`413`)
/// in one case and the upstream's (`502`) in the other.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Source {
    Request,
    Upstream,
}

impl Source {
    fn what(self) -> &'static str {
        match self {
            Source::Request => "request body",
            Source::Upstream => "upstream response body",
        }
    }

    fn too_large(self, limit: usize) -> Error {
        let kind = match self {
            Source::Request => ErrorKind::BodyTooLarge,
            Source::Upstream => ErrorKind::Fetch,
        };
        Error::new(
            kind,
            format_args!("{} exceeds the limit of {limit} bytes", self.what()),
        )
    }
}

enum Inner {
    Wasi(WasiBody),
    /// The body failed: no more chunks, no trailers.
    Done,
    #[cfg(test)]
    Chunks(
        std::collections::VecDeque<Result<Bytes, Error>>,
        Option<HeaderMap>,
    ),
}

/// Field order is drop order: each resource is dropped before its parent.
struct WasiBody {
    pollable: Option<AsyncPollable>,
    /// `None` once the body ended: its trailers may still be asked for.
    stream: Option<InputStream>,
    body: IncomingBody,
    /// The incoming request or response the body belongs to.
    parent: Box<dyn Any + Send>,
}

impl Body {
    /// The body of a [`fetch`](crate::fetch) answer.
    pub(crate) fn from_wasi_response(
        response: IncomingResponse,
        content_length: Option<u64>,
    ) -> Result<Self, Error> {
        let body = response
            .consume()
            .map_err(|()| Error::msg("response body already taken"))?;
        Self::from_wasi(Box::new(response), body, content_length, Source::Upstream)
    }

    /// A body streamed from `body`, a child of `parent`.
    fn from_wasi(
        parent: Box<dyn Any + Send>,
        body: IncomingBody,
        content_length: Option<u64>,
        from: Source,
    ) -> Result<Self, Error> {
        let stream = body
            .stream()
            .map_err(|()| Error::msg("body stream already taken"))?;
        Ok(Body {
            inner: Inner::Wasi(WasiBody {
                pollable: None,
                stream: Some(stream),
                body,
                parent,
            }),
            content_length,
            from,
        })
    }

    /// The next chunk of the body as it arrives (at most 64 KiB), `None` at
    /// the end of the body, or an error if the stream failed. After `None` or
    /// an error, every further call returns `None`.
    ///
    /// Waits without spinning (on the stream's WASI pollable) until data is
    /// available. Never buffers more than the chunk it returns.
    ///
    /// ```no_run
    /// # use wedge_sdk::{Error, Request, Response};
    /// async fn handle(req: Request) -> Result<Response, Error> {
    ///     let mut body = req.into_body();
    ///     let first = body.chunk().await.transpose()?.unwrap_or_default();
    ///     Ok(Response::text(format!("first chunk: {} bytes\n", first.len())))
    /// }
    /// # wedge_sdk::export_handler!(handle);
    /// ```
    pub async fn chunk(&mut self) -> Option<Result<Bytes, Error>> {
        loop {
            let (pollable, stream) = match &mut self.inner {
                Inner::Done => return None,
                #[cfg(test)]
                Inner::Chunks(chunks, _) => {
                    let next = chunks.pop_front();
                    if matches!(next, Some(Err(_))) {
                        self.inner = Inner::Done;
                    }
                    return next;
                }
                Inner::Wasi(WasiBody {
                    pollable,
                    stream: Some(stream),
                    ..
                }) => (pollable, stream),
                // Ended; the body is kept for its trailers.
                Inner::Wasi(_) => return None,
            };
            match stream.read(MAX_CHUNK) {
                Ok(bytes) if !bytes.is_empty() => return Some(Ok(Bytes::from(bytes))),
                Ok(_) => {
                    pollable
                        .get_or_insert_with(|| AsyncPollable::new(stream.subscribe()))
                        .wait_for()
                        .await;
                }
                Err(StreamError::Closed) => {
                    if let Inner::Wasi(body) = &mut self.inner {
                        // The pollable first: it is the stream's child.
                        body.pollable = None;
                        body.stream = None;
                    }
                    return None;
                }
                Err(StreamError::LastOperationFailed(e)) => {
                    self.inner = Inner::Done;
                    return Some(Err(Error::new(
                        ErrorKind::Io,
                        format_args!("reading {}: {}", self.from.what(), e.to_debug_string()),
                    )));
                }
            }
        }
    }

    /// Read the whole body into memory, failing with
    /// [`ErrorKind::BodyTooLarge`] as soon as it is known to exceed `limit`
    /// bytes (from the `content-length` header, before reading anything, or
    /// while reading, so at most `limit` bytes are ever held). The error's
    /// message names the limit; returned from a handler it answers `413` for
    /// the request's body, `502` for the body of an upstream's answer to
    /// [`fetch`](crate::fetch) (kind [`ErrorKind::Fetch`]: the upstream's fault).
    ///
    /// ```no_run
    /// # use wedge_sdk::{Error, Request, Response};
    /// async fn handle(req: Request) -> Result<Response, Error> {
    ///     // A body over 1 MiB answers "413 request body exceeds the limit of 1048576 bytes".
    ///     let body = req.into_body().read_to_end(1 << 20).await?;
    ///     Ok(Response::bytes(body))
    /// }
    /// # wedge_sdk::export_handler!(handle);
    /// ```
    pub async fn read_to_end(mut self, limit: usize) -> Result<Bytes, Error> {
        let mut acc = Accumulator::new(limit, self.content_length, self.from)?;
        while let Some(chunk) = self.chunk().await {
            acc.push(chunk?)?;
        }
        Ok(acc.finish())
    }

    /// The trailers sent after the body (empty if none), once all of it arrived: what
    /// was not read is read and dropped first. Fails if the body failed.
    ///
    /// ```no_run
    /// # use wedge_sdk::{Error, Request, Response};
    /// async fn handle(req: Request) -> Result<Response, Error> {
    ///     let mut body = req.into_body();
    ///     let mut len = 0;
    ///     while let Some(chunk) = body.chunk().await {
    ///         len += chunk?.len();
    ///     }
    ///     let trailers = body.trailers().await?;
    ///     let sum = trailers.get("x-checksum").and_then(|v| v.to_str().ok());
    ///     Ok(Response::text(format!("{len} bytes, checksum {sum:?}\n")))
    /// }
    /// # wedge_sdk::export_handler!(handle);
    /// ```
    pub async fn trailers(mut self) -> Result<HeaderMap, Error> {
        let from = self.from;
        let failed = || {
            Error::new(
                ErrorKind::Io,
                format_args!("{} failed before its trailers", from.what()),
            )
        };
        match std::mem::replace(&mut self.inner, Inner::Done) {
            Inner::Done => Err(failed()),
            #[cfg(test)]
            Inner::Chunks(chunks, trailers) => {
                for chunk in chunks {
                    chunk?;
                }
                Ok(trailers.unwrap_or_default())
            }
            Inner::Wasi(WasiBody {
                pollable,
                stream,
                body,
                parent,
            }) => {
                // `finish` traps while the body's stream (and its pollable) lives.
                drop(pollable);
                drop(stream);
                let trailers = IncomingBody::finish(body);
                let result = loop {
                    match trailers.get() {
                        Some(result) => break result,
                        None => AsyncPollable::new(trailers.subscribe()).wait_for().await,
                    }
                };
                let fields = match result {
                    Ok(Ok(Some(fields))) => fields.entries(),
                    Ok(Ok(None)) => Vec::new(),
                    Ok(Err(code)) => {
                        return Err(Error::new(
                            ErrorKind::Io,
                            format_args!("reading {}: {code:?}", from.what()),
                        ));
                    }
                    // Taken once only, right here.
                    Err(()) => return Err(failed()),
                };
                drop(trailers);
                drop(parent);
                headers_from_entries(fields)
            }
        }
    }

    #[cfg(test)]
    pub(crate) fn from_chunks(
        chunks: Vec<Result<Bytes, Error>>,
        content_length: Option<u64>,
    ) -> Self {
        Self {
            inner: Inner::Chunks(chunks.into(), None),
            content_length,
            from: Source::Request,
        }
    }

    /// The same body, with `trailers` after its chunks.
    #[cfg(test)]
    fn with_trailers(self, trailers: HeaderMap) -> Self {
        let Inner::Chunks(chunks, _) = self.inner else {
            unreachable!("a test body")
        };
        Self {
            inner: Inner::Chunks(chunks, Some(trailers)),
            ..self
        }
    }

    /// The same body as an upstream's answer to a fetch.
    #[cfg(test)]
    fn upstream(self) -> Self {
        Self {
            from: Source::Upstream,
            ..self
        }
    }
}

impl std::fmt::Debug for Body {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Body")
            .field("content_length", &self.content_length)
            .finish_non_exhaustive()
    }
}

/// Collects chunks up to a limit; a single chunk is kept without copying.
struct Accumulator {
    limit: usize,
    len: usize,
    first: Option<Bytes>,
    rest: Vec<u8>,
    reserve: usize,
    from: Source,
}

impl Accumulator {
    fn new(limit: usize, content_length: Option<u64>, from: Source) -> Result<Self, Error> {
        if content_length.is_some_and(|n| n > limit as u64) {
            return Err(from.too_large(limit));
        }
        let reserve = content_length.map_or(0, |n| (n as usize).min(MAX_PREALLOC));
        Ok(Self {
            limit,
            len: 0,
            first: None,
            rest: Vec::new(),
            reserve,
            from,
        })
    }

    fn push(&mut self, chunk: Bytes) -> Result<(), Error> {
        if chunk.len() > self.limit - self.len {
            return Err(self.from.too_large(self.limit));
        }
        self.len += chunk.len();
        if chunk.is_empty() {
            return Ok(());
        }
        match self.first.take() {
            None if self.rest.is_empty() => self.first = Some(chunk),
            first => {
                if let Some(first) = first {
                    self.rest
                        .reserve(self.reserve.max(first.len() + chunk.len()));
                    self.rest.extend_from_slice(&first);
                }
                self.rest.extend_from_slice(&chunk);
            }
        }
        Ok(())
    }

    fn finish(self) -> Bytes {
        match self.first {
            Some(first) => first,
            None => Bytes::from(self.rest),
        }
    }
}

fn method_from_wasi(method: WasiMethod) -> Result<Method, Error> {
    Ok(match method {
        WasiMethod::Get => Method::GET,
        WasiMethod::Head => Method::HEAD,
        WasiMethod::Post => Method::POST,
        WasiMethod::Put => Method::PUT,
        WasiMethod::Delete => Method::DELETE,
        WasiMethod::Connect => Method::CONNECT,
        WasiMethod::Options => Method::OPTIONS,
        WasiMethod::Trace => Method::TRACE,
        WasiMethod::Patch => Method::PATCH,
        WasiMethod::Other(other) => Method::from_bytes(other.as_bytes()).map_err(|_| {
            Error::new(
                ErrorKind::BadRequest,
                format_args!("invalid method {other:?}"),
            )
        })?,
    })
}

/// Build the request URI from the parts the host hands over. Without an
/// authority the URI is origin-form (`/path?query`); a scheme alone is
/// dropped, an authority alone gets `http`.
fn build_uri(
    scheme: Option<String>,
    authority: Option<String>,
    path_with_query: Option<String>,
) -> Result<Uri, Error> {
    let mut builder = Uri::builder();
    if let Some(authority) = authority.filter(|a| !a.is_empty()) {
        builder = builder
            .scheme(scheme.as_deref().unwrap_or("http"))
            .authority(authority);
    }
    let pq = path_with_query.filter(|p| !p.is_empty());
    builder
        .path_and_query(pq.as_deref().unwrap_or("/"))
        .build()
        .map_err(|e| {
            Error::new(
                ErrorKind::BadRequest,
                format_args!("invalid request URI: {e}"),
            )
        })
}

pub(crate) fn headers_from_entries(entries: Vec<(String, Vec<u8>)>) -> Result<HeaderMap, Error> {
    // A `HeaderMap` holds at most 24,576 fields; a host with its limits raised can
    // send more, which is the request's fault, not a reason to trap.
    let too_many = || {
        Error::new(
            ErrorKind::BadRequest,
            format_args!(
                "{} header fields are more than a HeaderMap holds",
                entries.len()
            ),
        )
    };
    let mut map = HeaderMap::try_with_capacity(entries.len()).map_err(|_| too_many())?;
    for (name, value) in &entries {
        let bad = |what| {
            Error::new(
                ErrorKind::BadRequest,
                format_args!("invalid request header {what} for {name:?}"),
            )
        };
        let header = HeaderName::from_bytes(name.as_bytes()).map_err(|_| bad("name"))?;
        let value = HeaderValue::from_bytes(value).map_err(|_| bad("value"))?;
        map.try_append(header, value).map_err(|_| too_many())?;
    }
    Ok(map)
}

pub(crate) fn content_length(headers: &HeaderMap) -> Option<u64> {
    headers
        .get(http::header::CONTENT_LENGTH)?
        .to_str()
        .ok()?
        .trim()
        .parse()
        .ok()
}

/// The request field wedge sets to the path prefix an app is mounted on.
const BASE_PATH: &str = "x-wedge-base-path";

/// `path` below `base` on a segment boundary (`/` for `base` itself), if it is there.
fn below<'p>(path: &'p str, base: &str) -> Option<&'p str> {
    if !base.starts_with('/') || base.ends_with('/') {
        return None;
    }
    match path.strip_prefix(base)? {
        "" => Some("/"),
        rest if rest.starts_with('/') => Some(rest),
        _ => None,
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// Drive a test future that never waits on a pollable.
    pub(crate) fn run<F: std::future::Future>(f: F) -> F::Output {
        // Test bodies never wait on a pollable, so one poll completes them.
        let mut f = std::pin::pin!(f);
        match f
            .as_mut()
            .poll(&mut std::task::Context::from_waker(std::task::Waker::noop()))
        {
            std::task::Poll::Ready(v) => v,
            std::task::Poll::Pending => panic!("test future pending"),
        }
    }

    fn chunks(parts: &[&'static str]) -> Vec<Result<Bytes, Error>> {
        parts
            .iter()
            .map(|p| Ok(Bytes::from_static(p.as_bytes())))
            .collect()
    }

    #[test]
    fn accessors() {
        let req = Request::for_test(
            Method::POST,
            "/sleep?ms=50",
            &[("Content-Type", "text/plain"), ("x-a", "1"), ("x-a", "2")],
            Body::from_chunks(vec![], None),
        );
        assert_eq!(req.method(), Method::POST);
        assert_eq!(req.path(), "/sleep");
        assert_eq!(req.query(), Some("ms=50"));
        assert_eq!(req.header("content-type"), Some("text/plain"));
        assert_eq!(req.header("CONTENT-TYPE"), Some("text/plain"));
        assert_eq!(req.header("x-a"), Some("1"));
        assert_eq!(req.headers().get_all("x-a").iter().count(), 2);
        assert_eq!(req.header("missing"), None);
        assert_eq!(req.header("not a header name"), None);
    }

    #[test]
    fn query_params_are_decoded() {
        let mut req = Request::for_test(
            Method::GET,
            "/q?name=J%C3%BCrgen+S&flag&name=second",
            &[],
            Body::from_chunks(vec![], None),
        );
        assert_eq!(req.query_param("name").unwrap(), "Jürgen S");
        assert_eq!(req.query_param("flag").unwrap(), "");
        assert_eq!(req.query_param("missing"), None);
        assert_eq!(req.query_params().count(), 3);
        assert_eq!(req.param("id"), None);
        req.set_params(vec![("id".into(), "7".into())]);
        assert_eq!(req.param("id"), Some("7"));
        let bare = Request::for_test(Method::GET, "/", &[], Body::from_chunks(vec![], None));
        assert_eq!(bare.query_params().count(), 0);
    }

    #[test]
    fn chunk_streams_then_ends() {
        let mut body = Body::from_chunks(chunks(&["ab", "cd"]), None);
        assert_eq!(run(body.chunk()).unwrap().unwrap(), "ab");
        assert_eq!(run(body.chunk()).unwrap().unwrap(), "cd");
        assert!(run(body.chunk()).is_none());
    }

    #[test]
    fn trailers_come_after_the_body_read_or_not() {
        let mut sent = HeaderMap::new();
        sent.insert("x-checksum", HeaderValue::from_static("abc"));
        sent.append("x-tag", HeaderValue::from_static("1"));
        sent.append("x-tag", HeaderValue::from_static("2"));
        let mut body = Body::from_chunks(chunks(&["ab", "cd"]), None).with_trailers(sent.clone());
        assert_eq!(run(body.chunk()).unwrap().unwrap(), "ab");
        assert_eq!(run(body.chunk()).unwrap().unwrap(), "cd");
        assert!(run(body.chunk()).is_none());
        assert_eq!(run(body.trailers()).unwrap(), sent);
        // What is unread is skipped.
        let unread = Body::from_chunks(chunks(&["ab"]), None).with_trailers(sent.clone());
        assert_eq!(run(unread.trailers()).unwrap(), sent);
        // None sent: empty.
        let none = Body::from_chunks(chunks(&["ab"]), None);
        assert!(run(none.trailers()).unwrap().is_empty());
    }

    #[test]
    fn a_body_that_failed_has_no_trailers() {
        let failing = || {
            Body::from_chunks(
                vec![
                    Ok(Bytes::from_static(b"x")),
                    Err(Error::new(ErrorKind::Io, "reset")),
                ],
                None,
            )
            .with_trailers(HeaderMap::new())
        };
        // Failing while the rest is skipped...
        assert_eq!(run(failing().trailers()).unwrap_err().kind(), ErrorKind::Io);
        // ...or before, while read.
        let mut body = failing();
        run(body.chunk());
        assert!(run(body.chunk()).unwrap().is_err());
        let err = run(body.trailers()).unwrap_err();
        assert_eq!(err.to_string(), "request body failed before its trailers");
    }

    #[test]
    fn read_to_end_concatenates() {
        let body = Body::from_chunks(chunks(&["Hello, ", "", "world", "!"]), Some(13));
        assert_eq!(run(body.read_to_end(13)).unwrap(), "Hello, world!");
        let one = Body::from_chunks(chunks(&["only"]), None);
        assert_eq!(run(one.read_to_end(4)).unwrap(), "only");
        let none = Body::from_chunks(vec![], None);
        assert_eq!(run(none.read_to_end(0)).unwrap(), "");
    }

    #[test]
    fn read_to_end_enforces_limit() {
        let body = Body::from_chunks(chunks(&["12345", "6"]), None);
        let err = run(body.read_to_end(5)).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::BodyTooLarge);
        assert_eq!(err.status(), 413);
        assert_eq!(err.to_string(), "request body exceeds the limit of 5 bytes");
        // Exactly at the limit is fine.
        let body = Body::from_chunks(chunks(&["12345"]), None);
        assert_eq!(run(body.read_to_end(5)).unwrap(), "12345");
        // Announced length over the limit fails before reading.
        let body = Body::from_chunks(vec![Err(Error::msg("must not be read"))], Some(6));
        assert_eq!(
            run(body.read_to_end(5)).unwrap_err().kind(),
            ErrorKind::BodyTooLarge
        );
    }

    #[test]
    fn an_upstream_body_over_the_limit_is_the_upstream_s_fault() {
        let body = Body::from_chunks(chunks(&["12345", "6"]), None).upstream();
        let err = run(body.read_to_end(5)).unwrap_err();
        assert_eq!((err.kind(), err.status()), (ErrorKind::Fetch, 502));
        assert_eq!(
            err.to_string(),
            "upstream response body exceeds the limit of 5 bytes"
        );
        let body = Body::from_chunks(vec![], Some(6)).upstream();
        assert_eq!(run(body.read_to_end(5)).unwrap_err().status(), 502);
    }

    #[test]
    fn read_to_end_propagates_stream_errors() {
        let body = Body::from_chunks(
            vec![
                Ok(Bytes::from_static(b"x")),
                Err(Error::new(ErrorKind::Io, "reset")),
            ],
            None,
        );
        assert_eq!(
            run(body.read_to_end(100)).unwrap_err().kind(),
            ErrorKind::Io
        );
    }

    #[cfg(feature = "json")]
    #[test]
    fn json_parses_or_answers_400() {
        let json = |parts: &[&'static str], limit| {
            let req = Request::for_test(
                Method::POST,
                "/",
                &[],
                Body::from_chunks(chunks(parts), None),
            );
            run(req.json::<std::collections::BTreeMap<String, u32>>(limit))
        };
        let ok = json(&["{\"a\":", " 1}"], 100).unwrap();
        assert_eq!(ok["a"], 1);
        let bad = json(&["{\"a\": \"x\"}"], 100).unwrap_err();
        assert_eq!((bad.kind(), bad.status()), (ErrorKind::BadRequest, 400));
        assert!(bad.to_string().starts_with("invalid JSON body: "), "{bad}");
        let big = json(&["{\"a\": 1}"], 3).unwrap_err();
        assert_eq!(big.status(), 413);
    }

    #[test]
    fn uri_forms() {
        let u = build_uri(
            Some("https".into()),
            Some("example.com".into()),
            Some("/a?b=1".into()),
        )
        .unwrap();
        assert_eq!(u.to_string(), "https://example.com/a?b=1");
        let u = build_uri(Some("https".into()), None, Some("/a".into())).unwrap();
        assert_eq!(u.to_string(), "/a");
        let u = build_uri(None, Some("h:8080".into()), None).unwrap();
        assert_eq!(u.to_string(), "http://h:8080/");
        let u = build_uri(None, None, None).unwrap();
        assert_eq!(u.path(), "/");
        assert!(build_uri(None, None, Some("/a b".into())).is_err());
    }

    #[test]
    fn methods() {
        assert_eq!(method_from_wasi(WasiMethod::Get).unwrap(), Method::GET);
        assert_eq!(
            method_from_wasi(WasiMethod::Other("PURGE".into()))
                .unwrap()
                .as_str(),
            "PURGE"
        );
        assert!(method_from_wasi(WasiMethod::Other("BAD METHOD".into())).is_err());
    }

    #[test]
    fn content_length_parsing() {
        let h = headers_from_entries(vec![("content-length".into(), b"42".to_vec())]).unwrap();
        assert_eq!(content_length(&h), Some(42));
        let h = headers_from_entries(vec![("content-length".into(), b"x".to_vec())]).unwrap();
        assert_eq!(content_length(&h), None);
        assert_eq!(content_length(&HeaderMap::new()), None);
    }

    /// Attack review of trailers: more fields than a `HeaderMap` holds (a host with its
    /// header limits raised) are the request's error, not a trap of the guest.
    #[test]
    fn more_fields_than_a_header_map_holds_are_an_error_not_a_panic() {
        let repeated = vec![("x-a".to_string(), b"1".to_vec()); 30_000];
        let distinct = (0..30_000)
            .map(|i| (format!("x-{i}"), b"1".to_vec()))
            .collect();
        for entries in [repeated, distinct] {
            let err = headers_from_entries(entries).unwrap_err();
            assert!(
                err.to_string().contains("more than a HeaderMap holds"),
                "{err}"
            );
        }
        let fine = vec![("x-a".to_string(), b"1".to_vec()); 1_000];
        assert_eq!(headers_from_entries(fine).unwrap().len(), 1_000);
    }
}
