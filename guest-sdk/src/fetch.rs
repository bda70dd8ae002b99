//! Outbound HTTP from a handler: [`fetch`] sends a request and hands back the
//! response as soon as its head arrives, streaming both bodies.
//!
//! Built on the same pieces as `wstd::http::Client` (wstd's reactor, its
//! async WASI streams and pollables) but not on `Client::send` itself: that
//! returns only once the whole request body is sent, so an origin that
//! answers while it reads (an echo, a transcoder) would deadlock against a
//! handler that must read the answer to make room for more request body.
//! Here the request body is sent by a task of its own.

use bytes::Bytes;
use http::HeaderMap;
use wasip2::http::outgoing_handler;
use wasip2::http::types::{
    ErrorCode, Fields, IncomingResponse, Method as WasiMethod, OutgoingBody, OutgoingRequest,
    Scheme,
};
use wstd::io::AsyncOutputStream;
use wstd::runtime::AsyncPollable;

use crate::error::{Error, ErrorKind};
use crate::request::{Body, content_length, headers_from_entries};

/// Send `request` to the URL it names and return the response once its
/// status and headers have arrived; read its body with
/// [`FetchResponse::into_body`] as it streams in.
///
/// The URL must be absolute (`http://` or `https://` with a host). The
/// request body is anything that converts into a [`FetchBody`]: `()`, bytes,
/// a string, or a [`Body`] — an incoming request's body is streamed through
/// chunk by chunk as the origin takes it, never held whole.
///
/// The host decides where a handler may connect: wedge denies every
/// destination not named by `--allow-outbound`, which fails here with
/// [`ErrorKind::FetchDenied`]. Any other failure to get a response
/// (connection refused or timed out, too many requests in flight, a
/// protocol error) is [`ErrorKind::Fetch`]. Both answer `502` when returned
/// from a handler with `?`.
///
/// ```no_run
/// use wedge_sdk::{Error, Request, Response, fetch, http};
///
/// // POST the incoming body to an upstream service and stream its answer back.
/// async fn handle(req: Request) -> Result<Response, Error> {
///     let upstream = http::Request::post("http://127.0.0.1:9000/transcode")
///         .header("content-type", "application/octet-stream")
///         .body(req.into_body())
///         .map_err(Error::msg)?;
///     let answer = fetch(upstream).await?;
///     let status = answer.status();
///     let mut body = answer.into_body();
///     Ok(Response::stream(status, move |mut w| async move {
///         while let Some(chunk) = body.chunk().await {
///             w.write(&chunk?).await?;
///         }
///         Ok(())
///     }))
/// }
/// # wedge_sdk::export_handler!(handle);
/// ```
pub async fn fetch<B: Into<FetchBody>>(request: http::Request<B>) -> Result<FetchResponse, Error> {
    let (parts, body) = request.into_parts();
    let outgoing = outgoing_request(&parts)?;
    let wasi_body = outgoing
        .body()
        .map_err(|()| Error::msg("fetch: the request body was already taken"))?;
    let pending = outgoing_handler::handle(outgoing, None).map_err(|e| failed(&parts.uri, e))?;
    // The body goes out beside the wait for the response (and after it), so
    // the origin may answer before it has read everything.
    wstd::runtime::spawn(send_body(body.into(), wasi_body)).detach();
    AsyncPollable::new(pending.subscribe()).wait_for().await;
    let response = pending
        .get()
        .expect("a response is ready once its pollable is")
        .expect("a response is taken once")
        .map_err(|e| failed(&parts.uri, e))?;
    FetchResponse::from_wasi(response)
}

/// The body of a [`fetch`] request: empty, a buffer, or a [`Body`] streamed
/// through as it is read.
///
/// ```
/// use wedge_sdk::FetchBody;
///
/// let _: FetchBody = ().into();
/// let _: FetchBody = "text".into();
/// let _: FetchBody = vec![1u8, 2, 3].into();
/// ```
pub struct FetchBody(Source);

enum Source {
    Full(Bytes),
    Stream(Body),
}

impl From<()> for FetchBody {
    fn from((): ()) -> Self {
        FetchBody(Source::Full(Bytes::new()))
    }
}

impl From<Bytes> for FetchBody {
    fn from(bytes: Bytes) -> Self {
        FetchBody(Source::Full(bytes))
    }
}

impl From<Vec<u8>> for FetchBody {
    fn from(bytes: Vec<u8>) -> Self {
        Bytes::from(bytes).into()
    }
}

