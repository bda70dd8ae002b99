//! `wedge dev`'s build, seen from the browser: while the last build failed, every
//! response says so in `x-wedge-build: failed`, and HTML pages of the last version
//! that built carry a banner naming the first error and linking to the error page.
//! Two paths are wedge's, not the app's:
//!
//! - `/_wedge/build`: the error page (the errors as rustc coloured them), or a
//!   page saying the last build succeeded;
//! - `/_wedge/events`: server-sent events, one now and one each time the build's
//!   state changes: `ok`, or `failed ID` (ID names the errors). The pages reload
//!   when it is not the state they show; the banner when it is `ok`. The stream
//!   ends when wedge begins to shut down, so it holds no drain up.
//!
//! Any other path under `/_wedge/` is a 404. A banner goes before the page's
//! `</body>` (at its end without one) as the body streams through, so the response
//! loses its `content-length`, and its validators and caching with them (a page
//! cached with the banner must not come back after a fix); a compressed body
//! (`content-encoding`) is left as it is.

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, ready};

use bytes::Bytes;
use http::{HeaderValue, Method, Request, Response, StatusCode, header};
use http_body::{Body, Frame, SizeHint};
use http_body_util::BodyExt;
use tokio::sync::watch;

use super::ansi;
use super::build_failure::{
    self, BUILD_HEADER, BuildFailure, EVENTS_PATH, built_page, mark_failed, reload_script,
};
use super::response::plain;
use super::response_body::{BodyError, BoundBody, ResponseBody};

/// The error page's path.
pub const BUILD_PATH: &str = "/_wedge/build";
/// Where wedge's own paths are.
const RESERVED: &str = "/_wedge/";

/// The state of one app's build, shown to its requests.
pub struct DevOverlay {
    app: String,
    /// The last build's errors; `None` once one succeeded.
    status: watch::Sender<Option<Arc<BuildFailure>>>,
    /// Becomes true when wedge begins to shut down.
    draining: watch::Receiver<bool>,
}

impl DevOverlay {
    /// No build has failed yet; event streams end once `draining` is true.
    pub fn new(app: &str, draining: watch::Receiver<bool>) -> Self {
        DevOverlay {
            app: app.to_string(),
            status: watch::Sender::new(None),
            draining,
        }
    }

    /// The last build failed with `failure`.
    pub fn failed(&self, failure: Arc<BuildFailure>) {
        self.status.send_if_modified(|status| {
            let changed = status
                .as_ref()
                .is_none_or(|old| old.errors != failure.errors);
            *status = Some(failure);
            changed
        });
    }

    /// The last build succeeded.
    pub fn built(&self) {
        self.status
            .send_if_modified(|status| status.take().is_some());
    }

    /// wedge's answer to a request for one of its paths; `None` for the app's.
    pub fn answer<B>(&self, request: &Request<B>) -> Option<Response<ResponseBody>> {
        let path = request.uri().path();
        if !path.starts_with(RESERVED) {
            return None;
        }
        if !matches!(*request.method(), Method::GET | Method::HEAD) {
            let mut response = plain(
                StatusCode::METHOD_NOT_ALLOWED,
                format!("405 Method Not Allowed: {path} is wedge dev's, for GET\n"),
            );
            response
                .headers_mut()
                .insert(header::ALLOW, HeaderValue::from_static("GET, HEAD"));
            return Some(self.marked(response));
        }
        let response = match path {
            BUILD_PATH => match self.failure() {
                Some(failure) => build_failure::html(failure.page()),
                None => build_failure::html(built_page(&self.app)),
            },
            EVENTS_PATH => self.events(),
            _ => plain(
                StatusCode::NOT_FOUND,
                format!(
                    "404 Not Found: {RESERVED} is wedge dev's; it serves {BUILD_PATH} and {EVENTS_PATH}\n"
                ),
            ),
        };
        Some(self.marked(response))
    }

    /// `response` (the app's, or wedge's) as it leaves while the build is broken:
    /// marked, and an HTML page with the banner; untouched once a build succeeded. A
    /// response already marked is wedge's own page and is left as it is.
    pub fn decorate(&self, mut response: Response<ResponseBody>) -> Response<ResponseBody> {
        let Some(failure) = self.failure() else {
            return response;
        };
        if response.headers().contains_key(BUILD_HEADER) {
            return response;
        }
        mark_failed(&mut response);
        if !takes_a_banner(&response) {
            return response;
        }
        let headers = response.headers_mut();
        for name in [header::CONTENT_LENGTH, header::ETAG, header::LAST_MODIFIED] {
            headers.remove(name);
        }
        headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
        let banner = Bytes::from(banner(&failure));
        response.map(|body| ResponseBody::bound(Spliced::new(body, banner)))
    }

    fn failure(&self) -> Option<Arc<BuildFailure>> {
        self.status.borrow().clone()
    }

