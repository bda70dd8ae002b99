//! `faults`: a deliberately misbehaving handler, for showing that wedge
//! contains guest faults. Written on raw `wasip2` bindings (no SDK) because
//! some routes must do what the SDK never does (e.g. never respond).
//!
//! Routes (by request path):
//! - `/trap-before-head`: panics before any response is set.
//! - `/trap-mid-body`: sends a 200 head (no `content-length`), writes and
//!   flushes 4096 bytes of body, then panics: the client sees a truncated body.
//! - `/cpu-loop`: spins forever in pure computation (no host calls).
//! - `/memory`: allocates and touches 1 MiB blocks, keeping them all, until
//!   allocation fails (a trap, under the host's memory cap).
//! - `/no-response`: returns without ever setting the response-outparam.
//! - `/stack-overflow`: recurses without end until the call stack is exhausted (a
//!   trap).
//! - `/respond-twice`: sends a whole 200 response (head, body, finish), then sets
//!   the response-outparam a second time through its old handle (a trap: the
//!   handle was consumed by the first).
//! - `/write-after-finish`: sends a whole 200 response, then writes to its body
//!   stream through the stream's old handle after finishing the body (a trap).
//! - `/huge-headers?kib=N`: answers 200 with N header fields of 1 KiB each
//!   (`x-huge-0000` …). Past what the host lets a guest build (wasmtime's limit
//!   for a `fields`) the host traps the guest in the call that goes over it; a
//!   host that refused with an error instead would see the guest panic naming it.
//! - `/sleep?ms=N`: waits N ms on a monotonic-clock pollable (no CPU burn),
//!   then answers `200 slept N\n`.
//! - `/stdout`: prints `hello from the guest` to stdout and
//!   `guest stderr line` to stderr, then answers 200.
//! - `/dirty`: answers `clean` if 64 pages of the guest's static memory look as
//!   a fresh instance's, `seen N` if N of them carry an earlier request's marks;
//!   marks them all (and then traps if asked: `/dirty?trap`). A fresh instance
//!   per request must always answer `clean`.
//! - `/sandbox`: reports what the host granted: how many environment
//!   variables the guest sees and whether it can list `/` (wedge grants
//!   neither by default).
//! - anything else: 200 with the list of routes.

use std::hint::black_box;
use wasip2::http::types::{
    Fields, IncomingRequest, OutgoingBody, OutgoingResponse, ResponseOutparam,
};

const USAGE: &str = "faults: try /trap-before-head, /trap-mid-body, /cpu-loop, /memory, \
                     /no-response, /stack-overflow, /respond-twice, /write-after-finish, \
                     /huge-headers?kib=N, /sleep?ms=N, /stdout, /dirty, /sandbox\n";

struct Faults;

impl wasip2::exports::http::incoming_handler::Guest for Faults {
    fn handle(request: IncomingRequest, out: ResponseOutparam) {
        let path_with_query = request.path_with_query().unwrap_or_default();
        let (path, query) = match path_with_query.split_once('?') {
            Some((path, query)) => (path, Some(query)),
            None => (path_with_query.as_str(), None),
        };
        match path {
            "/trap-before-head" => panic!("faults: trap before the response head"),
            "/trap-mid-body" => trap_mid_body(out),
            "/cpu-loop" => cpu_loop(),
            "/memory" => exhaust_memory(),
            "/no-response" => drop(out), // never set: the host must notice
            "/stack-overflow" => {
                let depth = recurse(black_box(0));
                respond(
                    out,
                    200,
                    format!("returned from depth {depth}\n").as_bytes(),
                );
            }
            "/respond-twice" => respond_twice(out),
            "/write-after-finish" => write_after_finish(out),
            "/huge-headers" => {
                match query_param(query, "kib").and_then(|v| v.parse::<usize>().ok()) {
                    Some(kib) => huge_headers(out, kib),
                    None => respond(out, 400, b"usage: /huge-headers?kib=N\n"),
                }
            }
            "/sleep" => match query_param(query, "ms").and_then(|v| v.parse::<u64>().ok()) {
                Some(ms) => {
                    // Announced first, so a test can tell the request is in flight.
                    println!("sleeping {ms} ms");
                    sleep_ms(ms);
                    respond(out, 200, format!("slept {ms}\n").as_bytes());
                }
                None => respond(out, 400, b"usage: /sleep?ms=N\n"),
            },
            "/stdout" => {
                println!("hello from the guest");
                eprintln!("guest stderr line");
                respond(out, 200, b"printed to stdout and stderr\n");
            }
            "/dirty" => {
                let seen = marked_pages();
                let answer = match seen {
                    0 => "clean\n".to_string(),
                    n => format!("seen {n}\n"),
                };
                respond(out, 200, answer.as_bytes());
                if query == Some("trap") {
                    panic!("faults: trap after marking memory");
                }
            }
            "/sandbox" => respond(out, 200, sandbox_report().as_bytes()),
            _ => respond(out, 200, USAGE.as_bytes()),
        }
    }
}