impl From<&'static str> for FetchBody {
    fn from(text: &'static str) -> Self {
        Bytes::from_static(text.as_bytes()).into()
    }
}

impl From<String> for FetchBody {
    fn from(text: String) -> Self {
        Bytes::from(text).into()
    }
}

impl From<Body> for FetchBody {
    fn from(body: Body) -> Self {
        FetchBody(Source::Stream(body))
    }
}

impl std::fmt::Debug for FetchBody {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.0 {
            Source::Full(bytes) => write!(f, "FetchBody({} bytes)", bytes.len()),
            Source::Stream(_) => f.write_str("FetchBody(stream)"),
        }
    }
}

/// The answer to a [`fetch`]: status, headers, and the body as a stream.
#[derive(Debug)]
pub struct FetchResponse {
    status: u16,
    headers: HeaderMap,
    body: Body,
}

impl FetchResponse {
    /// The status code, e.g. `200`.
    ///
    /// ```no_run
    /// # async fn f() -> Result<(), wedge_sdk::Error> {
    /// let request = wedge_sdk::http::Request::get("http://127.0.0.1:9000/").body(()).unwrap();
    /// let answer = wedge_sdk::fetch(request).await?;
    /// assert_eq!(answer.status(), 200);
    /// # Ok(()) }
    /// ```
    pub fn status(&self) -> u16 {
        self.status
    }

    /// All response headers.
    ///
    /// ```no_run
    /// # async fn f() -> Result<(), wedge_sdk::Error> {
    /// let request = wedge_sdk::http::Request::get("http://127.0.0.1:9000/").body(()).unwrap();
    /// let answer = wedge_sdk::fetch(request).await?;
    /// for (name, value) in answer.headers() {
    ///     println!("{name}: {value:?}");
    /// }
    /// # Ok(()) }
    /// ```
    pub fn headers(&self) -> &HeaderMap {
        &self.headers
    }

    /// The first value of header `name` (case-insensitive), or `None` if it
    /// is absent or is not visible ASCII text.
    ///
    /// ```no_run
    /// # async fn f() -> Result<(), wedge_sdk::Error> {
    /// let request = wedge_sdk::http::Request::get("http://127.0.0.1:9000/").body(()).unwrap();
    /// let answer = wedge_sdk::fetch(request).await?;
    /// let kind = answer.header("content-type").unwrap_or("unknown");
    /// # Ok(()) }
    /// ```
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name)?.to_str().ok()
    }

    /// The body, to stream with [`Body::chunk`] or collect with
    /// [`Body::read_to_end`]. The origin sends more only as it is read.
    ///
    /// ```no_run
    /// # async fn f() -> Result<(), wedge_sdk::Error> {
    /// let request = wedge_sdk::http::Request::get("http://127.0.0.1:9000/").body(()).unwrap();
    /// let text = wedge_sdk::fetch(request).await?.into_body().read_to_end(64 * 1024).await?;
    /// # Ok(()) }
    /// ```
    pub fn into_body(self) -> Body {
        self.body
    }

    fn from_wasi(response: IncomingResponse) -> Result<Self, Error> {
        let status = response.status();
        let headers = headers_from_entries(response.headers().entries())
            .map_err(|e| Error::new(ErrorKind::Fetch, format_args!("fetch: response: {e}")))?;
        let body = Body::from_wasi_response(response, content_length(&headers))?;
        Ok(FetchResponse {
            status,
            headers,
            body,
        })
    }
}

/// The host's `outgoing-request` for `parts`, which must name an absolute URL.
fn outgoing_request(parts: &http::request::Parts) -> Result<OutgoingRequest, Error> {
    let uri = &parts.uri;
    let (Some(scheme), Some(authority)) = (uri.scheme_str(), uri.authority()) else {
        return Err(Error::msg(format_args!(
            "fetch needs an absolute URL like http://host/path, not {uri:?}"
        )));
    };
    let fields: Vec<(String, Vec<u8>)> = parts
        .headers
        .iter()
        .map(|(name, value)| (name.as_str().to_owned(), value.as_bytes().to_vec()))
        .collect();
    let headers = Fields::from_list(&fields).map_err(|e| {
        Error::msg(format_args!(
            "fetch: request headers rejected by the host: {e:?}"
        ))
    })?;
    let request = OutgoingRequest::new(headers);
    let scheme = match scheme {
        "http" => Scheme::Http,
        "https" => Scheme::Https,
        other => Scheme::Other(other.to_owned()),
    };
    let path = uri.path_and_query().map_or("/", |pq| pq.as_str());
    let rejected = |what: &str| Error::msg(format_args!("fetch: the host rejected the {what}"));
    request
        .set_method(&method_to_wasi(&parts.method))
        .map_err(|()| rejected("method"))?;
    request
        .set_scheme(Some(&scheme))
        .map_err(|()| rejected("scheme"))?;
    request
        .set_authority(Some(authority.as_str()))
        .map_err(|()| rejected("authority"))?;
    request
        .set_path_with_query(Some(path))
        .map_err(|()| rejected("path"))?;
    Ok(request)
}

