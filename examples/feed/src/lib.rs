//! `feed`: an endless streamed response. Every 5 ms it writes one 16 KiB
//! chunk: the line `chunk N\n` (N counting from 0), padded with `.` to 16 KiB
//! and ending in `\n`. Each write waits for the host's credit, so a client
//! that reads slowly slows the feed down instead of growing its memory; a
//! client that goes away ends the handler. Only wedge's limits (`--wall-time`,
//! `--cpu-time`) end it otherwise.

use std::io::Write;
use std::time::Duration;
use wedge_sdk::{Request, Response};

const CHUNK_LEN: usize = 16 * 1024;
const EVERY: Duration = Duration::from_millis(5);

async fn handle(_req: Request) -> Response {
    Response::stream(200, |mut w| async move {
        let mut chunk = Vec::with_capacity(CHUNK_LEN);
        for n in 0u64.. {
            chunk.clear();
            writeln!(chunk, "chunk {n}")?;
            chunk.resize(CHUNK_LEN - 1, b'.');
            chunk.push(b'\n');
            w.write(&chunk).await?;
            w.flush().await?;
            wstd::task::sleep(EVERY.into()).await;
        }
        Ok(())
    })
    .with_header("content-type", "text/plain; charset=utf-8")
    .with_header("cache-control", "no-store")
}

wedge_sdk::export_handler!(handle);
