//! `wasip1-handler`: a `wasi:http/proxy` handler built for `wasm32-wasip1`, so a
//! core module, not a component: `wit-bindgen` embeds the world (its
//! `component-type` custom section) and the standard library calls WASI preview 1.
//! wedge makes it a component with the preview 1 adapter when it loads it.
//!
//! - `/`: `200 Hello from a wasm32-wasip1 module!\n`, and a line on stdout (through
//!   the preview 1 `fd_write` the adapter implements).
//! - `/echo`: streams the request body back as it arrives, chunk by chunk.
//! - `/trap-before-head`: panics before the response head (a trap).
//! - `/cpu-loop`: spins forever in pure computation.
//! - `/memory`: keeps 1 MiB blocks until allocation fails (a trap).

wit_bindgen::generate!({
    path: "../../wit",
    world: "wedge:host/handler",
    generate_all,
});

use std::hint::black_box;

use exports::wasi::http::incoming_handler::Guest;
use wasi::http::types::{
    Fields, IncomingBody, IncomingRequest, OutgoingBody, OutgoingResponse, ResponseOutparam,
};
use wasi::io::streams::StreamError;

const HELLO: &[u8] = b"Hello from a wasm32-wasip1 module!\n";

struct Handler;

impl Guest for Handler {
    fn handle(request: IncomingRequest, out: ResponseOutparam) {
        let path = request.path_with_query().unwrap_or_default();
        match path.as_str() {
            "/echo" => echo(request, out),
            "/trap-before-head" => panic!("wasip1-handler: trap before the head"),
            "/cpu-loop" => cpu_loop(),
            "/memory" => exhaust_memory(),
            _ => {
                println!("wasip1-handler: hello on stdout");
                respond(out, HELLO);
            }
        }
    }
}

export!(Handler);

/// Copies the request body to the response body as it arrives: one chunk of at
/// most 64 KiB in memory at a time.
fn echo(request: IncomingRequest, out: ResponseOutparam) {
    let body = request.consume().expect("body taken once");
    let input = body.stream().expect("stream taken once");
    let response = OutgoingResponse::new(Fields::new());
    let out_body = response.body().expect("body taken once");
    ResponseOutparam::set(out, Ok(response));
    let output = out_body.write().expect("stream taken once");
    loop {
        match input.blocking_read(64 * 1024) {
            Ok(chunk) => {
                // `blocking-write-and-flush` takes at most 4096 bytes per call.
                for piece in chunk.chunks(4096) {
                    if output.blocking_write_and_flush(piece).is_err() {
                        return; // client gone: dropping the body aborts it
                    }
                }
            }
            Err(StreamError::Closed) => break,
            Err(StreamError::LastOperationFailed(_)) => return,
        }
    }
    drop((input, output));
    IncomingBody::finish(body);
    OutgoingBody::finish(out_body, None).expect("finish body");
}

fn respond(out: ResponseOutparam, text: &[u8]) {
    let headers = Fields::from_list(&[
        (
            "content-type".to_string(),
            b"text/plain; charset=utf-8".to_vec(),
        ),
        (
            "content-length".to_string(),
            text.len().to_string().into_bytes(),
        ),
    ])
    .expect("valid headers");
    let response = OutgoingResponse::new(headers);
    let body = response.body().expect("body taken once");
    ResponseOutparam::set(out, Ok(response));
    let stream = body.write().expect("stream taken once");
    stream.blocking_write_and_flush(text).expect("write body");
    drop(stream);
    OutgoingBody::finish(body, None).expect("finish body");
}

/// Counts forever: only an epoch interrupt can stop it.
fn cpu_loop() -> ! {
    let mut n = 0u64;
    loop {
        n = black_box(n.wrapping_add(1));
    }
}

/// Doubles a buffer, every byte written, until the allocation fails, which aborts
/// (traps).
fn exhaust_memory() -> ! {
    let mut buffer = vec![1u8; 1 << 20];
    loop {
        buffer.resize(buffer.len() * 2, 1);
        black_box(&buffer);
    }
}
