//! `echo-p3`: a WASI 0.3 (p3) handler streaming the request body back as it is
//! read, one chunk (at most 16 KiB) at a time, never the whole body. Copies the
//! request's `content-type`; the response has no `content-length`.

use wasip3::http::types::{ErrorCode, Fields, Request, Response};
use wasip3::wit_bindgen::StreamResult;
use wasip3::{wit_future, wit_stream};

const CHUNK: usize = 16 * 1024;

struct Echo;

impl wasip3::exports::http::handler::Guest for Echo {
    async fn handle(request: Request) -> Result<Response, ErrorCode> {
        let content_type = request.get_headers().get("content-type");
        let headers = Fields::new();
        for value in content_type {
            headers
                .append("content-type", &value)
                .map_err(|e| ErrorCode::InternalError(Some(format!("{e:?}"))))?;
        }
        // Tells the host how reading the request body went: `Ok` once this
        // writer is dropped after the last chunk.
        let (read_result_tx, read_result_rx) = wit_future::new(|| Ok(()));
        let (mut request_body, _trailers) = Request::consume_body(request, read_result_rx);
        let (mut body_tx, body_rx) = wit_stream::new();
        let (trailers_tx, trailers_rx) = wit_future::new(|| Ok(None));
        let (response, _sent) = Response::new(headers, Some(body_rx), trailers_rx);
        drop(trailers_tx);
        wasip3::spawn(async move {
            let mut buf = Vec::with_capacity(CHUNK);
            loop {
                let (status, chunk) = request_body.read(buf).await;
                match status {
                    StreamResult::Complete(_) => {
                        // A peer that went away leaves the rest unwritten: stop.
                        if !body_tx.write_all(chunk).await.is_empty() {
                            break;
                        }
                    }
                    StreamResult::Dropped | StreamResult::Cancelled => break,
                }
                buf = Vec::with_capacity(CHUNK);
            }
            drop(read_result_tx);
        });
        Ok(response)
    }
}

wasip3::http::service::export!(Echo);
