//! `hello`: the smallest wedge handler. Answers every request with
//! `200 Hello, world!\n` (`content-type: text/plain; charset=utf-8`).

use wedge_sdk::{Request, Response};

async fn handle(_req: Request) -> Response {
    Response::text("Hello, world!\n")
}

wedge_sdk::export_handler!(handle);
