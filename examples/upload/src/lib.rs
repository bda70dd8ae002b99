//! `upload`: reads the request body as it streams in (one chunk at a time,
//! never the whole body) and answers its SHA-256 and length:
//! `sha256: <64 hex digits>\nlength: <bytes>\n`.

use sha2::{Digest, Sha256};
use std::fmt::Write;
use wedge_sdk::{Error, Request, Response};

async fn handle(req: Request) -> Result<Response, Error> {
    let mut body = req.into_body();
    let mut hasher = Sha256::new();
    let mut length: u64 = 0;
    while let Some(chunk) = body.chunk().await {
        let chunk = chunk?;
        length += chunk.len() as u64;
        hasher.update(&chunk);
    }
    let mut hex = String::with_capacity(64);
    for byte in hasher.finalize() {
        write!(hex, "{byte:02x}").map_err(Error::msg)?;
    }
    Ok(Response::text(format!("sha256: {hex}\nlength: {length}\n")))
}

wedge_sdk::export_handler!(handle);
