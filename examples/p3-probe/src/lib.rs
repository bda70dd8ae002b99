//! `p3-probe`: a WASI 0.3 (p3) handler the tests drive to see how wedge serves
//! p3 instances: several requests at once on one instance, bodies left unread,
//! and traps. On the raw `wasip3` bindings.
//!
//! Routes (by the request path's last segment, so it answers under any route):
//! - `…/stream`: a streamed `200` of 8 chunks × 1 KiB (chunk `i` is all `b'a' + i`).
//! - `…/barrier?n=N`: counts itself in (this instance's count, printed to stdout as
//!   `p3-probe: arrived K`), reads its request body to the end, then waits until N
//!   requests have arrived on this instance and answers `200 arrived K of N\n`.
//!   Requests spread over several instances never all arrive: only concurrency
//!   inside one instance lets N meet. While its body is open a request runs no guest
//!   code at all, so the instance has room for the next one at once.
//! - `…/sleep?ms=N`: never reads its body; waits N ms, then answers `200 slept N\n`.
//! - `…/spin?ms=N`: runs guest code (a busy loop) for N ms, then `200 spun N\n`.
//! - `…/drip?ms=N`: a `200` whose body never ends: a 1 KiB chunk every N ms until
//!   the host stops taking them.
//! - `…/trap`: panics (a trap), failing the instance and every request on it.
//! - `…/trap-mid-body`: a `200` head, three chunks of 4096 bytes (`x`), each written
//!   once the host took the one before, then a panic in the task writing the body:
//!   the client must see the body cut off, never ended.
//! - `…/count`: `200 served K\n`, K being the requests this instance has seen
//!   (state kept between requests of one instance).
//! - `…/trailers`: reads the body to its end and answers `200` with its length and
//!   the trailers the client sent after it: `body: N bytes\n`, then `name: value\n`
//!   for each, in order (as `echo`'s `/trailers`).
//! - `…/linger?ms=N`: spawns a task that waits N ms and answers `200 lingering N\n`
//!   at once: the instance lives on after the handler returned.
//! - `…/print?kib=N`: writes N KiB of `p` and a newline to `wasi:cli/stdout@0.3.0`
//!   in one stream write of one buffer (one line, however long), then answers
//!   `200 printed N KiB\n` once stdout took it all.
//! - `…/body-error?kib=N`: a `200` whose body (`body\n`) ends in an error instead
//!   of trailers: `internal-error` with N KiB of U+0001 as its message.
//! - anything else: `200` with this list.

use std::sync::atomic::{AtomicU64, Ordering};

use wasip3::clocks::monotonic_clock::{now, wait_for};
use wasip3::http::types::{ErrorCode, Fields, Request, Response};
use wasip3::wit_bindgen::{FutureReader, StreamResult};
use wasip3::{wit_future, wit_stream};

const USAGE: &str = "p3-probe: try /stream, /barrier?n=N, /sleep?ms=N, /spin?ms=N, /drip?ms=N, /trap, \
     /trap-mid-body, /count, /trailers, /print?kib=N, /linger?ms=N, /body-error?kib=N\n";
const MILLISECOND: u64 = 1_000_000;

/// Requests this instance has seen, and those that reached `/barrier`.
static SEEN: AtomicU64 = AtomicU64::new(0);
static ARRIVED: AtomicU64 = AtomicU64::new(0);

struct Probe;

