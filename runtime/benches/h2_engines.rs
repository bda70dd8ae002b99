//! wedge's HTTP/2 engine against hyper's, same native hello handler, side by
//! side in one run (../shared/BENCHMARKING.md): servers pinned to CPU 1, h2load
//! on CPU 0, rotating rounds, hyper measured twice (baseline and control).
//!
//! Run: `cargo bench -p wedge --bench h2_engines` (needs `h2load` and `taskset`).
//! `ROUNDS` (default 5) and `SECONDS` (default 10) bound the run.
//! The server side is this same binary: `h2_engines serve <wedge|hyper>`; it
//! binds a free loopback port and prints it.

use std::convert::Infallible;
use std::net::{SocketAddr, TcpStream};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::Response;
use http_body_util::Full;
use wedge::net::h2::{ConnStats, H2Config, Handler, RequestBody};
use wedge_proto::h2::conn::RequestHead;

const HELLO: &[u8] = b"Hello, world!\n";

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).map(String::as_str) == Some("serve") {
        serve(&args[2]);
        return;
    }
    if args.iter().any(|a| a == "--list") {
        // `cargo test --benches` lists targets; nothing to list here.
        return;
    }
    orchestrate();
}

/// The native handler: no wasm, the same answer from both engines.
struct NativeHello;

impl Handler for NativeHello {
    type Body = Full<Bytes>;
    type Future = std::future::Ready<Response<Full<Bytes>>>;

    fn call(&self, _head: &RequestHead, _body: RequestBody) -> Self::Future {
        std::future::ready(Response::new(Full::new(Bytes::from_static(HELLO))))
    }
}

fn serve(engine: &str) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let listener = tokio::net::TcpListener::bind(("127.0.0.1", 0))
            .await
            .unwrap();
        println!("{}", listener.local_addr().unwrap().port());
        let (_stop, shutdown) = tokio::sync::watch::channel(false);
        let config = Arc::new(H2Config::default());
        loop {
            let (stream, _) = listener.accept().await.unwrap();
            stream.set_nodelay(true).unwrap();
            match engine {
                "wedge" => {
                    let stats = Arc::new(ConnStats::default());
                    tokio::spawn(wedge::net::h2::serve_with(
                        stream,
                        NativeHello,
                        shutdown.clone(),
                        config.clone(),
                        stats,
                    ));
                }
                "hyper" => {
                    let service = hyper::service::service_fn(|_req| async {
                        Ok::<_, Infallible>(Response::new(Full::new(Bytes::from_static(HELLO))))
                    });
                    tokio::spawn(
                        hyper::server::conn::http2::Builder::new(
                            hyper_util::rt::TokioExecutor::new(),
                        )
                        .serve_connection(hyper_util::rt::TokioIo::new(stream), service),
                    );
                }
                other => panic!("unknown engine {other}"),
            }
        }
    });
}

struct Sample {
    cpu_us_per_req: f64,
    req_per_s: f64,
}

fn orchestrate() {
    let rounds: usize = env_or("ROUNDS", 5);
    let seconds: u64 = env_or("SECONDS", 10);
    let me = std::env::current_exe().unwrap();
    let runs = ["hyper", "wedge", "hyper (control)"];
    let mut samples: Vec<Vec<Sample>> = runs.iter().map(|_| Vec::new()).collect();
    for round in 0..rounds {
        for k in 0..runs.len() {
            let i = (k + round) % runs.len();
            let engine = runs[i].split_whitespace().next().unwrap();
            let Some(sample) = measure(&me, engine, seconds) else {
                eprintln!(
                    "round {round} {:<16} produced no requests; discarded",
                    runs[i]
                );
                continue;
            };
            eprintln!(
                "round {round} {:<16} {:>7.2} µs/req {:>9.0} req/s",
                runs[i], sample.cpu_us_per_req, sample.req_per_s
            );
            samples[i].push(sample);
        }
    }
    println!(
        "| server (native hello, h2c) | CPU µs/request, median [range] | req/s, median | vs hyper |"
    );
    println!("|---|---|---|---|");
    let base = median(samples[0].iter().map(|s| s.cpu_us_per_req).collect());
    for (name, s) in runs.iter().zip(&samples) {
        let cpu: Vec<f64> = s.iter().map(|s| s.cpu_us_per_req).collect();
        let (lo, hi) = range(&cpu);
        let med = median(cpu);
        let rps = median(s.iter().map(|s| s.req_per_s).collect());
        println!(
            "| {name} | {med:.2} [{lo:.2}–{hi:.2}] | {rps:.0} | {:.2}× |",
            med / base
        );
    }
}