    /// `response` marked if the build is broken now.
    fn marked(&self, mut response: Response<ResponseBody>) -> Response<ResponseBody> {
        if self.failure().is_some() {
            mark_failed(&mut response);
        }
        response
    }

    /// The event stream: the state now, then each change, until wedge shuts down.
    fn events(&self) -> Response<ResponseBody> {
        let start = (self.status.subscribe(), self.draining.clone(), true);
        let stream =
            futures_util::stream::unfold(start, |(mut status, mut draining, first)| async move {
                if !first {
                    tokio::select! {
                        changed = status.changed() => changed.ok()?,
                        _ = draining.wait_for(|stop| *stop) => return None,
                    }
                }
                let data = match &*status.borrow_and_update() {
                    Some(failure) => format!("failed {}", failure.id()),
                    None => "ok".to_string(),
                };
                // Reconnect soon after a restart of wedge dev, and find the state then.
                let retry = if first { "retry: 1000\n" } else { "" };
                let event = Frame::data(Bytes::from(format!("{retry}data: {data}\n\n")));
                Some((Ok::<_, BodyError>(event), (status, draining, false)))
            });
        let body = http_body_util::StreamBody::new(stream).boxed_unsync();
        let mut response = Response::new(ResponseBody::Stream(body));
        let headers = response.headers_mut();
        headers.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("text/event-stream"),
        );
        headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
        response
    }
}

/// Whether the banner goes into `response`: an uncompressed HTML page with a body.
fn takes_a_banner(response: &Response<ResponseBody>) -> bool {
    let status = response.status();
    let bodiless = status.is_informational()
        || status == StatusCode::NO_CONTENT
        || status == StatusCode::NOT_MODIFIED
        || status == StatusCode::PARTIAL_CONTENT;
    let field = |name| {
        response
            .headers()
            .get(name)
            .and_then(|v: &HeaderValue| v.to_str().ok())
            .map(|v| v.trim().to_ascii_lowercase())
    };
    let html = field(header::CONTENT_TYPE)
        .is_some_and(|t| t.split(';').next().map(str::trim) == Some("text/html"));
    let encoded = field(header::CONTENT_ENCODING).is_some_and(|e| e != "identity");
    html && !bodiless && !encoded
}

/// The banner: the app, the first error and where, a link to the error page, and a
/// script that reloads the page once a build succeeds. Styled inline and reset
/// (`all: initial`), so that the page's own CSS leaves it alone.
fn banner(failure: &BuildFailure) -> String {
    let (headline, location) = failure.headline();
    let location = location
        .map(|at| format!(" at {}", ansi::escape(&at)))
        .unwrap_or_default();
    format!(
        concat!(
            "<div id=\"wedge-build-failed\" role=\"alert\" style=\"all:initial;position:fixed;",
            "z-index:2147483647;left:12px;right:12px;bottom:12px;display:flex;gap:12px;",
            "align-items:center;padding:10px 14px;border-radius:8px;background:#b3261e;",
            "color:#fff;font:14px/1.4 system-ui,sans-serif;box-shadow:0 4px 16px rgba(0,0,0,.35)\">",
            "<strong style=\"all:unset;font-weight:bold;white-space:nowrap\">{app} failed to build</strong>",
            "<code style=\"all:unset;font-family:ui-monospace,monospace;flex:1;overflow:hidden;",
            "text-overflow:ellipsis;white-space:nowrap\">{headline}{location}</code>",
            "<span style=\"all:unset;opacity:.85;white-space:nowrap\">this is the last version that built</span>",
            "<a href=\"{path}\" style=\"all:unset;cursor:pointer;font-weight:bold;",
            "text-decoration:underline;white-space:nowrap\">Show the errors</a></div>",
            "<script>{script}</script>\n",
        ),
        app = ansi::escape(&failure.app),
        headline = ansi::escape(&headline),
        location = location,
        path = BUILD_PATH,
        script = reload_script("data => data === \"ok\""),
    )
}

/// An HTML body with the banner spliced in before its `</body>`, or at its end.
pub struct Spliced {
    inner: ResponseBody,
    /// The banner, until it went out.
    banner: Option<Bytes>,
    /// The end of the body so far, held back while it may begin `</body`.
    held: Vec<u8>,
    /// The inner body's trailers, sent after the banner.
    trailers: Option<Frame<Bytes>>,
    /// The inner body has ended.
    ended: bool,
}

/// Where the banner goes: before the first of these (any case).
const MARK: &[u8] = b"</body";

impl Spliced {
    fn new(inner: ResponseBody, banner: Bytes) -> Self {
        Spliced {
            inner,
            banner: Some(banner),
            held: Vec::new(),
            trailers: None,
            ended: false,
        }
    }

