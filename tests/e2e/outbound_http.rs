//! Outbound HTTP end to end: the `proxy` example on a real `wedge` forwards to
//! an origin on 127.0.0.1 (a second wedge serving `echo`, or a listener in the
//! test) under `--allow-outbound` and the outbound limits.

use std::convert::Infallible;
use std::net::{SocketAddr, TcpListener};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, mpsc};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;

use support::h3::{H3Server, exchange};
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
    support::h3::start("proxy", &args)
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
    let (status, body) =
        tokio::task::spawn_blocking(move || status_and_body(&["--max-time", "30", &url]))
            .await
            .unwrap();
    assert_eq!(status, "502", "{body}");
    assert!(body.contains("connection timeout"), "{body}");
    // The configured limit is the one applied (the default is 5s): read from the
    // log, not from a stopwatch.
    proxy.server.wait_for_log(&format!(
        "outbound connection to {addr} failed: no connection within 500ms"
    ));
}

/// An HTTP/1.1 origin on 127.0.0.1 (hyper, keep-alive) that counts the
/// connections it accepts and sees closed, reports each request's path as it
/// arrives and, if `held`, answers `ok` only when released.
struct Origin {
    addr: SocketAddr,
    accepted: Arc<AtomicUsize>,
    closed: Arc<AtomicUsize>,
    arrived: mpsc::Receiver<String>,
    release: Arc<tokio::sync::Semaphore>,
}