wasip2::http::proxy::export!(Faults);

const PAGE: usize = 4096;
const MARKED_PAGES: usize = 64;
/// Zero-initialised static memory (`.bss`): a fresh instance sees zeros.
static STATIC_MARKS: [std::sync::atomic::AtomicU8; MARKED_PAGES * PAGE] =
    [const { std::sync::atomic::AtomicU8::new(0) }; MARKED_PAGES * PAGE];

/// How many pages of the static memory carry marks of an earlier request, then
/// marks them all.
fn marked_pages() -> usize {
    use std::sync::atomic::Ordering::Relaxed;
    let mut seen = 0;
    for page in 0..MARKED_PAGES {
        let byte = &STATIC_MARKS[page * PAGE];
        seen += usize::from(byte.swap(1, Relaxed) != 0);
    }
    seen
}

/// Head (no content-length), 4096 flushed body bytes, then a panic.
fn trap_mid_body(out: ResponseOutparam) -> ! {
    let headers = Fields::from_list(&[(
        "content-type".to_string(),
        b"application/octet-stream".to_vec(),
    )])
    .expect("valid headers");
    let response = OutgoingResponse::new(headers);
    response.set_status_code(200).expect("valid status");
    let body = response.body().expect("body taken once");
    ResponseOutparam::set(out, Ok(response));
    let stream = body.write().expect("stream taken once");
    stream
        .blocking_write_and_flush(&[b'x'; 4096])
        .expect("write 4096 bytes");
    panic!("faults: trap in the middle of the body");
}

/// Pure computation forever: only an epoch/fuel interrupt can stop it.
fn cpu_loop() -> ! {
    let mut x: u64 = black_box(1);
    loop {
        x = black_box(
            x.wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407),
        );
    }
}

/// Keep 1 MiB blocks (every byte written) until an allocation fails, which
/// aborts (traps).
fn exhaust_memory() -> ! {
    const MIB: usize = 1 << 20;
    let mut kept: Vec<Vec<u8>> = Vec::new();
    loop {
        let mut block = Vec::with_capacity(MIB);
        block.resize(MIB, 0xA5u8);
        kept.push(black_box(block));
    }
}

/// Calls itself without end; each frame keeps a live value on the wasm stack, so
/// neither the compiler nor the engine can fold the recursion away.
#[allow(unconditional_recursion)] // the point: only the stack limit ends it
fn recurse(depth: u64) -> u64 {
    let below = recurse(black_box(depth + 1));
    black_box(below.wrapping_add(depth))
}

/// A 200 head (no `content-length`: its end is the body's finish) and its body
/// stream, the response already set in `out`.
fn open_response(out: ResponseOutparam) -> (OutgoingBody, wasip2::io::streams::OutputStream) {
    let response = OutgoingResponse::new(Fields::new());
    response.set_status_code(200).expect("valid status");
    let body = response.body().expect("body taken once");
    ResponseOutparam::set(out, Ok(response));
    let stream = body.write().expect("stream taken once");
    (body, stream)
}