    /// What of `data` goes out now (the banner is still to come).
    fn splice(&mut self, data: Bytes) -> Bytes {
        let data = if self.held.is_empty() {
            data
        } else {
            let mut joined = std::mem::take(&mut self.held);
            joined.extend_from_slice(&data);
            Bytes::from(joined)
        };
        let found = data
            .windows(MARK.len())
            .position(|window| window.eq_ignore_ascii_case(MARK));
        if let Some(at) = found {
            let banner = self.banner.take().expect("splicing before the banner went");
            let mut out = Vec::with_capacity(data.len() + banner.len());
            out.extend_from_slice(&data[..at]);
            out.extend_from_slice(&banner);
            out.extend_from_slice(&data[at..]);
            return Bytes::from(out);
        }
        // The longest end of `data` that may begin the mark, held for the next chunk.
        let held = (1..MARK.len())
            .rev()
            .find(|&n| n <= data.len() && data[data.len() - n..].eq_ignore_ascii_case(&MARK[..n]))
            .unwrap_or(0);
        self.held = data[data.len() - held..].to_vec();
        data.slice(..data.len() - held)
    }

    /// What is held back and the banner, at the body's end (no `</body`).
    fn rest(&mut self) -> Option<Bytes> {
        let banner = self.banner.take()?;
        let mut out = std::mem::take(&mut self.held);
        out.extend_from_slice(&banner);
        Some(Bytes::from(out))
    }
}

impl BoundBody for Spliced {
    /// Asked by an engine whose stream is stalled: the inner body's answer.
    fn poll_cut_off(&mut self, cx: &mut Context<'_>) -> Poll<()> {
        self.inner.poll_cut_off(cx)
    }
}

