//! Peer faults at the TCP and TLS level, against the real binary with short
//! connection timeouts: a client that half-closes, one that resets mid-request, TLS
//! garbage, and slowloris at every stage before a request runs (TCP, TLS handshake,
//! HTTP/1.1 head, HTTP/2 preface, SETTINGS and header block) and while its body is
//! read. Each is bounded by its timeout (the log names the limit applied, so the
//! configured one is shown to be the one at work) and counted in
//! `wedge_connections_closed_total` (or, for a body, in the app's wall-time faults);
//! the server serves on.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use support::admin::Admin;
use support::admin::parse_text::Samples;
use support::h2::raw::Raw;
use support::{curl, example, pattern};
use wedge_proto::h2::PREFACE;
use wedge_proto::h2::frame::{self, FrameType};

/// The timeouts under test, all short.
const FLAGS: &[&str] = &[
    "--handshake-timeout=300ms",
    "--h1-header-read-timeout=300ms",
    "--h2-handshake-timeout=300ms",
    "--h2-header-read-timeout=300ms",
];

/// The connection-level debug lines name each close and its limit.
const LOG: &str = "info,wedge::net=debug";

/// `faults` on `/`, `upload` (reads its whole body, then answers) on `/upload` with a
/// wall time of 1 s.
fn start() -> Admin {
    let apps = format!(
        "[[app]]\nname = \"faults\"\ncomponent = \"{}\"\nroutes = [\"/\"]\n\n\
         [[app]]\nname = \"upload\"\ncomponent = \"{}\"\nroutes = [\"/upload\"]\n\n\
         [app.limits]\nwall_time = \"1s\"\n",
        example("faults").display(),
        example("upload").display(),
    );
    Admin::start(&apps, FLAGS, LOG)
}

async fn start_async() -> Arc<Admin> {
    Arc::new(tokio::task::spawn_blocking(start).await.unwrap())
}

fn closed(samples: &Samples, reason: &str) -> f64 {
    samples.get("wedge_connections_closed_total", &[("reason", reason)])
}

fn running(samples: &Samples, app: &str) -> f64 {
    samples.get("wedge_instances_running", &[("app", app)])
}

/// Scrapes (off the async threads) until `ready` holds.
async fn scrape_until(
    admin: &Arc<Admin>,
    what: &str,
    ready: impl Fn(&Samples) -> bool + Send + 'static,
) -> Samples {
    let admin = admin.clone();
    let what = what.to_string();
    tokio::task::spawn_blocking(move || admin.scrape_until(&what, ready))
        .await
        .unwrap()
}

async fn scrape(admin: &Arc<Admin>) -> Samples {
    scrape_until(admin, "a scrape", |_| true).await
}

async fn wait_for_log(admin: &Arc<Admin>, needle: &str) {
    let admin = admin.clone();
    let needle = needle.to_string();
    tokio::task::spawn_blocking(move || admin.server.wait_for_log(&needle))
        .await
        .unwrap();
}

fn plain_addr(admin: &Admin) -> String {
    admin.server.authority().to_string()
}

fn tls_addr(admin: &Admin) -> String {
    let url = admin.server.tls_url.as_deref().expect("a TLS listener");
    url.trim_start_matches("https://").to_string()
}

/// Healthy requests over HTTP/1.1, h2c and TLS are answered.
async fn still_serves(admin: &Arc<Admin>) {
    let plain = admin.server.url.clone();
    let tls = admin.server.tls_url.clone().unwrap();
    let codes = tokio::task::spawn_blocking(move || {
        let urls = [
            (&["--http1.1"][..], format!("{plain}/sleep?ms=0")),
            (
                &["--http2-prior-knowledge"][..],
                format!("{plain}/sleep?ms=0"),
            ),
            (&["-k", "--http2"][..], format!("{tls}/sleep?ms=0")),
        ];
        urls.map(|(args, url)| {
            let out = curl(&[args, &["-o", "/dev/null", "-w", "%{http_code}", &url]].concat());
            String::from_utf8(out.stdout).unwrap()
        })
    })
    .await
    .unwrap();
    assert_eq!(codes, ["200", "200", "200"]);
}

