//! `hello-p3`: the smallest WASI 0.3 (p3) handler, on the raw `wasip3` bindings.
//! Exports `wasi:http/handler@0.3.0` and answers every request with
//! `200 Hello, world!\n` (`content-type: text/plain; charset=utf-8`,
//! `content-length: 14`). The body is written by a task spawned in the guest:
//! the handler must return the response before anyone reads its body stream.

use wasip3::http::types::{ErrorCode, Fields, Request, Response};
use wasip3::{wit_future, wit_stream};

const BODY: &[u8] = b"Hello, world!\n";

struct Hello;

impl wasip3::exports::http::handler::Guest for Hello {
    async fn handle(_request: Request) -> Result<Response, ErrorCode> {
        let headers = Fields::from_list(&[
            (
                "content-type".to_string(),
                b"text/plain; charset=utf-8".to_vec(),
            ),
            (
                "content-length".to_string(),
                BODY.len().to_string().into_bytes(),
            ),
        ])
        .map_err(|e| ErrorCode::InternalError(Some(format!("{e:?}"))))?;
        let (mut body_tx, body_rx) = wit_stream::new();
        // No trailers: the writer, dropped unwritten, resolves the future to `Ok(None)`.
        let (trailers_tx, trailers_rx) = wit_future::new(|| Ok(None));
        let (response, _sent) = Response::new(headers, Some(body_rx), trailers_rx);
        drop(trailers_tx);
        wasip3::spawn(async move {
            let rest = body_tx.write_all(BODY.to_vec()).await;
            debug_assert!(rest.is_empty());
        });
        Ok(response)
    }
}

wasip3::http::service::export!(Hello);
