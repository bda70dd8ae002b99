//! `echo`: streams the request body back as it arrives, chunk by chunk,
//! never holding more than one chunk. Copies the request's `content-type`;
//! the response has no `content-length`.

use wedge_sdk::{Request, Response};

async fn handle(req: Request) -> Response {
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

wedge_sdk::export_handler!(handle);