/// A ClientHello as rustls writes it (TLS 1.3 and 1.2, ALPN h2).
fn client_hello() -> Vec<u8> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(rustls::RootCertStore::empty())
        .with_no_client_auth();
    config.alpn_protocols = vec![b"h2".to_vec()];
    let name = "localhost".try_into().unwrap();
    let mut conn = rustls::ClientConnection::new(Arc::new(config), name).unwrap();
    let mut hello = Vec::new();
    conn.write_tls(&mut hello).unwrap();
    hello
}

/// A slow (or broken) peer: what it sends at once, then what it dribbles, one octet
/// each 50 ms, until the server closes.
struct Slow {
    stage: &'static str,
    tls: bool,
    at_once: Vec<u8>,
    dribbled: Vec<u8>,
    /// The close it must cause, as counted.
    reason: &'static str,
    /// The debug line the close writes, naming the limit applied.
    log: &'static str,
}

/// The slowloris stages before a request runs, and TLS garbage.
fn slow_peers() -> Vec<Slow> {
    let hello = client_hello();
    let (hello_half, hello_rest) = hello.split_at(hello.len() / 2);
    let mut preface_and_settings = PREFACE.to_vec();
    frame::encode_settings(&mut preface_and_settings, &[]);
    // A HEADERS frame without END_HEADERS whose CONTINUATION never ends.
    let mut head_started = preface_and_settings;
    head_started.extend(h2_frame(FrameType::Headers, &[0x82]));
    let continuation = h2_frame(FrameType::Continuation, &[0x40; 4096]);
    // Not a TLS record (0x16 would start one): garbage the server must refuse.
    let mut garbage = b"\x00garbage, not TLS\r\n".to_vec();
    garbage.extend(pattern(2048, 7));
    vec![
        Slow {
            stage: "TCP connect, then nothing",
            tls: false,
            at_once: Vec::new(),
            dribbled: Vec::new(),
            reason: "handshake_timeout",
            log: "connection closed: no request bytes within 300ms",
        },
        Slow {
            stage: "TLS handshake half done",
            tls: true,
            at_once: hello_half.to_vec(),
            dribbled: hello_rest.to_vec(),
            reason: "handshake_timeout",
            log: "connection closed: no TLS handshake within 300ms",
        },
        Slow {
            stage: "TLS handshake garbage",
            tls: true,
            at_once: garbage,
            dribbled: Vec::new(),
            reason: "tls_error",
            log: "connection closed: TLS handshake failed",
        },
        Slow {
            stage: "HTTP/1.1 head dribbled",
            tls: false,
            at_once: b"GET /sleep?ms=0 HTTP/1.1\r\nhost: x\r\n".to_vec(),
            dribbled: b"x-slow: ".iter().chain(&[b'a'; 4096]).copied().collect(),
            reason: "header_timeout",
            log: "http/1.1 connection closed: no whole request head within 300ms",
        },
        Slow {
            stage: "HTTP/2 preface dribbled",
            tls: false,
            at_once: Vec::new(),
            dribbled: PREFACE.to_vec(),
            reason: "handshake_timeout",
            log: "connection closed: no request bytes within 300ms",
        },
        Slow {
            stage: "HTTP/2 preface without SETTINGS",
            tls: false,
            at_once: PREFACE.to_vec(),
            dribbled: Vec::new(),
            reason: "handshake_timeout",
            log: "http/2 connection closed: no preface and SETTINGS for 300ms",
        },
        Slow {
            stage: "HTTP/2 header block dribbled",
            tls: false,
            at_once: head_started,
            dribbled: continuation,
            reason: "header_timeout",
            log: "http/2 connection closed: a header block unfinished for 300ms",
        },
    ]
}

/// An HTTP/2 frame on stream 1 with no flags.
fn h2_frame(kind: FrameType, payload: &[u8]) -> Vec<u8> {
    let len = (payload.len() as u32).to_be_bytes();
    let mut frame = vec![len[1], len[2], len[3], kind as u8, 0];
    frame.extend_from_slice(&1u32.to_be_bytes());
    frame.extend_from_slice(payload);
    frame
}

