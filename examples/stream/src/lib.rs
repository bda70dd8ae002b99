//! `stream`: a streamed response of 8 chunks of 1 KiB (chunk `i` is 1024
//! bytes of `b'a' + i`: `aaa…bbb…hhh`), flushed one by one; 8192 bytes in all,
//! no `content-length`.

use wedge_sdk::{Request, Response};

const CHUNKS: u8 = 8;
const CHUNK_LEN: usize = 1024;

async fn handle(_req: Request) -> Response {
    Response::stream(200, |mut w| async move {
        for i in 0..CHUNKS {
            w.write(&[b'a' + i; CHUNK_LEN]).await?;
            w.flush().await?;
        }
        Ok(())
    })
    .with_header("content-type", "text/plain; charset=utf-8")
}

wedge_sdk::export_handler!(handle);
