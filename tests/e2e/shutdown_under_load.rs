//! Shutdown under load (issue #9 item 3): SIGTERM while HTTP/1.1, HTTP/2 and HTTP/3
//! clients keep sending. Every request whose handler started completes with its whole
//! body; the others are refused cleanly (connection refused or closed before a response
//! head, GOAWAY, REFUSED_STREAM, H3_REQUEST_REJECTED, H3_NO_ERROR); none is cut off; and
//! wedge exits 0 within its drain deadline, after which its ports refuse connections.

use std::collections::{BTreeMap, BTreeSet};
use std::net::{SocketAddr, TcpStream as StdTcpStream, UdpSocket};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Empty};
use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;

use support::sigterm;

/// Each request sleeps `BASE_MS + its number` ms in the guest, so the guest's
/// "sleeping N ms" log line names the request.
const BASE_MS: u64 = 300;
/// Bounds on the load: requests in all, and how long any of it may take.
const MAX_REQUESTS: u64 = 600;
const MAX_PER_REQUEST: Duration = Duration::from_secs(30);
/// A refused client waits this long before trying again (load pacing, not sync).
const RETRY_PAUSE: Duration = Duration::from_millis(20);
/// How long a QUIC handshake waits for an answer (one to an exited server gets none).
const H3_CONNECT_TIMEOUT: Duration = Duration::from_secs(2);
/// The drain deadline given to wedge, and the requests each protocol must have running
/// when the signal is sent.
const DRAIN: Duration = Duration::from_secs(20);
const IN_FLIGHT_AT_SIGNAL: usize = 3;
const WARM_UP: usize = 8;
/// Clients per protocol: h1 one per connection; h2 and h3 two per connection.
const H1_CLIENTS: usize = 4;
const MUX_CONNECTIONS: usize = 2;
const CLIENTS_PER_CONNECTION: usize = 2;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Proto {
    H1,
    H2,
    H3,
}

const PROTOS: [Proto; 3] = [Proto::H1, Proto::H2, Proto::H3];

#[derive(Debug, Clone)]
enum Outcome {
    /// 200 with exactly the expected body.
    Complete,
    /// No response head, and the server said so cleanly.
    Refused(&'static str),
    /// A head without its whole body, or an unclean error.
    Broken(String),
    /// A QUIC handshake begun at this instant got no answer: clean only if the server
    /// was exiting, i.e. it answered no request after.
    Unanswered(Instant),
}

/// Every request made, by its sleep (its name), with its protocol and outcome.
#[derive(Default)]
struct Ledger {
    next: AtomicU64,
    stop: AtomicBool,
    /// When the last request completed.
    last_complete: Mutex<Option<Instant>>,
    records: Mutex<BTreeMap<u64, (Proto, Option<Outcome>)>>,
}

impl Ledger {
    /// The next request's sleep in ms, or `None` once the load is over.
    fn begin(&self, proto: Proto) -> Option<u64> {
        if self.stop.load(Ordering::SeqCst) {
            return None;
        }
        let n = self.next.fetch_add(1, Ordering::SeqCst);
        (n < MAX_REQUESTS).then(|| {
            let ms = BASE_MS + n;
            self.records.lock().unwrap().insert(ms, (proto, None));
            ms
        })
    }

    fn end(&self, ms: u64, outcome: Outcome) {
        if matches!(outcome, Outcome::Complete) {
            *self.last_complete.lock().unwrap() = Some(Instant::now());
        }
        self.records.lock().unwrap().get_mut(&ms).unwrap().1 = Some(outcome);
    }

    /// Whether `proto` has completed `WARM_UP` requests and has `IN_FLIGHT_AT_SIGNAL`
    /// handlers running.
    fn steady(&self, proto: Proto, started: &BTreeSet<u64>) -> bool {
        let complete = self
            .records
            .lock()
            .unwrap()
            .values()
            .filter(|(p, outcome)| *p == proto && matches!(outcome, Some(Outcome::Complete)))
            .count();
        complete >= WARM_UP && self.running(proto, started) >= IN_FLIGHT_AT_SIGNAL
    }