impl Origin {
    fn start(held: bool) -> Origin {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let addr = listener.local_addr().unwrap();
        let (arrived_tx, arrived) = mpsc::channel();
        let origin = Origin {
            addr,
            accepted: Arc::default(),
            closed: Arc::default(),
            arrived,
            release: Arc::new(tokio::sync::Semaphore::new(0)),
        };
        let (accepted, closed, release) = (
            origin.accepted.clone(),
            origin.closed.clone(),
            origin.release.clone(),
        );
        std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            runtime.block_on(async move {
                let listener = tokio::net::TcpListener::from_std(listener).unwrap();
                loop {
                    let Ok((stream, _)) = listener.accept().await else {
                        return;
                    };
                    accepted.fetch_add(1, Ordering::SeqCst);
                    let (arrived, release, closed) =
                        (arrived_tx.clone(), release.clone(), closed.clone());
                    let answer = service_fn(move |request: hyper::Request<Incoming>| {
                        let (arrived, release) = (arrived.clone(), release.clone());
                        async move {
                            let _ = arrived.send(request.uri().path().to_string());
                            if held {
                                release.acquire().await.unwrap().forget();
                            }
                            // Two of a field that cannot be joined with commas.
                            let answer = hyper::Response::builder()
                                .header("set-cookie", "a=1; Path=/")
                                .header("set-cookie", "b=2; Path=/")
                                .body(Full::new(Bytes::from("ok\n")))
                                .unwrap();
                            Ok::<_, Infallible>(answer)
                        }
                    });
                    tokio::spawn(async move {
                        let io = TokioIo::new(stream);
                        let _ = http1::Builder::new().serve_connection(io, answer).await;
                        closed.fetch_add(1, Ordering::SeqCst);
                    });
                }
            });
        });
        origin
    }

    /// The next request's path (bounded wait).
    fn next_path(&self) -> String {
        self.arrived
            .recv_timeout(Duration::from_secs(60))
            .expect("a request reached the origin")
    }

    /// Lets `n` held requests answer.
    fn release(&self, n: usize) {
        self.release.add_permits(n);
    }

    fn accepted(&self) -> usize {
        self.accepted.load(Ordering::SeqCst)
    }

    /// Waits (bounded) until `n` of its connections have closed.
    fn wait_closed(&self, n: usize) {
        let deadline = Instant::now() + Duration::from_secs(15);
        while self.closed.load(Ordering::SeqCst) < n {
            assert!(
                Instant::now() < deadline,
                "{} of {} connections closed, not {n}",
                self.closed.load(Ordering::SeqCst),
                self.accepted()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

#[test]
fn requests_past_the_in_flight_limit_fail_until_one_finishes() {
    let (origin, authority, proxy) = proxied_origin(true, &["--outbound-max-concurrent", "1"]);
    let url = |path: &str| format!("{}/http://{authority}/{path}", proxy.server.url);

    let first_url = url("first");
    let first = std::thread::spawn(move || status_and_body(&[&first_url]));
    assert_eq!(origin.next_path(), "/first");

    // The first is in flight (the origin holds it): the second is refused.
    let (status, body) = status_and_body(&["--max-time", "30", &url("second")]);
    assert_eq!(status, "502", "{body}");
    assert!(body.contains("connection limit reached"), "{body}");
    proxy.server.wait_for_log(&format!(
        "app `proxy`: outbound request to {authority} refused: 1 already in flight"
    ));

    origin.release(1);
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
    assert_eq!(origin.next_path(), "/third");
    origin.release(1);
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
    proxy.server.wait_for_log(&format!(
        "app `proxy`: outbound connection to {closed} failed: connecting to {closed}: "
    ));
}

/// An [`Origin`] (`held` or not), its authority and a proxy allowed to reach
/// it with `extra` flags.
fn proxied_origin(held: bool, extra: &[&str]) -> (Origin, String, H3Server) {
    let origin = Origin::start(held);
    let authority = origin.addr.to_string();
    let proxy = proxy(&authority, extra);
    (origin, authority, proxy)
}

/// GETs `path` through `proxy` `n` times, one after another; each must be a 200.
fn get_in_turn(proxy: &Server, origin: &str, n: usize) {
    for i in 0..n {
        let url = format!("{}/http://{origin}/{i}", proxy.url);
        let (status, body) = status_and_body(&["--max-time", "30", &url]);
        assert_eq!(status, "200", "{body}\nproxy log:\n{}", proxy.log());
    }
}

#[test]
fn an_origin_s_repeated_fields_come_back_each_one() {
    let (_origin, authority, proxy) = proxied_origin(false, &[]);
    let url = format!("{}/http://{authority}/cookies", proxy.server.url);
    let out = curl(&["--dump-header", "-", "--output", "/dev/null", &url]);
    let head = String::from_utf8(out.stdout).unwrap();
    let cookies: Vec<&str> = head
        .lines()
        .filter_map(|line| line.strip_prefix("set-cookie: "))
        .collect();
    assert_eq!(cookies, ["a=1; Path=/", "b=2; Path=/"], "{head}");
}

#[test]
fn an_allowed_name_reaches_a_local_origin() {
    let origin = echo_origin();
    let port = origin.authority().rsplit_once(':').unwrap().1;
    let allowed = format!("localhost:{port}");
    let proxy = proxy(&allowed, &[]);
    let url = through(&proxy.server, &allowed);
    let (status, body) = status_and_body(&["--data-binary", "hello", &url]);
    assert_eq!(status, "200", "{body}\nproxy log:\n{}", proxy.server.log());
    assert_eq!(body, "hello");
}

#[test]
fn a_loopback_address_not_on_the_list_is_denied() {
    let origin = Origin::start(false);
    let port = origin.addr.port();
    let proxy = proxy(&format!("localhost:{port}"), &[]);
    let other = format!("127.0.0.2:{port}");
    let (status, body) = status_and_body(&[&through(&proxy.server, &other)]);
    assert_eq!(status, "403", "{body}");
    proxy.server.wait_for_log(&format!(
        "app `proxy`: outbound request to {other} denied (not in --allow-outbound)"
    ));
    assert_eq!(origin.accepted(), 0);
}

/// `127.1` is a name to wedge's allow-list but the resolver (getaddrinfo)
/// reads it as 127.0.0.1: a deterministic stand-in for a public name whose DNS
/// answer is a loopback address.
#[test]
fn a_name_that_resolves_to_loopback_is_denied_unless_the_list_names_the_address() {
    let origin = Origin::start(false);
    let port = origin.addr.port();
    let name = format!("127.1:{port}");
    let by_name = proxy(&name, &[]);
    let (status, body) = status_and_body(&[&through(&by_name.server, &name)]);
    assert_eq!(status, "403", "{body}");
    assert!(body.contains("denied"), "{body}");
    let log = by_name.server.wait_for_log(&format!(
        "app `proxy`: outbound request to {name} denied: it resolves to 127.0.0.1 (loopback), \
         which --allow-outbound does not name"
    ));
    assert_eq!(log.matches("outbound request to").count(), 1, "{log}");
    assert_eq!(origin.accepted(), 0);

    // Naming the address itself allows it.
    let literal = origin.addr.to_string();
    let by_address = proxy(&literal, &[]);
    get_in_turn(&by_address.server, &literal, 1);
}

#[test]
fn sequential_requests_reuse_one_connection() {
    let (origin, authority, proxy) = proxied_origin(false, &[]);
    get_in_turn(&proxy.server, &authority, 5);
    assert_eq!(origin.accepted(), 1);
}

#[test]
fn idle_connections_past_the_per_host_bound_are_closed() {
    let (origin, authority, proxy) = proxied_origin(true, &["--outbound-idle-per-host", "1"]);
    // Three requests at once need three connections.
    let clients: Vec<_> = (0..3)
        .map(|i| {
            let url = format!("{}/http://{authority}/{i}", proxy.server.url);
            std::thread::spawn(move || status_and_body(&["--max-time", "60", &url]))
        })
        .collect();
    for _ in 0..3 {
        origin.next_path();
    }
    origin.release(3);
    for client in clients {
        assert_eq!(client.join().unwrap().0, "200");
    }
    assert_eq!(origin.accepted(), 3);
    // One stays in the pool, the other two are closed once idle.
    origin.wait_closed(2);
    origin.release(1);
    get_in_turn(&proxy.server, &authority, 1);
    assert_eq!(origin.accepted(), 3);
}

#[test]
fn an_idle_connection_is_closed_after_the_idle_timeout() {
    let (origin, authority, proxy) = proxied_origin(false, &["--outbound-idle-timeout", "300ms"]);
    get_in_turn(&proxy.server, &authority, 1);
    origin.wait_closed(1);
}

/// An origin serving `echo` over TLS with its development certificate, logging
/// each request's protocol; and that certificate's file.
fn tls_echo_origin() -> (Server, String) {
    let data = temp_dir("tls-origin");
    let origin = Server::start_in(&example("echo"), &["--access-log"], &data);
    let cert = data.join("tls/dev-cert.pem").display().to_string();
    (origin, cert)
}

/// `127.0.0.1:PORT` of the origin's TLS listener (its certificate names 127.0.0.1).
fn tls_authority(origin: &Server) -> String {
    let url = origin.tls_url.as_deref().expect("a TLS listener");
    let port = url.rsplit_once(':').unwrap().1;
    format!("127.0.0.1:{port}")
}

#[test]
fn h2_over_tls_where_the_origin_offers_it() {
    let (origin, cert) = tls_echo_origin();
    let authority = tls_authority(&origin);
    let proxy = proxy(&authority, &["--outbound-ca", &cert]);
    for i in 0..3 {
        let url = format!("{}/https://{authority}/{i}", proxy.server.url);
        let (status, body) = status_and_body(&["--data-binary", "over h2", &url]);
        assert_eq!(status, "200", "{body}\nproxy log:\n{}", proxy.server.log());
        assert_eq!(body, "over h2");
    }
    let log = origin.wait_for_log("POST /2 200");
    for i in 0..3 {
        let line = log
            .lines()
            .find(|line| line.contains(&format!("POST /{i} 200")))
            .unwrap();
        assert!(line.ends_with(" h2"), "{line}");
    }
}

#[test]
fn an_origin_certificate_no_root_vouches_for_is_a_tls_certificate_error() {
    let (origin, _cert) = tls_echo_origin();
    let authority = tls_authority(&origin);
    let proxy = proxy(&authority, &[]);
    let url = format!("{}/https://{authority}/", proxy.server.url);
    let (status, body) = status_and_body(&[&url]);
    assert_eq!(status, "502", "{body}");
    assert!(body.contains("tls certificate error"), "{body}");
    proxy.server.wait_for_log(&format!(
        "app `proxy`: outbound connection to {authority} failed: TLS: "
    ));
}

#[test]
fn a_bad_outbound_ca_is_one_line_and_exit_2() {
    let dir = temp_dir("bad-ca");
    let not_pem = dir.join("not.pem");
    std::fs::write(&not_pem, "no certificate here\n").unwrap();
    for (file, says) in [
        (not_pem.clone(), "holds no PEM certificate"),
        (dir.join("missing.pem"), "cannot read certificates from"),
    ] {
        let out = support::wedge(
            &[
                "serve",
                example("proxy").to_str().unwrap(),
                "--outbound-ca",
                file.to_str().unwrap(),
            ],
            &dir,
        );
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{stderr}");
        assert_eq!(stderr.lines().count(), 1, "{stderr}");
        assert!(stderr.contains(says), "{stderr}");
    }
}

/// IP literals that reach this host without naming 127.0.0.0/8, `::1` or
/// `localhost`: the unspecified addresses (a connection to one goes to this
/// host) and IPv6 forms of 127.0.0.1 (IPv4-mapped, IPv4-compatible, NAT64).
const DISGUISED_LOOPBACK: [&str; 7] = [
    "0.0.0.0",
    "[::]",
    "[::ffff:7f00:1]",
    "[::ffff:127.0.0.1]",
    "[::127.0.0.1]",
    "[64:ff9b::7f00:1]",
    "[::ffff:0.0.0.0]",
];

/// curl through `proxy` to `http://{origin}/` with `[`/`]` taken literally.
fn through_literally(proxy: &Server, origin: &str) -> (String, String) {
    status_and_body(&["--globoff", "--max-time", "30", &through(proxy, origin)])
}

#[test]
fn a_pattern_naming_an_unspecified_address_or_loopback_in_disguise_is_refused_at_start() {
    let origin = Origin::start(false);
    let port = origin.addr.port();
    for host in DISGUISED_LOOPBACK {
        for pattern in [format!("{host}:{port}"), host.to_string()] {
            let started = Server::start_or_exit(&example("proxy"), &["--allow-outbound", &pattern]);
            let (status, log) = match started {
                Err(exited) => exited,
                Ok(proxy) => {
                    let (status, body) = through_literally(&proxy, &format!("{host}:{port}"));
                    panic!(
                        "`--allow-outbound {pattern}` was accepted: a request to {host}:{port} got \
                         {status} {body:?}; the origin on 127.0.0.1 accepted {} connection(s)",
                        origin.accepted()
                    );
                }
            };
            assert_eq!(status.code(), Some(2), "{pattern}: {log}");
            assert_eq!(log.lines().count(), 1, "{pattern}: {log}");
            assert!(log.contains(&format!("`{pattern}`")), "{pattern}: {log}");
            let why: &[&str] = if host.contains("0.0.0.0") || host == "[::]" {
                &[
                    "the unspecified address",
                    "name 127.0.0.1, ::1 or localhost",
                ]
            } else {
                &["127.0.0.1 (loopback) in IPv6 form", "write `127.0.0.1"]
            };
            for why in why {
                assert!(log.contains(why), "{pattern}: {why:?} not in {log}");
            }
        }
    }
    assert_eq!(origin.accepted(), 0);
}

/// Wherever a request names this host, it reaches a service on 127.0.0.1 only
/// through a pattern that names loopback; a pattern naming 127.0.0.1 still does.
#[test]
fn loopback_in_any_form_is_denied_unless_a_pattern_names_loopback() {
    let origin = Origin::start(false);
    let port = origin.addr.port();
    let named = format!("127.0.0.1:{port}");
    // Names to the allow-list (no pattern may be these addresses), which the
    // resolver reads as 127.0.0.1 (shorthand, decimal, hex, octal) or 0.0.0.0.
    let shorthands = ["127.1", "2130706433", "0x7f000001", "0177.0.0.1"];
    let names: Vec<String> = shorthands
        .iter()
        .chain(&["0"])
        .map(|name| format!("{name}:{port}"))
        .collect();
    let extra: Vec<&str> = names
        .iter()
        .flat_map(|name| ["--allow-outbound", name.as_str()])
        .collect();
    let proxy = proxy(&named, &extra);
    let denied = |authority: &str, why: &str| {
        let (status, body) = through_literally(&proxy.server, authority);
        assert_eq!(status, "403", "{authority}: {body}");
        proxy.server.wait_for_log(&format!(
            "app `proxy`: outbound request to {authority} denied{why}"
        ));
    };
    for host in DISGUISED_LOOPBACK {
        denied(&format!("{host}:{port}"), " (not in --allow-outbound)");
    }
    for name in shorthands {
        denied(
            &format!("{name}:{port}"),
            ": it resolves to 127.0.0.1 (loopback), which --allow-outbound does not name",
        );
    }
    denied(
        &format!("0:{port}"),
        ": it resolves to 0.0.0.0 (unspecified), which is never a destination",
    );
    assert_eq!(origin.accepted(), 0, "{}", proxy.server.log());
    get_in_turn(&proxy.server, &named, 1);
    assert_eq!(origin.accepted(), 1);
}