/// A whole response, then the outparam set again through its consumed handle.
fn respond_twice(out: ResponseOutparam) {
    let handle = out.handle();
    let (body, stream) = open_response(out);
    stream
        .blocking_write_and_flush(b"first response\n")
        .expect("write the body");
    drop(stream);
    OutgoingBody::finish(body, None).expect("finish body");
    // SAFETY (of the guest's own memory): only the handle is reused, and the
    // host must refuse it.
    let again = unsafe { ResponseOutparam::from_handle(handle) };
    let response = OutgoingResponse::new(Fields::new());
    ResponseOutparam::set(again, Ok(response));
    unreachable!("the host accepted a second response");
}

/// A whole response, then a write to its body stream after the body was finished.
fn write_after_finish(out: ResponseOutparam) {
    let (body, stream) = open_response(out);
    stream
        .blocking_write_and_flush(b"finished body\n")
        .expect("write the body");
    let handle = stream.handle();
    drop(stream);
    OutgoingBody::finish(body, None).expect("finish body");
    // SAFETY (of the guest's own memory): only the handle is reused, and the
    // host must refuse it.
    let stale = unsafe { wasip2::io::streams::OutputStream::from_handle(handle) };
    let _ = stale.write(b"after the finish\n");
    unreachable!("the host accepted a write after the body's finish");
}

/// `kib` header fields of 1 KiB each; a refusal by the host is a panic naming it
/// (wasmtime traps instead, past its limit).
fn huge_headers(out: ResponseOutparam, kib: usize) {
    let headers = Fields::new();
    let value = vec![b'h'; 1024 - "x-huge-0000".len()];
    for i in 0..kib {
        if let Err(err) = headers.append(&format!("x-huge-{i:04}"), &value) {
            panic!("faults: the host refused header field {i} ({kib} KiB asked): {err:?}");
        }
    }
    let response = OutgoingResponse::new(headers);
    response.set_status_code(200).expect("valid status");
    let body = response.body().expect("body taken once");
    ResponseOutparam::set(out, Ok(response));
    let stream = body.write().expect("stream taken once");
    let text = format!("{kib} KiB of headers\n");
    stream
        .blocking_write_and_flush(text.as_bytes())
        .expect("write the body");
    drop(stream);
    OutgoingBody::finish(body, None).expect("finish body");
}

/// What the sandbox lets through: environment variables and the filesystem.
fn sandbox_report() -> String {
    let env_vars = std::env::vars_os().count();
    let filesystem = match std::fs::read_dir("/") {
        Ok(_) => "granted",
        Err(_) => "denied",
    };
    format!("env vars: {env_vars}\nfilesystem: {filesystem}\n")
}

fn sleep_ms(ms: u64) {
    let nanos = ms.saturating_mul(1_000_000);
    wasip2::clocks::monotonic_clock::subscribe_duration(nanos).block();
}

fn query_param<'a>(query: Option<&'a str>, name: &str) -> Option<&'a str> {
    query?
        .split('&')
        .filter_map(|pair| pair.split_once('='))
        .find(|(k, _)| *k == name)
        .map(|(_, v)| v)
}

/// A complete response with a fixed text body.
fn respond(out: ResponseOutparam, status: u16, body: &[u8]) {
    let headers = Fields::from_list(&[
        (
            "content-type".to_string(),
            b"text/plain; charset=utf-8".to_vec(),
        ),
        (
            "content-length".to_string(),
            body.len().to_string().into_bytes(),
        ),
    ])
    .expect("valid headers");
    let response = OutgoingResponse::new(headers);
    response.set_status_code(status).expect("valid status");
    let outgoing = response.body().expect("body taken once");
    ResponseOutparam::set(out, Ok(response));
    let stream = outgoing.write().expect("stream taken once");
    for chunk in body.chunks(4096) {
        if stream.blocking_write_and_flush(chunk).is_err() {
            return; // client gone: dropping the body aborts it
        }
    }
    drop(stream);
    OutgoingBody::finish(outgoing, None).expect("finish body");
}

#[cfg(test)]
mod tests {
    use super::query_param;

    #[test]
    fn query_params() {
        assert_eq!(query_param(Some("ms=50"), "ms"), Some("50"));
        assert_eq!(query_param(Some("a=1&ms=7"), "ms"), Some("7"));
        assert_eq!(query_param(Some("a=1"), "ms"), None);
        assert_eq!(query_param(None, "ms"), None);
    }
}