impl Body for Spliced {
    type Data = Bytes;
    type Error = BodyError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BodyError>>> {
        let this = self.get_mut();
        loop {
            if this.banner.is_none() {
                if let Some(trailers) = this.trailers.take() {
                    return Poll::Ready(Some(Ok(trailers)));
                }
                if this.ended {
                    return Poll::Ready(None);
                }
                return Pin::new(&mut this.inner).poll_frame(cx);
            }
            match ready!(Pin::new(&mut this.inner).poll_frame(cx)) {
                Some(Ok(frame)) => match frame.into_data() {
                    Ok(data) => {
                        let out = this.splice(data);
                        if !out.is_empty() {
                            return Poll::Ready(Some(Ok(Frame::data(out))));
                        }
                    }
                    Err(trailers) => {
                        this.trailers = Some(trailers);
                        return Poll::Ready(this.rest().map(|rest| Ok(Frame::data(rest))));
                    }
                },
                Some(Err(err)) => return Poll::Ready(Some(Err(err))),
                None => {
                    this.ended = true;
                    return Poll::Ready(this.rest().map(|rest| Ok(Frame::data(rest))));
                }
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.banner.is_none()
            && self.trailers.is_none()
            && (self.ended || self.inner.is_end_stream())
    }

    fn size_hint(&self) -> SizeHint {
        SizeHint::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http_body_util::BodyExt;

    fn failure(errors: &str) -> Arc<BuildFailure> {
        Arc::new(BuildFailure {
            app: "greeter".into(),
            errors: errors.into(),
        })
    }

    fn overlay() -> (DevOverlay, watch::Sender<bool>) {
        let (stop, draining) = watch::channel(false);
        (DevOverlay::new("greeter", draining), stop)
    }

    /// An app's response: `content_type`, a content-length, and `chunks` as its body.
    fn app_response(content_type: &str, chunks: &[&'static str]) -> Response<ResponseBody> {
        let len: usize = chunks.iter().map(|c| c.len()).sum();
        let frames: Vec<Result<Frame<Bytes>, BodyError>> = chunks
            .iter()
            .map(|c| Ok(Frame::data(Bytes::from_static(c.as_bytes()))))
            .collect();
        let body = http_body_util::StreamBody::new(futures_util::stream::iter(frames));
        Response::builder()
            .header(header::CONTENT_TYPE, content_type)
            .header(header::CONTENT_LENGTH, len)
            .header(header::ETAG, "\"v1\"")
            .body(ResponseBody::Stream(body.boxed_unsync()))
            .unwrap()
    }

    async fn text(response: Response<ResponseBody>) -> String {
        let bytes = response.into_body().collect().await.unwrap().to_bytes();
        String::from_utf8(bytes.to_vec()).unwrap()
    }

    fn request(method: Method, path: &str) -> Request<()> {
        Request::builder()
            .method(method)
            .uri(path)
            .body(())
            .unwrap()
    }

    #[tokio::test]
    async fn a_good_build_leaves_responses_and_paths_to_the_app() {
        let (overlay, _stop) = overlay();
        assert!(overlay.answer(&request(Method::GET, "/")).is_none());
        assert!(overlay.answer(&request(Method::GET, "/_wedgex")).is_none());
        let response = overlay.decorate(app_response("text/html", &["<body>hi</body>"]));
        assert!(!response.headers().contains_key(BUILD_HEADER));
        assert_eq!(response.headers()[header::CONTENT_LENGTH], "15");
        assert_eq!(text(response).await, "<body>hi</body>");
        let page = text(overlay.answer(&request(Method::GET, BUILD_PATH)).unwrap()).await;
        assert!(
            page.contains("The last build of greeter succeeded"),
            "{page}"
        );
    }

    #[tokio::test]
    async fn a_broken_build_marks_everything_and_puts_a_banner_in_html_before_body_end() {
        let (overlay, _stop) = overlay();
        overlay.failed(failure("error: expected `;`\n --> src/lib.rs:4:5\n"));
        // Split inside the mark, in another case.
        let response = overlay.decorate(app_response(
            "Text/HTML; charset=utf-8",
            &["<html><body>hi</BO", "DY></html>"],
        ));
        assert_eq!(response.headers()[BUILD_HEADER], "failed");
        for gone in [header::CONTENT_LENGTH, header::ETAG] {
            assert!(!response.headers().contains_key(&gone), "{gone}");
        }
        assert_eq!(response.headers()[header::CACHE_CONTROL], "no-store");
        let page = text(response).await;
        let (before, after) = page.split_once("<div id=\"wedge-build-failed\"").unwrap();
        assert_eq!(before, "<html><body>hi");
        assert!(after.ends_with("</script>\n</BODY></html>"), "{after}");
        assert!(
            after.contains("error: expected `;` at src/lib.rs:4:5</code>"),
            "{after}"
        );
        assert!(after.contains("href=\"/_wedge/build\""), "{after}");
        assert!(after.contains("data === \"ok\""), "{after}");
    }

    #[tokio::test]
    async fn without_body_end_the_banner_ends_the_page_and_other_types_only_get_the_mark() {
        let (overlay, _stop) = overlay();
        overlay.failed(failure("error: x\n"));
        let page =
            text(overlay.decorate(app_response("text/html", &["<p>hi</", "p>", "</bod"]))).await;
        assert!(
            page.starts_with("<p>hi</p></bod<div id=\"wedge-build-failed\""),
            "{page}"
        );
        assert!(page.ends_with("</script>\n"), "{page}");

        for (content_type, encoding) in [
            ("application/json", None),
            ("text/plain", None),
            ("text/html", Some("gzip")),
        ] {
            let mut response = app_response(content_type, &["<body></body>"]);
            if let Some(encoding) = encoding {
                response
                    .headers_mut()
                    .insert(header::CONTENT_ENCODING, HeaderValue::from_static(encoding));
            }
            let response = overlay.decorate(response);
            assert_eq!(response.headers()[BUILD_HEADER], "failed");
            assert_eq!(response.headers()[header::CONTENT_LENGTH], "13");
            assert_eq!(text(response).await, "<body></body>", "{content_type}");
        }
    }

    #[tokio::test]
    async fn the_build_page_and_events_follow_the_state_and_end_at_shutdown() {
        let (overlay, stop) = overlay();
        overlay.failed(failure("error: first\n"));
        let page = overlay.answer(&request(Method::GET, BUILD_PATH)).unwrap();
        assert_eq!(page.headers()[BUILD_HEADER], "failed");
        // wedge's own page gets no banner.
        let page = text(overlay.decorate(page)).await;
        assert!(page.contains("greeter failed to build"), "{page}");
        assert!(!page.contains("wedge-build-failed"), "{page}");

        let events = overlay.answer(&request(Method::GET, EVENTS_PATH)).unwrap();
        assert_eq!(events.headers()[header::CONTENT_TYPE], "text/event-stream");
        let mut events = events.into_body();
        let mut next = async || {
            let frame = events.frame().await?.unwrap();
            Some(String::from_utf8(frame.into_data().unwrap().to_vec()).unwrap())
        };
        let first = failure("error: first\n").id();
        assert_eq!(
            next().await.unwrap(),
            format!("retry: 1000\ndata: failed {first}\n\n")
        );
        overlay.failed(failure("error: first\n")); // the same errors: no event
        overlay.failed(failure("error: second\n"));
        let second = failure("error: second\n").id();
        assert_eq!(next().await.unwrap(), format!("data: failed {second}\n\n"));
        overlay.built();
        assert_eq!(next().await.unwrap(), "data: ok\n\n");
        stop.send_replace(true);
        assert_eq!(next().await, None);

        let other = overlay.answer(&request(Method::GET, "/_wedge/x")).unwrap();
        assert_eq!(other.status(), 404);
        let post = overlay.answer(&request(Method::POST, BUILD_PATH)).unwrap();
        assert_eq!(post.status(), 405);
    }
}