/// One measured run of `engine`, or `None` when no request succeeded.
fn measure(me: &std::path::Path, engine: &str, seconds: u64) -> Option<Sample> {
    let mut server = Command::new("taskset")
        .args(["-c", "1"])
        .arg(me)
        .args(["serve", engine])
        .stdout(Stdio::piped())
        .spawn()
        .expect("taskset");
    let mut port = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(server.stdout.take().unwrap()),
        &mut port,
    )
    .unwrap();
    let port: u16 = port.trim().parse().expect("the server prints its port");
    wait_listening(port);
    let url = format!("http://127.0.0.1:{port}/");
    h2load(&url, 3); // warm-up
    let before = cpu_ticks(&server);
    let (done, rps) = h2load(&url, seconds);
    let after = cpu_ticks(&server);
    stop(&mut server);
    if done == 0 {
        return None;
    }
    let tick_us = 1e6 / clock_ticks_per_second();
    Some(Sample {
        cpu_us_per_req: (after - before) as f64 * tick_us / done as f64,
        req_per_s: rps,
    })
}

/// Runs h2load for `seconds`; returns (requests succeeded, req/s).
fn h2load(url: &str, seconds: u64) -> (u64, f64) {
    let out = Command::new("taskset")
        .args(["-c", "0", "h2load", "-c", "32", "-m", "16", "-t", "1", "-D"])
        .arg(seconds.to_string())
        .arg(url)
        .output()
        .expect("h2load (apt-get install nghttp2-client)");
    let text = String::from_utf8_lossy(&out.stdout);
    let succeeded = text
        .lines()
        .find(|l| l.starts_with("requests:"))
        .and_then(|l| l.split(',').find(|p| p.contains("succeeded")))
        .and_then(|p| p.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap_or(0);
    let rps = text
        .lines()
        .find(|l| l.starts_with("finished in"))
        .and_then(|l| l.split(',').nth(1))
        .and_then(|p| p.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap_or(0.0);
    (succeeded, rps)
}

/// utime + stime of the server process (all threads), in clock ticks.
fn cpu_ticks(child: &Child) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{}/stat", child.id())).unwrap();
    let fields: Vec<&str> = stat
        .rsplit(')')
        .next()
        .unwrap()
        .split_whitespace()
        .collect();
    // After the command name: state is field 3, utime 14, stime 15 (1-based).
    fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap()
}

fn clock_ticks_per_second() -> f64 {
    let out = Command::new("getconf").arg("CLK_TCK").output().unwrap();
    String::from_utf8_lossy(&out.stdout)
        .trim()
        .parse()
        .unwrap_or(100.0)
}

fn wait_listening(port: u16) {
    let addr: SocketAddr = ([127, 0, 0, 1], port).into();
    let deadline = Instant::now() + Duration::from_secs(10);
    while TcpStream::connect(addr).is_err() {
        assert!(Instant::now() < deadline, "server on {port} did not start");
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn stop(child: &mut Child) {
    let _ = child.kill();
    let _ = child.wait();
}

fn env_or<T: std::str::FromStr>(name: &str, default: T) -> T {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// The median; NaN when every round was discarded.
fn median(mut v: Vec<f64>) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

fn range(v: &[f64]) -> (f64, f64) {
    let lo = v.iter().cloned().fold(f64::INFINITY, f64::min);
    let hi = v.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
    (lo, hi)
}