    /// Requests of `proto` in `started` that have no outcome yet.
    fn running(&self, proto: Proto, started: &BTreeSet<u64>) -> usize {
        let records = self.records.lock().unwrap();
        started
            .iter()
            .filter(|ms| matches!(records.get(ms), Some((p, None)) if *p == proto))
            .count()
    }
}

/// The sleeps whose handler has started, from the server's log.
fn started(log: &str) -> BTreeSet<u64> {
    log.lines()
        .filter_map(|line| {
            let rest = line.split("[faults] sleeping ").nth(1)?;
            rest.strip_suffix(" ms")?.parse().ok()
        })
        .collect()
}

/// Where the clients connect.
struct Target {
    plain: SocketAddr,
    /// The TLS port; HTTP/3 is on it over UDP.
    tls: SocketAddr,
    ca: PathBuf,
}

fn path(ms: u64) -> String {
    format!("/sleep?ms={ms}")
}

fn expected(ms: u64) -> Vec<u8> {
    format!("slept {ms}\n").into_bytes()
}

fn check(ms: u64, status: http::StatusCode, body: &[u8]) -> Outcome {
    if status == http::StatusCode::OK && body == expected(ms) {
        Outcome::Complete
    } else {
        Outcome::Broken(format!(
            "{status} with body {:?}",
            String::from_utf8_lossy(body)
        ))
    }
}

// ---- HTTP/1.1 (hyper's client, one connection per client, kept alive) ----

type H1Sender = hyper::client::conn::http1::SendRequest<Empty<Bytes>>;

async fn h1_get(conn: &mut Option<H1Sender>, target: &Target, ms: u64) -> Outcome {
    if conn.as_ref().is_none_or(|c| c.is_closed()) {
        // Not yet connected, or the server closed the last one (Connection: close).
        let Ok(tcp) = TcpStream::connect(target.plain).await else {
            return Outcome::Refused("connection refused");
        };
        let Ok((sender, connection)) =
            hyper::client::conn::http1::handshake(TokioIo::new(tcp)).await
        else {
            return Outcome::Refused("closed at connect");
        };
        tokio::spawn(connection);
        *conn = Some(sender);
    }
    let sender = conn.as_mut().unwrap();
    let request = http::Request::get(path(ms))
        .header("host", "localhost")
        .body(Empty::new())
        .unwrap();
    let response = match sender.send_request(request).await {
        Ok(response) => response,
        Err(err) => {
            *conn = None;
            // The server closed the connection before answering (RFC 9112 §9.6: a
            // request not answered was not processed; the guest log shows otherwise).
            return if err.is_canceled() || err.is_incomplete_message() {
                Outcome::Refused("closed before the head")
            } else {
                Outcome::Broken(format!("before the head: {err}"))
            };
        }
    };
    let status = response.status();
    match response.into_body().collect().await {
        Ok(body) => check(ms, status, &body.to_bytes()),
        Err(err) => Outcome::Broken(format!("body cut off: {err}")),
    }
}

// ---- HTTP/2 (the h2 crate over h2c prior knowledge, streams multiplexed) ----

/// One connection shared by several clients, replaced once it refuses.
struct Shared<C>(tokio::sync::Mutex<Option<C>>);

impl<C: Clone> Shared<C> {
    fn new() -> Arc<Self> {
        Arc::new(Shared(tokio::sync::Mutex::new(None)))
    }

    async fn get<F: Future<Output = Result<C, Outcome>>>(
        &self,
        connect: impl FnOnce() -> F,
    ) -> Result<C, Outcome> {
        let mut slot = self.0.lock().await;
        if slot.is_none() {
            *slot = Some(connect().await?);
        }
        Ok(slot.clone().unwrap())
    }