fn method_to_wasi(method: &http::Method) -> WasiMethod {
    use http::Method as M;
    match *method {
        M::GET => WasiMethod::Get,
        M::HEAD => WasiMethod::Head,
        M::POST => WasiMethod::Post,
        M::PUT => WasiMethod::Put,
        M::DELETE => WasiMethod::Delete,
        M::CONNECT => WasiMethod::Connect,
        M::OPTIONS => WasiMethod::Options,
        M::TRACE => WasiMethod::Trace,
        M::PATCH => WasiMethod::Patch,
        _ => WasiMethod::Other(method.as_str().to_owned()),
    }
}

/// The error for a request that got no response.
fn failed(uri: &http::Uri, code: ErrorCode) -> Error {
    let kind = match code {
        ErrorCode::HttpRequestDenied => ErrorKind::FetchDenied,
        _ => ErrorKind::Fetch,
    };
    Error::new(kind, format_args!("fetch {uri}: {}", describe(&code)))
}

/// `ErrorCode::ConnectionTimeout` -> `connection timeout`; a payload is kept
/// as printed.
fn describe(code: &ErrorCode) -> String {
    let debug = format!("{code:?}");
    let debug = debug.strip_prefix("ErrorCode::").unwrap_or(&debug);
    let (name, payload) = debug.split_at(debug.find('(').unwrap_or(debug.len()));
    let mut words = String::with_capacity(debug.len() + 4);
    for (i, c) in name.char_indices() {
        if c.is_ascii_uppercase() && i > 0 {
            words.push(' ');
        }
        words.push(c.to_ascii_lowercase());
    }
    words + payload
}

/// Writes the request body into the host's stream and finishes it; on a
/// failure the body is dropped unfinished, which the host sees as aborted.
async fn send_body(body: FetchBody, wasi_body: OutgoingBody) {
    let stream = AsyncOutputStream::new(
        wasi_body
            .write()
            .expect("an outgoing body's stream is taken once"),
    );
    let result: Result<(), Error> = async {
        match body.0 {
            Source::Full(bytes) => stream.write_all(&bytes).await?,
            Source::Stream(mut body) => {
                while let Some(chunk) = body.chunk().await {
                    stream.write_all(&chunk?).await?;
                }
            }
        }
        Ok(stream.flush().await?)
    }
    .await;
    // The stream is a child of the body: it goes first.
    drop(stream);
    match result {
        Ok(()) => {
            if let Err(e) = OutgoingBody::finish(wasi_body, None) {
                eprintln!("wedge-sdk: fetch: finishing the request body failed: {e:?}");
            }
        }
        // Closed: the request failed or the origin stopped reading; fetch's
        // caller hears why from the response side.
        Err(e) if e.kind() == ErrorKind::Closed => {}
        Err(e) => eprintln!("wedge-sdk: fetch: request body aborted: {e}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_codes_read_as_words() {
        assert_eq!(
            describe(&ErrorCode::ConnectionTimeout),
            "connection timeout"
        );
        assert_eq!(
            describe(&ErrorCode::HttpRequestDenied),
            "http request denied"
        );
    }

    #[test]
    fn denied_is_its_own_kind_and_other_failures_are_fetch() {
        let uri: http::Uri = "http://example.com/x".parse().unwrap();
        let denied = failed(&uri, ErrorCode::HttpRequestDenied);
        assert_eq!(denied.kind(), ErrorKind::FetchDenied);
        assert_eq!(
            denied.to_string(),
            "fetch http://example.com/x: http request denied"
        );
        assert_eq!(
            failed(&uri, ErrorCode::ConnectionRefused).kind(),
            ErrorKind::Fetch
        );
    }

    #[test]
    fn standard_methods_map_to_their_own_variants() {
        assert!(matches!(
            method_to_wasi(&http::Method::PATCH),
            WasiMethod::Patch
        ));
        let custom = http::Method::from_bytes(b"PURGE").unwrap();
        assert!(matches!(method_to_wasi(&custom), WasiMethod::Other(m) if m == "PURGE"));
    }
}