/// Plays `slow` against the server; returns once the server closed the connection.
async fn play(admin: &Admin, slow: &Slow) {
    let addr = if slow.tls {
        tls_addr(admin)
    } else {
        plain_addr(admin)
    };
    let stream = TcpStream::connect(addr).await.unwrap();
    let (mut reader, mut writer) = stream.into_split();
    writer.write_all(&slow.at_once).await.unwrap();
    let dribbled = slow.dribbled.clone();
    let dribble = async move {
        for octet in dribbled {
            tokio::time::sleep(Duration::from_millis(50)).await;
            if writer.write_all(&[octet]).await.is_err() {
                break;
            }
        }
        // All sent (or refused): keep the connection open, saying nothing more.
        std::future::pending::<()>().await;
    };
    let until_closed = async {
        let mut buf = [0u8; 4096];
        // An alert, a GOAWAY or nothing, then the close (or a reset).
        while let Ok(n) = reader.read(&mut buf).await {
            if n == 0 {
                break;
            }
        }
    };
    // A bound, not a synchronisation: a server that never closes fails here.
    tokio::time::timeout(Duration::from_secs(30), async {
        tokio::select! {
            () = until_closed => {}
            () = dribble => {}
        }
    })
    .await
    .unwrap_or_else(|_| panic!("{}: the server never closed the connection", slow.stage));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_and_garbled_peers_are_closed_at_each_stage_and_counted() {
    let admin = start_async().await;
    for slow in slow_peers() {
        let before = closed(&scrape(&admin).await, slow.reason);
        play(&admin, &slow).await;
        wait_for_log(&admin, slow.log).await;
        let reason = slow.reason;
        let samples = scrape_until(&admin, slow.stage, move |s| {
            closed(s, reason) >= before + 1.0
        })
        .await;
        assert_eq!(closed(&samples, reason), before + 1.0, "{}", slow.stage);
        still_serves(&admin).await;
    }
    // Nothing else was counted: one close per stage, every one for its reason.
    let samples = scrape(&admin).await;
    let total: f64 = ["handshake_timeout", "tls_error", "header_timeout"]
        .iter()
        .map(|reason| closed(&samples, reason))
        .sum();
    assert_eq!(total, slow_peers().len() as f64, "{samples:?}");
    for reason in ["reset", "incomplete", "protocol_error", "idle_timeout"] {
        assert_eq!(closed(&samples, reason), 0.0, "{reason}: {samples:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_half_closes_after_its_request_gets_the_response() {
    let admin = start_async().await;
    let mut stream = TcpStream::connect(plain_addr(&admin)).await.unwrap();
    stream
        .write_all(b"GET /sleep?ms=100 HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n")
        .await
        .unwrap();
    // No more from this side: FIN while the handler runs.
    stream.shutdown().await.unwrap();
    let mut response = Vec::new();
    tokio::time::timeout(Duration::from_secs(30), stream.read_to_end(&mut response))
        .await
        .expect("the server neither answered nor closed")
        .unwrap();
    let response = String::from_utf8_lossy(&response);
    assert!(response.starts_with("HTTP/1.1 200 "), "{response}");
    assert!(response.ends_with("\r\n\r\nslept 100\n"), "{response}");
    let samples = scrape(&admin).await;
    assert_eq!(closed(&samples, "incomplete"), 0.0);
}

/// Opens a request to `upload` over h1 or h2 that sends part of a long body, and
/// returns the socket once the guest is running (reading it).
async fn upload_in_flight(admin: &Arc<Admin>, h2: bool) -> TcpStream {
    let stream = TcpStream::connect(plain_addr(admin)).await.unwrap();
    let part = pattern(64 * 1024, 3);
    let mut raw = Raw::new(stream);
    if h2 {
        raw.post(1, "/upload").data(1, &part[..16 * 1024], false);
    } else {
        raw.out.clear();
        let head = "POST /upload HTTP/1.1\r\nhost: x\r\ncontent-length: 10000000\r\n\r\n";
        raw.out.extend_from_slice(head.as_bytes());
        raw.out.extend_from_slice(&part);
    }
    raw.flush().await;
    scrape_until(admin, "the upload's handler running", |s| {
        running(s, "upload") == 1.0
    })
    .await;
    raw.io
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reset_mid_request_releases_the_instance_and_is_counted() {
    let admin = start_async().await;
    for (h2, protocol) in [(false, "h1"), (true, "h2")] {
        let before = closed(&scrape(&admin).await, "reset");
        let stream = upload_in_flight(&admin, h2).await;
        // RST, not FIN: SO_LINGER 0, then close.
        stream.set_zero_linger().unwrap();
        drop(stream);
        let samples = scrape_until(&admin, "the reset counted and released", move |s| {
            closed(s, "reset") >= before + 1.0
                && running(s, "upload") == 0.0
                && s.get("wedge_connections_open", &[("protocol", protocol)]) == 0.0
        })
        .await;
        assert_eq!(closed(&samples, "reset"), before + 1.0, "{protocol}");
        still_serves(&admin).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dribbled_body_is_bounded_by_the_wall_time() {
    let admin = start_async().await;
    // HTTP/1.1: a body of 100 kB, one octet each 50 ms, while the response is awaited.
    let stream = TcpStream::connect(plain_addr(&admin)).await.unwrap();
    let (mut reader, mut writer) = stream.into_split();
    let head = "POST /upload HTTP/1.1\r\nhost: x\r\ncontent-length: 100000\r\n\r\n";
    writer.write_all(head.as_bytes()).await.unwrap();
    let dribble = async move {
        loop {
            tokio::time::sleep(Duration::from_millis(50)).await;
            if writer.write_all(b"x").await.is_err() {
                std::future::pending::<()>().await;
            }
        }
    };
    let answer = async {
        let mut status = [0u8; 12];
        reader.read_exact(&mut status).await.unwrap();
        String::from_utf8_lossy(&status).into_owned()
    };
    let status = tokio::time::timeout(Duration::from_secs(30), async {
        tokio::select! {
            status = answer => status,
            () = dribble => unreachable!(),
        }
    })
    .await
    .expect("no answer to the dribbled body");
    assert_eq!(status, "HTTP/1.1 504");

    // HTTP/2 (the h2 crate): DATA of one octet each 50 ms.
    let addr = plain_addr(&admin).parse().unwrap();
    let mut client = support::h2::client_with(addr, h2::client::Builder::new()).await;
    let (response, mut body) = client
        .send_request(support::h2::post("/upload"), false)
        .unwrap();
    let dribble = async move {
        loop {
            tokio::time::sleep(Duration::from_millis(50)).await;
            if body.send_data(Bytes::from_static(b"x"), false).is_err() {
                std::future::pending::<()>().await;
            }
        }
    };
    let response = tokio::time::timeout(Duration::from_secs(30), async {
        tokio::select! {
            response = response => response.unwrap(),
            () = dribble => unreachable!(),
        }
    })
    .await
    .expect("no answer to the dribbled body");
    assert_eq!(response.status(), 504);

    wait_for_log(&admin, "app `upload`: wall-clock limit of 1s exceeded").await;
    let samples = scrape_until(&admin, "both wall-time faults", |s| {
        s.get(
            "wedge_guest_faults_total",
            &[("app", "upload"), ("kind", "wall_timeout")],
        ) == 2.0
            && running(s, "upload") == 0.0
    })
    .await;
    assert_eq!(running(&samples, "upload"), 0.0);
    still_serves(&admin).await;
}

/// A connection from `from` (a loopback address) to `addr` that got one answer, so
/// the server has accepted it and holds it (kept alive); `None` if the server closed
/// it instead.
async fn held_connection(from: &str, addr: &str) -> Option<TcpStream> {
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.bind(format!("{from}:0").parse().unwrap()).unwrap();
    let mut stream = socket.connect(addr.parse().unwrap()).await.unwrap();
    let request = b"GET /sleep?ms=0 HTTP/1.1\r\nhost: x\r\n\r\n";
    if stream.write_all(request).await.is_err() {
        return None;
    }
    let mut head = [0u8; 12];
    match stream.read_exact(&mut head).await {
        Ok(_) if head.starts_with(b"HTTP/1.1 200") => {
            // The rest of the answer, so the connection is idle again.
            let mut rest = [0u8; 4096];
            let _ = tokio::time::timeout(Duration::from_millis(100), stream.read(&mut rest)).await;
            Some(stream)
        }
        _ => None,
    }
}

/// Attack review (issue 16): one client holding ~20,000 idle connections ran wedge
/// out of file descriptors, and every tenant stopped answering. A client gets at
/// most `--max-connections-per-client`, everyone together `--max-connections`;
/// past either a new connection is closed on arrival, counted and logged, and a
/// place freed is taken again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_client_holds_at_most_its_share_of_connections_and_all_at_most_the_cap() {
    let admin = Arc::new(
        tokio::task::spawn_blocking(|| {
            let apps = format!(
                "[[app]]\nname = \"faults\"\ncomponent = \"{}\"\nroutes = [\"/\"]\n",
                example("faults").display()
            );
            let flags = ["--max-connections=30", "--max-connections-per-client=10"];
            Admin::start(&apps, &flags, LOG)
        })
        .await
        .unwrap(),
    );
    let addr = plain_addr(&admin);
    let mut held = Vec::new();
    for _ in 0..10 {
        held.push(
            held_connection("127.0.0.2", &addr)
                .await
                .expect("within its share"),
        );
    }
    assert!(
        held_connection("127.0.0.2", &addr).await.is_none(),
        "past its share"
    );
    // Another client is served meanwhile.
    let mut others = Vec::new();
    for from in ["127.0.0.3", "127.0.0.4"] {
        for _ in 0..10 {
            others.push(held_connection(from, &addr).await.expect("within the cap"));
        }
    }
    // 30 open: nobody new gets in.
    assert!(
        held_connection("127.0.0.5", &addr).await.is_none(),
        "past the cap"
    );
    wait_for_log(
        &admin,
        "closed on arrival: 127.0.0.2 has 10 open (--max-connections-per-client)",
    )
    .await;
    drop(held);
    // Once the server has seen them go, their places are taken again (bounded).
    let mut again = None;
    for _ in 0..500 {
        again = held_connection("127.0.0.5", &addr).await;
        if again.is_some() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(again.is_some(), "a freed place was never taken again");
    let samples = scrape(&admin).await;
    assert!(closed(&samples, "connection_limit") >= 2.0);
}

/// One app serving example `component` on `/` with `wall_time`, behind the timeouts
/// under test and `flags`.
async fn serve_one(
    component: &'static str,
    wall_time: &'static str,
    flags: &'static [&'static str],
) -> Arc<Admin> {
    let admin = tokio::task::spawn_blocking(move || {
        let apps = format!(
            "[[app]]\nname = \"{component}\"\ncomponent = \"{}\"\nroutes = [\"/\"]\n\n\
             [app.limits]\nwall_time = \"{wall_time}\"\n",
            example(component).display(),
        );
        Admin::start(&apps, &[FLAGS, flags].concat(), LOG)
    });
    Arc::new(admin.await.unwrap())
}

/// Attack review (stop 37): hyper polls a response body only while it can write, so a
/// client that sent its request and never read held its HTTP/1.1 connection (its
/// descriptor, ~4 MB of buffers) past its response's wall time, until it read or left:
/// the cut-off went unseen while hyper waited on the socket. The connection is now
/// reset once the response is cut off, over TLS too: a FIN would have left the kernel
/// holding what waited for the client. (It stayed open with the watch taken out of
/// `h1::serve`, and the client read on to a clean EOF with the reset taken out.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_never_reads_is_let_go_once_its_response_is_cut_off() {
    let admin = serve_one("feed", "1s", &[]).await;
    let ca = admin.data_dir.join("tls/dev-cert.pem");
    for (faults, (addr, tls)) in [(plain_addr(&admin), None), (tls_addr(&admin), Some(&ca))]
        .into_iter()
        .enumerate()
    {
        // Held, unread, while the server decides.
        let mut client = support::never_reading(&addr, "/", 1, tls.map(|p| p.as_path())).await;
        let wanted = faults as f64 + 1.0;
        scrape_until(
            &admin,
            "the response cut off and its connection closed",
            move |s| {
                let wall = [("app", "feed"), ("kind", "wall_timeout")];
                s.get("wedge_guest_faults_total", &wall) == wanted
                    && s.get("wedge_connections_open", &[("protocol", "h1")]) == 0.0
            },
        )
        .await;
        // What reached the client's buffer, then the reset.
        support::assert_reset(&mut client).await;
    }
    wait_for_log(&admin, "connection reset: its response was cut off").await;
}

/// A client that pipelines requests and never reads: each response ends, so none is
/// cut off, and hyper, waiting on the socket, reads no more of the pipeline (no head
/// timer runs). It held its connection, and the megabytes queued for it, for as long
/// as it liked (seen: 1.6 MB after 40 s). `--h1-write-timeout` resets it, as
/// `--h2-write-timeout` does on HTTP/2; a client that reads is not touched. (Held
/// with the timeout taken out.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_takes_nothing_written_is_reset_at_the_write_timeout() {
    let admin = serve_one("stream", "10m", &["--h1-write-timeout=1s"]).await;
    // 500 responses of 8 KiB: far more than the buffers between them and the client.
    let mut client = support::never_reading(&plain_addr(&admin), "/", 500, None).await;
    scrape_until(&admin, "the silent client reset", |s| {
        closed(s, "write_timeout") == 1.0
            && s.get("wedge_connections_open", &[("protocol", "h1")]) == 0.0
    })
    .await;
    support::assert_reset(&mut client).await;
    wait_for_log(&admin, "the client took nothing written for 1s").await;
    // A client that reads is served as before.
    let url = admin.server.url.clone();
    let size = tokio::task::spawn_blocking(move || {
        support::curl_write_out(&["%{http_code} %{size_download}", "--http1.1", &url])
    })
    .await
    .unwrap();
    assert_eq!(size, "200 8192");
}

/// Attack review (this stop): "progress" is what the socket takes, and a socket took
/// megabytes (its send buffer grown to 4 MB) before a write waited, then let wedge
/// write again only once a third of that had drained: a client reading a steady
/// 50 KB/s was reset by a 5 s `--h1-write-timeout` after 6.5 s. With at most
/// `--tcp-notsent-lowat` (16 KiB) queued unsent, such a client shows progress every
/// few kilobytes (a few hundred ms here, against a 3 s timeout) and reads on until
/// its response's wall time. (Reset for a write timeout with `--tcp-notsent-lowat=0`.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_reader_is_not_taken_for_one_that_stopped() {
    let admin = serve_one("feed", "8s", &["--h1-write-timeout=3s"]).await;
    let mut client = support::never_reading(&plain_addr(&admin), "/", 1, None).await;
    // A read each 20 ms (of what its small receive buffer holds: about 50 KB/s),
    // until the response ends (bounded).
    let mut taken = 0;
    let mut chunk = [0u8; 4096];
    let reading = async {
        loop {
            match client.read(&mut chunk).await {
                Ok(0) | Err(_) => break,
                Ok(n) => taken += n,
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    };
    tokio::time::timeout(Duration::from_secs(60), reading)
        .await
        .expect("the response outlived its wall time");
    let samples = scrape_until(&admin, "the response's end counted", |s| {
        s.get(
            "wedge_guest_faults_total",
            &[("app", "feed"), ("kind", "wall_timeout")],
        ) == 1.0
    })
    .await;
    assert_eq!(closed(&samples, "write_timeout"), 0.0, "read {taken} bytes");
    assert!(taken > 40_000, "read only {taken} bytes");
}
