//! Outbound HTTP end to end: the `proxy` example on a real `wedge` forwards to
//! an origin on 127.0.0.1 (a second wedge serving `echo`, or a listener in the
//! test) under `--allow-outbound` and the outbound limits.

mod h3_support;
mod support;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use h3_support::{H3Server, exchange};
use support::{Server, curl, example, pattern, sha256, temp_dir};

/// Large enough that neither wedge could hold it in the proxy's 16 MiB of
/// guest memory at once, so it must stream through both ways.
const BODY: usize = 24 * 1024 * 1024;

/// An origin that streams every request body back (the `echo` example).
fn echo_origin() -> Server {
    Server::start(&example("echo"), &["--no-tls"])
}

/// The `proxy` example, allowed to reach `allow`, with guest memory too small
/// for a [`BODY`].
fn proxy(allow: &str, extra: &[&str]) -> H3Server {
    let mut args = vec!["--memory", "16MiB", "--allow-outbound", allow];
    args.extend_from_slice(extra);
    h3_support::start("proxy", &args)
}

/// `proxy_url/http://origin/`: what the proxy forwards to `http://origin/`.
fn through(proxy: &Server, origin: &str) -> String {
    format!("{}/http://{origin}/", proxy.url)
}

/// POSTs a [`BODY`] through the proxy to the echo origin with curl (`extra`
/// picks the protocol) and checks every byte came back.
fn round_trip_with_curl(extra: &[&str]) {
    let origin = echo_origin();
    let proxy = proxy(origin.authority(), &[]);
    let dir = temp_dir("outbound");
    let body = pattern(BODY, 11);
    let input = dir.join("in.bin");
    let output = dir.join("out.bin");
    std::fs::write(&input, &body).unwrap();
    let at_input = format!("@{}", input.display());
    let out_path = output.display().to_string();
    let url = through(&proxy.server, origin.authority());
    let mut args = vec!["--fail", "--data-binary", &at_input, "--output", &out_path];
    args.extend_from_slice(extra);
    args.push(&url);
    let out = curl(&args);
    assert!(
        out.status.success(),
        "{}\nproxy log:\n{}",
        String::from_utf8_lossy(&out.stderr),
        proxy.server.log()
    );
    let echoed = std::fs::read(&output).unwrap();
    assert_eq!(echoed.len(), body.len());
    assert_eq!(sha256(&echoed), sha256(&body));
}

#[test]
fn a_large_body_streams_through_the_proxy_both_ways_over_h1() {
    round_trip_with_curl(&[]);
}