    async fn forget(&self) {
        *self.0.lock().await = None;
    }
}

type H2Sender = h2::client::SendRequest<Bytes>;

async fn h2_connect(target: &Target) -> Result<H2Sender, Outcome> {
    let tcp = TcpStream::connect(target.plain)
        .await
        .map_err(|_| Outcome::Refused("connection refused"))?;
    let (send, connection) = h2::client::handshake(tcp)
        .await
        .map_err(|_| Outcome::Refused("closed at connect"))?;
    tokio::spawn(connection);
    Ok(send)
}

/// An error before the response head: clean if it is the server's GOAWAY (a stream
/// above its last-stream-id, or opened after it) or REFUSED_STREAM (RFC 9113 §6.8).
fn h2_refusal(err: &h2::Error) -> Outcome {
    let reason = err.reason();
    if err.is_go_away() && err.is_remote() && reason == Some(h2::Reason::NO_ERROR) {
        Outcome::Refused("GOAWAY")
    } else if reason == Some(h2::Reason::REFUSED_STREAM) {
        Outcome::Refused("REFUSED_STREAM")
    } else {
        Outcome::Broken(format!("before the head: {err}"))
    }
}

async fn h2_get(conn: &Shared<H2Sender>, target: &Target, ms: u64) -> Outcome {
    let send = match conn.get(|| h2_connect(target)).await {
        Ok(send) => send,
        Err(refused) => return refused,
    };
    let request = http::Request::get(format!("http://localhost{}", path(ms)))
        .body(())
        .unwrap();
    let response = async {
        let mut send = send.ready().await?;
        let (response, _) = send.send_request(request, true)?;
        response.await
    };
    let response = match response.await {
        Ok(response) => response,
        Err(err) => {
            conn.forget().await;
            return h2_refusal(&err);
        }
    };
    let status = response.status();
    let mut body = response.into_body();
    let mut all = Vec::new();
    while let Some(chunk) = body.data().await {
        match chunk {
            Ok(chunk) => {
                let _ = body.flow_control().release_capacity(chunk.len());
                all.extend_from_slice(&chunk);
            }
            Err(err) => return Outcome::Broken(format!("body cut off: {err}")),
        }
    }
    check(ms, status, &all)
}

// ---- HTTP/3 (the h3 crate over quinn, streams multiplexed) ----

async fn h3_connect(target: &Target) -> Result<support::h3::Requests, Outcome> {
    let began = Instant::now();
    let mut endpoint = quinn::Endpoint::client("127.0.0.1:0".parse().unwrap()).unwrap();
    endpoint.set_default_client_config(support::h3::client_config(&target.ca, None));
    let connecting = endpoint.connect(target.tls, "localhost").unwrap();
    let quic = match tokio::time::timeout(H3_CONNECT_TIMEOUT, connecting).await {
        Ok(Ok(quic)) => quic,
        // A draining server refuses the handshake (CONNECTION_REFUSED).
        Ok(Err(_)) => return Err(Outcome::Refused("handshake refused")),
        // One that has exited answers nothing (UDP has no RST): judged at the end.
        Err(_) => return Err(Outcome::Unanswered(began)),
    };
    let (mut driver, requests) = h3::client::new(h3_quinn::Connection::new(quic))
        .await
        .map_err(|err| match err.is_h3_no_error() {
            true => Outcome::Refused("closed with H3_NO_ERROR"),
            false => Outcome::Broken(format!("at connect: {err}")),
        })?;
    tokio::spawn(async move {
        let _ = std::future::poll_fn(|cx| driver.poll_close(cx)).await;
    });
    Ok(requests)
}

/// An error before the response head: clean if the server's GOAWAY stopped it
/// (RemoteClosing), it rejected the stream (H3_REQUEST_REJECTED) or closed the
/// connection with H3_NO_ERROR (RFC 9114 §5.2).
fn h3_refusal(err: &h3::error::StreamError) -> Outcome {
    use h3::error::{Code, StreamError};
    match err {
        StreamError::RemoteClosing { .. } => Outcome::Refused("GOAWAY"),
        StreamError::RemoteTerminate { code, .. } if *code == Code::H3_REQUEST_REJECTED => {
            Outcome::Refused("H3_REQUEST_REJECTED")
        }
        err if err.is_h3_no_error() => Outcome::Refused("closed with H3_NO_ERROR"),
        err => Outcome::Broken(format!("before the head: {err:?}")),
    }
}

async fn h3_get(conn: &Shared<support::h3::Requests>, target: &Target, ms: u64) -> Outcome {
    let mut requests = match conn.get(|| h3_connect(target)).await {
        Ok(requests) => requests,
        Err(refused) => return refused,
    };
    let request = support::h3::request("GET", &path(ms));
    let head = async {
        let mut stream = requests.send_request(request).await?;
        stream.finish().await?;
        let response = stream.recv_response().await?;
        Ok::<_, h3::error::StreamError>((stream, response))
    };
    let (mut stream, response) = match head.await {
        Ok(head) => head,
        Err(err) => {
            conn.forget().await;
            return h3_refusal(&err);
        }
    };
    match support::h3::read_body(&mut stream).await {
        Ok(body) => check(ms, response.status(), &body),
        Err(err) => Outcome::Broken(format!("body cut off: {err:?}")),
    }
}

// ---- the load ----

enum Client {
    H1(Option<H1Sender>),
    H2(Arc<Shared<H2Sender>>),
    H3(Arc<Shared<support::h3::Requests>>),
}

impl Client {
    fn proto(&self) -> Proto {
        match self {
            Client::H1(_) => Proto::H1,
            Client::H2(_) => Proto::H2,
            Client::H3(_) => Proto::H3,
        }
    }

