//! `proxy`: forwards each request to the origin named in its path and streams
//! both bodies through. `GET /http://127.0.0.1:9000/x?y=1` becomes
//! `GET http://127.0.0.1:9000/x?y=1` with the same method, headers (less the
//! hop-by-hop ones) and body; the origin's status, headers and body come back.
//!
//! The origin must be allowed by the host (`wedge serve --allow-outbound
//! 127.0.0.1:9000`); a denied one is answered `403`, an unreachable one `502`,
//! each with a one-line reason. (Once wedge offers wasi:config the origin will
//! come from the app's config instead of the path.)

use wedge_sdk::{Error, ErrorKind, FetchResponse, Request, Response, fetch, http};

/// Headers about one hop, not the message; the host refuses most of them.
const HOP_BY_HOP: [&str; 10] = [
    "connection",
    "keep-alive",
    "proxy-authenticate",
    "proxy-authorization",
    "proxy-connection",
    "te",
    "transfer-encoding",
    "upgrade",
    "host",
    "http2-settings",
];

async fn handle(req: Request) -> Result<Response, Error> {
    let target = upstream_url(&req).ok_or_else(|| {
        Error::http(
            400,
            "usage: METHOD /http://ORIGIN/PATH forwards to http://ORIGIN/PATH",
        )
    })?;
    let mut upstream = http::Request::builder().method(req.method()).uri(target);
    for (name, value) in req.headers() {
        if !HOP_BY_HOP.contains(&name.as_str()) {
            upstream = upstream.header(name, value);
        }
    }
    let request = upstream
        .body(req.into_body())
        .map_err(|e| Error::http(400, format_args!("bad upstream request: {e}")))?;
    match fetch(request).await {
        Ok(answer) => Ok(relay(answer)),
        Err(e) if e.kind() == ErrorKind::FetchDenied => Err(Error::http(403, e)),
        // 502, with the reason.
        Err(e) => Err(e),
    }
}

/// The absolute URL after the leading `/`, if it is one.
fn upstream_url(req: &Request) -> Option<String> {
    let target = req.uri().path_and_query()?.as_str().strip_prefix('/')?;
    let absolute = target.starts_with("http://") || target.starts_with("https://");
    absolute.then(|| target.to_owned())
}

/// The origin's answer, its body streamed through chunk by chunk.
fn relay(answer: FetchResponse) -> Response {
    let status = answer.status();
    let headers = answer.headers().clone();
    let mut body = answer.into_body();
    let mut response = Response::stream(status, move |mut w| async move {
        while let Some(chunk) = body.chunk().await {
            w.write(&chunk?).await?;
        }
        Ok(())
    });
    for (name, value) in &headers {
        if !HOP_BY_HOP.contains(&name.as_str()) {
            response = response.append_header(name, value.as_bytes());
        }
    }
    response
}

wedge_sdk::export_handler!(handle);
