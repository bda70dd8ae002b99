//! `echo`: streams the request body back as it arrives, chunk by chunk,
//! never holding more than one chunk. Copies the request's `content-type`;
//! the response has no `content-length`.
//!
//! `/trailers` instead reads the body to its end and answers its length and the
//! trailers the client sent after it, one `name: value` line each, in order.

use wedge_sdk::{Body, Error, IntoResponse, Request, Response};

async fn handle(req: Request) -> Response {
    if req.app_path() == "/trailers" {
        return trailers(req.into_body()).await.into_response();
    }
    let content_type = req.header("content-type").map(str::to_owned);
    let mut body = req.into_body();
    let response = Response::stream(200, move |mut w| async move {
        while let Some(chunk) = body.chunk().await {
            w.write(&chunk?).await?;
            w.flush().await?;
        }
        Ok(())
    });
    match content_type {
        Some(ct) => response.with_header("content-type", ct),
        None => response,
    }
}

/// `body: N bytes`, then each trailer as `name: value`.
async fn trailers(mut body: Body) -> Result<Response, Error> {
    let mut len = 0;
    while let Some(chunk) = body.chunk().await {
        len += chunk?.len();
    }
    let mut report = format!("body: {len} bytes\n");
    for (name, value) in &body.trailers().await? {
        report += &format!("{name}: {}\n", String::from_utf8_lossy(value.as_bytes()));
    }
    Ok(Response::text(report))
}

wedge_sdk::export_handler!(handle);