    async fn get(&mut self, target: &Target, ms: u64) -> Outcome {
        match self {
            Client::H1(conn) => h1_get(conn, target, ms).await,
            Client::H2(conn) => h2_get(conn, target, ms).await,
            Client::H3(conn) => h3_get(conn, target, ms).await,
        }
    }
}

/// Sends requests one after another until the load is over.
async fn run(mut client: Client, target: Arc<Target>, ledger: Arc<Ledger>) {
    while let Some(ms) = ledger.begin(client.proto()) {
        let outcome = tokio::time::timeout(MAX_PER_REQUEST, client.get(&target, ms))
            .await
            .unwrap_or_else(|_| Outcome::Broken("no answer".into()));
        let refused = matches!(outcome, Outcome::Refused(_));
        ledger.end(ms, outcome);
        if refused {
            tokio::time::sleep(RETRY_PAUSE).await;
        }
    }
}

fn clients() -> Vec<Client> {
    let mut clients: Vec<Client> = (0..H1_CLIENTS).map(|_| Client::H1(None)).collect();
    for _ in 0..MUX_CONNECTIONS {
        let h2 = Shared::new();
        let h3 = Shared::new();
        for _ in 0..CLIENTS_PER_CONNECTION {
            clients.push(Client::H2(h2.clone()));
            clients.push(Client::H3(h3.clone()));
        }
    }
    clients
}

/// What happened to one protocol's requests.
#[derive(Default, Debug)]
struct Tally {
    requests: usize,
    complete: usize,
    refused: BTreeMap<&'static str, usize>,
    broken: Vec<(u64, String)>,
}

fn tally(ledger: &Ledger, proto: Proto) -> Tally {
    let last_complete = ledger.last_complete.lock().unwrap().unwrap();
    let mut tally = Tally::default();
    for (ms, (p, outcome)) in ledger.records.lock().unwrap().iter() {
        if *p != proto {
            continue;
        }
        tally.requests += 1;
        match outcome {
            Some(Outcome::Complete) => tally.complete += 1,
            Some(Outcome::Refused(why)) => *tally.refused.entry(why).or_default() += 1,
            Some(Outcome::Broken(why)) => tally.broken.push((*ms, why.clone())),
            Some(Outcome::Unanswered(began)) if *began > last_complete => {
                *tally
                    .refused
                    .entry("no answer (server exiting)")
                    .or_default() += 1
            }
            Some(Outcome::Unanswered(_)) => tally
                .broken
                .push((*ms, "handshake unanswered while still serving".into())),
            None => tally.broken.push((*ms, "never finished".into())),
        }
    }
    tally
}

fn is_complete(ledger: &Ledger, ms: u64) -> bool {
    matches!(
        ledger.records.lock().unwrap().get(&ms),
        Some((_, Some(Outcome::Complete)))
    )
}

fn refuses_tcp(addr: SocketAddr) -> bool {
    StdTcpStream::connect_timeout(&addr, Duration::from_secs(5))
        .is_err_and(|err| err.kind() == std::io::ErrorKind::ConnectionRefused)
}

/// Whether a datagram to `addr` comes back as "port unreachable".
fn refuses_udp(addr: SocketAddr) -> bool {
    let socket = UdpSocket::bind("127.0.0.1:0").unwrap();
    socket.connect(addr).unwrap();
    socket
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    let _ = socket.send(b"anyone?");
    socket
        .recv(&mut [0; 64])
        .is_err_and(|err| err.kind() == std::io::ErrorKind::ConnectionRefused)
}

fn target(server: &support::h3::H3Server, ca: &Path) -> Target {
    Target {
        plain: server.server.authority().parse().unwrap(),
        tls: server.addr(),
        ca: ca.to_path_buf(),
    }
}

#[test]
fn sigterm_under_load_loses_no_request_on_any_protocol() {
    let drain = format!("{}s", DRAIN.as_secs());
    let server = support::h3::start("faults", &["--drain-timeout", &drain]);
    let target = Arc::new(target(&server, &server.data_dir.join("tls/dev-cert.pem")));
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let ledger = Arc::new(Ledger::default());
    let load: Vec<_> = clients()
        .into_iter()
        .map(|client| runtime.spawn(run(client, target.clone(), ledger.clone())))
        .collect();

    // Steady load: every protocol has answered requests already, and several of its
    // handlers are running (their "sleeping" lines are logged, their clients waiting).
    let deadline = Instant::now() + Duration::from_secs(60);
    let in_flight = loop {
        let started = started(&server.server.log());
        if PROTOS.iter().all(|&p| ledger.steady(p, &started)) {
            break started;
        }
        assert!(
            Instant::now() < deadline,
            "never had {IN_FLIGHT_AT_SIGNAL} requests of each protocol in flight:\n{}",
            server.server.log()
        );
        std::thread::sleep(Duration::from_millis(5));
    };
    let at_signal = PROTOS.map(|p| ledger.running(p, &in_flight));
    let signalled = Instant::now();
    sigterm(server.server.pid());
    let (status, log) = server.server.wait_exit(DRAIN + Duration::from_secs(10));
    let drained = signalled.elapsed();

    // The process is gone: its ports refuse, on TCP and on UDP.
    assert!(
        refuses_tcp(target.plain),
        "the cleartext port still accepts"
    );
    assert!(refuses_tcp(target.tls), "the TLS port still accepts");
    assert!(refuses_udp(target.tls), "the HTTP/3 port still answers");
    ledger.stop.store(true, Ordering::SeqCst);
    runtime.block_on(async {
        let all = async {
            for client in load {
                client.await.unwrap();
            }
        };
        tokio::time::timeout(MAX_PER_REQUEST + H3_CONNECT_TIMEOUT, all)
            .await
            .expect("the clients stop once the load is over");
    });

    assert_eq!(status.code(), Some(0), "{log}");
    assert!(drained < DRAIN, "draining took {drained:?}:\n{log}");
    assert!(!log.contains("drain deadline passed"), "{log}");
    let mut figures = format!("drain {drained:.2?}\n");
    for (proto, at_signal) in PROTOS.into_iter().zip(at_signal) {
        let tally = tally(&ledger, proto);
        figures.push_str(&format!(
            "{proto:?}: {} requests, {at_signal} in flight at the signal, {} complete, \
             refused {:?}, {} broken\n",
            tally.requests,
            tally.complete,
            tally.refused,
            tally.broken.len()
        ));
        assert!(tally.broken.is_empty(), "{proto:?} broken: {tally:?}");
        // The load went on through the drain and was turned away.
        assert!(
            !tally.refused.is_empty(),
            "{proto:?} never refused: {tally:?}"
        );
    }
    eprintln!("{figures}");
    // Every handler that was running at the signal, and every one that started at all,
    // got its whole response to its client.
    let lost: Vec<u64> = started(&log)
        .union(&in_flight)
        .copied()
        .filter(|&ms| !is_complete(&ledger, ms))
        .collect();
    assert!(
        lost.is_empty(),
        "started but not completed: {lost:?}\n{log}"
    );
}