#[test]
fn a_large_body_streams_through_the_proxy_both_ways_over_h2() {
    round_trip_with_curl(&["--http2-prior-knowledge"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_large_body_streams_through_the_proxy_both_ways_over_h3() {
    let origin = echo_origin();
    let proxy = proxy(origin.authority(), &[]);
    let body = pattern(BODY, 12);
    let mut requests = proxy.connect().await;
    let path = format!("/http://{}/", origin.authority());
    let (status, echoed) = exchange(&mut requests, "POST", &path, Some(body.clone())).await;
    assert_eq!(status, 200, "proxy log:\n{}", proxy.server.log());
    assert_eq!(echoed.len(), body.len());
    assert_eq!(sha256(&echoed), sha256(&body));
}

/// curl's status line and body for `args` (no `--fail`).
fn status_and_body(args: &[&str]) -> (String, String) {
    let mut all = vec!["--write-out", "\n%{http_code}"];
    all.extend_from_slice(args);
    let out = curl(&all);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    let (body, status) = text.rsplit_once('\n').unwrap();
    (status.to_string(), body.to_string())
}

#[test]
fn an_origin_not_on_the_list_is_denied_and_logged() {
    let origin = echo_origin();
    // Allowed: the origin's host on another port only.
    let proxy = proxy("127.0.0.1:1", &[]);
    let url = through(&proxy.server, origin.authority());
    let (status, body) = status_and_body(&["--data-binary", "secret", &url]);
    assert_eq!(status, "403", "{body}");
    assert!(body.contains("denied"), "{body}");
    let log = proxy.server.wait_for_log(&format!(
        "app `proxy`: outbound request to {} denied",
        origin.authority()
    ));
    assert_eq!(log.matches("outbound request to").count(), 1, "{log}");
}

/// A loopback port whose accept queue is full: a further SYN is dropped, so a
/// connect neither succeeds nor fails until its timeout. Keep the returned
/// listener and connections alive while it is used.
async fn unanswering_port() -> (tokio::net::TcpListener, Vec<tokio::net::TcpStream>) {
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.bind("127.0.0.1:0".parse().unwrap()).unwrap();
    // Backlog 0: Linux queues one connection, then drops SYNs.
    let listener = socket.listen(0).unwrap();
    let addr = listener.local_addr().unwrap();
    let mut queued = Vec::new();
    for _ in 0..16 {
        let connect = tokio::net::TcpStream::connect(addr);
        match tokio::time::timeout(Duration::from_millis(300), connect).await {
            Ok(stream) => queued.push(stream.unwrap()),
            Err(_) => return (listener, queued),
        }
    }
    panic!("the accept queue of {addr} never filled");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connect_past_the_timeout_fails_with_connection_timeout() {
    let (listener, _queued) = unanswering_port().await;
    let addr = listener.local_addr().unwrap().to_string();
    let proxy = proxy(&addr, &["--outbound-connect-timeout", "500ms"]);
    let url = through(&proxy.server, &addr);
    let started = Instant::now();
    let (status, body) =
        tokio::task::spawn_blocking(move || status_and_body(&["--max-time", "30", &url]))
            .await
            .unwrap();
    let took = started.elapsed();
    assert_eq!(status, "502", "{body}");
    assert!(body.contains("connection timeout"), "{body}");
    assert!(
        took >= Duration::from_millis(500) && took < Duration::from_secs(10),
        "{took:?}"
    );
}

/// An origin on 127.0.0.1 that answers each request only when told to:
/// reports each request head as it arrives, then waits for a release.
struct HeldOrigin {
    addr: SocketAddr,
    arrived: mpsc::Receiver<String>,
    release: mpsc::Sender<()>,
}

impl HeldOrigin {
    fn start() -> HeldOrigin {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let (arrived_tx, arrived) = mpsc::channel();
        let (release, release_rx) = mpsc::channel::<()>();
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(mut stream) = stream else { return };
                let head = read_head(&mut stream);
                if arrived_tx.send(head).is_err() || release_rx.recv().is_err() {
                    return;
                }
                let _ = stream.write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 3\r\n\r\nok\n");
            }
        });
        HeldOrigin {
            addr,
            arrived,
            release,
        }
    }

    /// The next request head (bounded wait).
    fn next_head(&self) -> String {
        self.arrived
            .recv_timeout(Duration::from_secs(60))
            .expect("a request reached the origin")
    }
}

fn read_head(stream: &mut TcpStream) -> String {
    let mut head = Vec::new();
    let mut byte = [0u8];
    while !head.ends_with(b"\r\n\r\n") && stream.read(&mut byte).unwrap_or(0) == 1 {
        head.push(byte[0]);
    }
    String::from_utf8_lossy(&head).into_owned()
}

#[test]
fn requests_past_the_in_flight_limit_fail_until_one_finishes() {
    let origin = HeldOrigin::start();
    let authority = origin.addr.to_string();
    let proxy = proxy(&authority, &["--outbound-max-concurrent", "1"]);
    let url = |path: &str| format!("{}/http://{authority}/{path}", proxy.server.url);

    let first_url = url("first");
    let first = std::thread::spawn(move || status_and_body(&[&first_url]));
    assert!(origin.next_head().starts_with("GET /first "));

    // The first is in flight (the origin holds it): the second is refused.
    let (status, body) = status_and_body(&["--max-time", "30", &url("second")]);
    assert_eq!(status, "502", "{body}");
    assert!(body.contains("connection limit reached"), "{body}");
    proxy.server.wait_for_log(&format!(
        "app `proxy`: outbound request to {authority} refused: 1 already in flight"
    ));

    origin.release.send(()).unwrap();
    assert_eq!(first.join().unwrap(), ("200".into(), "ok\n".into()));

    // Its slot comes back once its connection is done (poll, bounded).
    let deadline = Instant::now() + Duration::from_secs(30);
    let third_url = url("third");
    let third = std::thread::spawn(move || {
        loop {
            let answer = status_and_body(&["--max-time", "30", &third_url]);
            if answer.0 != "502" || Instant::now() > deadline {
                return answer;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    });
    assert!(origin.next_head().starts_with("GET /third "));
    origin.release.send(()).unwrap();
    assert_eq!(third.join().unwrap(), ("200".into(), "ok\n".into()));
}

#[test]
fn a_bad_allow_outbound_pattern_is_one_line_and_exit_2() {
    let out = support::wedge(
        &[
            "serve",
            example("proxy").to_str().unwrap(),
            "--allow-outbound",
            "exa mple.com",
        ],
        &temp_dir("bad-pattern"),
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(
        stderr.contains("`exa mple.com` is not an outbound host pattern"),
        "{stderr}"
    );
}

#[test]
fn a_refused_connection_is_a_502_and_logged_with_the_app() {
    // A port nothing listens on any more: connecting is refused at once.
    let closed = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .to_string();
    let proxy = proxy(&closed, &[]);
    let (status, body) = status_and_body(&[&through(&proxy.server, &closed)]);
    assert_eq!(status, "502", "{body}");
    assert!(body.contains("connection refused"), "{body}");
    proxy
        .server
        .wait_for_log("app `proxy`: outbound connection failed: ");
}