impl wasip3::exports::http::handler::Guest for Probe {
    async fn handle(request: Request) -> Result<Response, ErrorCode> {
        let seen = SEEN.fetch_add(1, Ordering::Relaxed) + 1;
        let path_with_query = request.get_path_with_query().unwrap_or_default();
        let (path, query) = match path_with_query.split_once('?') {
            Some((path, query)) => (path, Some(query)),
            None => (path_with_query.as_str(), None),
        };
        let number = |name| query_param(query, name).and_then(|v| v.parse::<u64>().ok());
        match path.rsplit('/').next().unwrap_or_default() {
            "stream" => Ok(respond(
                200,
                (0..8u8).map(|i| vec![b'a' + i; 1024]).collect(),
            )),
            "barrier" => {
                let Some(n) = number("n") else {
                    return Ok(text(400, "usage: /barrier?n=N\n"));
                };
                let arrived = ARRIVED.fetch_add(1, Ordering::Relaxed) + 1;
                println!("p3-probe: arrived {arrived}");
                drain(request).await;
                // A timer is a waitable the host wakes: polling a counter on it
                // needs no wake-up between the instance's tasks.
                while ARRIVED.load(Ordering::Relaxed) < n {
                    wait_for(MILLISECOND).await;
                }
                Ok(text(200, &format!("arrived {arrived} of {n}\n")))
            }
            "sleep" => match number("ms") {
                Some(ms) => {
                    wait_for(ms * MILLISECOND).await;
                    Ok(text(200, &format!("slept {ms}\n")))
                }
                None => Ok(text(400, "usage: /sleep?ms=N\n")),
            },
            "spin" => match number("ms") {
                Some(ms) => {
                    // Mostly guest code: the clock (a host call, which the CPU
                    // meter does not count) is read once per round of busy work.
                    let start = now();
                    while now() - start < ms * MILLISECOND {
                        let mut x = 0u64;
                        for i in 0..100_000u64 {
                            x = std::hint::black_box(x.wrapping_mul(31).wrapping_add(i));
                        }
                    }
                    Ok(text(200, &format!("spun {ms}\n")))
                }
                None => Ok(text(400, "usage: /spin?ms=N\n")),
            },
            "drip" => match number("ms") {
                Some(ms) => Ok(drip(ms)),
                None => Ok(text(400, "usage: /drip?ms=N\n")),
            },
            "trap" => panic!("p3-probe: trap on demand"),
            "trap-mid-body" => {
                let (mut body_tx, body_rx) = wit_stream::new();
                let (trailers_tx, trailers_rx) = wit_future::new(|| Ok(None));
                let (response, _sent) = Response::new(Fields::new(), Some(body_rx), trailers_rx);
                wasip3::spawn(async move {
                    // The body is never finished: its trailers stay unwritten.
                    let _unfinished = trailers_tx;
                    // A write returns once the host took the chunk, and the host
                    // takes one only after the engine took the one before: by the
                    // third, the head and the first chunk are on their way.
                    for _ in 0..3 {
                        body_tx.write_all(vec![b'x'; 4096]).await;
                    }
                    panic!("p3-probe: trap after the head and 12288 bytes");
                });
                Ok(response)
            }
            "body-error" => match number("kib") {
                Some(kib) => {
                    let (mut body_tx, body_rx) = wit_stream::new();
                    let (trailers_tx, trailers_rx) = wit_future::new(|| Ok(None));
                    let (response, _sent) =
                        Response::new(Fields::new(), Some(body_rx), trailers_rx);
                    wasip3::spawn(async move {
                        body_tx.write_all(b"body\n".to_vec()).await;
                        drop(body_tx);
                        let text = "\u{1}".repeat(kib as usize * 1024);
                        let _ = trailers_tx.write(Err(ErrorCode::InternalError(Some(text)))).await;
                    });
                    Ok(response)
                }
                None => Ok(text(400, "usage: /body-error?kib=N\n")),
            },
            "count" => Ok(text(200, &format!("served {seen}\n"))),
            "linger" => match number("ms") {
                Some(ms) => {
                    wasip3::spawn(async move { wait_for(ms * MILLISECOND).await });
                    Ok(text(200, &format!("lingering {ms}\n")))
                }
                None => Ok(text(400, "usage: /linger?ms=N\n")),
            },
            "print" => match number("kib") {
                Some(kib) => {
                    print_line(kib as usize * 1024).await;
                    Ok(text(200, &format!("printed {kib} KiB\n")))
                }
                None => Ok(text(400, "usage: /print?kib=N\n")),
            },
            "trailers" => {
                let (len, trailers) = drain(request).await;
                let mut report = format!("body: {len} bytes\n");
                for (name, value) in trailers.await?.map(|t| t.copy_all()).unwrap_or_default() {
                    report += &format!("{name}: {}\n", String::from_utf8_lossy(&value));
                }
                Ok(text(200, &report))
            }
            _ => Ok(text(200, USAGE)),
        }
    }
}

wasip3::http::service::export!(Probe);

/// The trailers that follow a request's body, once it is read to its end.
type Trailers = FutureReader<Result<Option<Fields>, ErrorCode>>;

/// Reads `request`'s body to its end, discarding it: its length, and its trailers.
async fn drain(request: Request) -> (usize, Trailers) {
    let (read_result_tx, read_result_rx) = wit_future::new(|| Ok(()));
    let (mut body, trailers) = Request::consume_body(request, read_result_rx);
    let mut len = 0;
    loop {
        let (status, chunk) = body.read(Vec::with_capacity(16 * 1024)).await;
        if !matches!(status, StreamResult::Complete(_)) {
            break;
        }
        len += chunk.len();
    }
    drop(read_result_tx);
    (len, trailers)
}

fn text(status: u16, body: &str) -> Response {
    respond(status, vec![body.as_bytes().to_vec()])
}

/// A response whose body is `chunks`, written one by one by a spawned task once
/// the handler has returned the response.
fn respond(status: u16, chunks: Vec<Vec<u8>>) -> Response {
    let (mut body_tx, body_rx) = wit_stream::new();
    let (trailers_tx, trailers_rx) = wit_future::new(|| Ok(None));
    let (response, _sent) = Response::new(Fields::new(), Some(body_rx), trailers_rx);
    drop(trailers_tx);
    // Only a status outside 100..=999 is refused, and none is asked for here.
    let _ = response.set_status_code(status);
    wasip3::spawn(async move {
        for chunk in chunks {
            if !body_tx.write_all(chunk).await.is_empty() {
                return; // the peer went away
            }
        }
    });
    response
}

/// Writes `len` octets of `p` and a newline to stdout as one write, and waits until
/// stdout has taken them.
async fn print_line(len: usize) {
    let (mut tx, rx) = wit_stream::new();
    let taken = wasip3::cli::stdout::write_via_stream(rx);
    let mut line = vec![b'p'; len];
    line.push(b'\n');
    wasip3::spawn(async move {
        tx.write_all(line).await;
    });
    let _ = taken.await;
}

/// A `200` whose body is a 1 KiB chunk every `ms` milliseconds, never ended.
fn drip(ms: u64) -> Response {
    let (mut body_tx, body_rx) = wit_stream::new();
    let (trailers_tx, trailers_rx) = wit_future::new(|| Ok(None));
    let (response, _sent) = Response::new(Fields::new(), Some(body_rx), trailers_rx);
    wasip3::spawn(async move {
        let _unfinished = trailers_tx;
        while body_tx.write_all(vec![b'd'; 1024]).await.is_empty() {
            wait_for(ms * MILLISECOND).await;
        }
    });
    response
}

fn query_param<'a>(query: Option<&'a str>, name: &str) -> Option<&'a str> {
    query?
        .split('&')
        .filter_map(|pair| pair.split_once('='))
        .find(|(key, _)| *key == name)
        .map(|(_, value)| value)
}
