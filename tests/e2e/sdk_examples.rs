//! The SDK examples `upload`, `json-api` and `feed` end to end, each over
//! HTTP/1.1 and HTTP/2 (curl, cleartext; h2 with prior knowledge) and HTTP/3
//! (the `h3` crate over the TLS port).

use std::io::Read;
use std::process::{Command, Stdio};

use bytes::{Buf, Bytes};
use support::h3::{H3Server, exchange, request, start};
use support::protocols::{Answer, Proto, curl_send};
use support::{Server, example, pattern, sha256, temp_dir};

/// curl's arguments for one protocol on the cleartext listener.
fn curl_proto(proto: Proto) -> &'static [&'static str] {
    match proto {
        Proto::H1 => &["--http1.1"],
        Proto::H2 => &["--http2-prior-knowledge"],
        Proto::H3 => unreachable!("HTTP/3 goes through the h3 crate"),
    }
}

/// Sends `method path` (with `body`) over `proto` and collects the answer.
async fn send(
    server: &H3Server,
    proto: Proto,
    method: &str,
    path: &str,
    body: Option<&[u8]>,
) -> Answer {
    if proto == Proto::H3 {
        let mut requests = server.connect().await;
        let (status, body) = exchange(&mut requests, method, path, body.map(<[u8]>::to_vec)).await;
        return Answer {
            status: status.as_u16(),
            headers: Vec::new(),
            complete: true,
            body,
        };
    }
    let url = format!("{}{path}", server.server.url);
    let (version, answer) = curl_send(curl_proto(proto), method, &url, body);
    assert!(answer.complete, "{proto:?} {method} {path}: {answer:?}");
    let expect_version = if proto == Proto::H2 {
        "HTTP/2"
    } else {
        "HTTP/1.1"
    };
    assert_eq!(version, expect_version);
    answer
}

async fn upload_hashes_5_mib(proto: Proto) {
    let server = start("upload", &[]);
    let sent = pattern(5 * 1024 * 1024, 11);
    let answer = send(&server, proto, "POST", "/", Some(&sent)).await;
    assert_eq!(answer.status, 200, "{answer:?}");
    let expect = format!("sha256: {}\nlength: {}\n", sha256(&sent), sent.len());
    assert_eq!(answer.text(), expect);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn upload_hashes_5_mib_over_h1() {
    upload_hashes_5_mib(Proto::H1).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn upload_hashes_5_mib_over_h2() {
    upload_hashes_5_mib(Proto::H2).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn upload_hashes_5_mib_over_h3() {
    upload_hashes_5_mib(Proto::H3).await;
}

/// Every route of json-api, and what its router and validation answer.
async fn json_api_routes(proto: Proto) {
    let server = start("json_api", &[]);
    let send = async |method, path, body: Option<&str>| {
        send(&server, proto, method, path, body.map(str::as_bytes)).await
    };
    let has_headers = proto != Proto::H3;

    let item = send("GET", "/items/1", None).await;
    assert_eq!(item.status, 200);
    assert_eq!(item.text(), r#"{"id":1,"name":"tea","price_cents":350}"#);
    if has_headers {
        assert_eq!(item.header("content-type"), Some("application/json"));
    }

    let list = send("GET", "/items", None).await;
    assert_eq!(list.status, 200);
    assert!(list.text().starts_with(r#"[{"id":1,"#), "{}", list.text());

    let created = send(
        "POST",
        "/items",
        Some(r#"{"name": " milk ", "price_cents": 99}"#),
    )
    .await;
    assert_eq!(created.status, 201);
    assert_eq!(created.text(), r#"{"id":3,"name":"milk","price_cents":99}"#);
    if has_headers {
        assert_eq!(created.header("location"), Some("/items/3"));
    }

    let cases = [
        ("GET", "/items/9", None, 404, r#"{"error":"no item 9"}"#),
        (
            "GET",
            "/items/tea",
            None,
            400,
            r#"{"error":"item ids are numbers, not \"tea\""}"#,
        ),
        (
            "POST",
            "/items",
            Some(r#"{"name": "  ", "price_cents": 1}"#),
            400,
            r#"{"error":"name must be 1 to 100 characters"}"#,
        ),
        (
            "POST",
            "/items",
            Some(r#"{"name": "x", "price_cents": 1000001}"#),
            400,
            r#"{"error":"price_cents must be at most 1000000"}"#,
        ),
        (
            "POST",
            "/items",
            Some(r#"{"name": "x""#),
            400,
            r#"{"error":"invalid JSON body: EOF while parsing an object at line 1 column 12"}"#,
        ),
    ];
    for (method, path, body, status, text) in cases {
        let answer = send(method, path, body).await;
        assert_eq!(
            (answer.status, answer.text()),
            (status, text),
            "{method} {path}"
        );
    }

    let unknown = send("GET", "/nope", None).await;
    assert_eq!(
        (unknown.status, unknown.text()),
        (404, "no route for /nope\n")
    );

    let wrong_method = send("DELETE", "/items", None).await;
    assert_eq!(wrong_method.status, 405);
    assert_eq!(wrong_method.text(), "DELETE is not allowed for /items\n");
    if has_headers {
        assert_eq!(wrong_method.header("allow"), Some("GET, POST, HEAD"));
    }
}

/// Over HTTP/1.1 only: the answer comes before the upload ends, and HTTP/2 and
/// HTTP/3 then reset the rest of the upload (RST_STREAM(NO_ERROR), STOP_SENDING),
/// which some clients report as a failure (curl 7.88 exits 92).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn json_api_body_over_its_16_kib_limit_is_413_json() {
    let server = start("json_api", &[]);
    let big = format!(r#"{{"name": "{}", "price_cents": 1}}"#, "x".repeat(20_000));
    let answer = send(&server, Proto::H1, "POST", "/items", Some(big.as_bytes())).await;
    assert_eq!(answer.status, 413);
    assert_eq!(
        answer.text(),
        r#"{"error":"request body exceeds the limit of 16384 bytes"}"#
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn json_api_routes_over_h1() {
    json_api_routes(Proto::H1).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn json_api_routes_over_h2() {
    json_api_routes(Proto::H2).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn json_api_routes_over_h3() {
    json_api_routes(Proto::H3).await;
}

/// How much of the endless feed the tests read before hanging up.
const FEED_READ: usize = 1024 * 1024;
const FEED_CHUNK: usize = 16 * 1024;

/// The log line the host writes when it stops a handler whose body was dropped
/// (at debug level: [`start_feed`] logs it).
const RELEASED: &str = "app `feed`: response body dropped before the handler finished";

/// `wedge serve` of the feed example, logging its stopped handlers.
fn start_feed() -> H3Server {
    let data_dir = temp_dir("feed");
    let log = "WEDGE_LOG=info,wedge::host::call=debug";
    let server = Server::start_via(&["env", log], &example("feed"), &[], &data_dir);
    H3Server { server, data_dir }
}

/// The first `FEED_READ` bytes are whole chunks numbered from 0.
fn assert_feed(bytes: &[u8]) {
    assert_eq!(bytes.len(), FEED_READ);
    for (n, chunk) in bytes.chunks(FEED_CHUNK).enumerate() {
        let head = format!("chunk {n}\n");
        assert!(
            chunk.starts_with(head.as_bytes()),
            "chunk {n}: {:?}",
            &chunk[..16]
        );
        assert!(chunk[head.len()..FEED_CHUNK - 1].iter().all(|&b| b == b'.'));
        assert_eq!(chunk[FEED_CHUNK - 1], b'\n');
    }
}

/// Reads 1 MiB of the feed through curl, then kills curl (closing its
/// connection) and waits for the server to log that the handler was stopped.
fn feed_released_over_curl(proto: Proto) {
    let server = start_feed();
    assert!(!server.server.log().contains(RELEASED));
    let mut child = Command::new("curl")
        .args(["--silent", "--no-buffer", "--max-time", "120"])
        .args(curl_proto(proto))
        .arg(format!("{}/", server.server.url))
        .stdout(Stdio::piped())
        .spawn()
        .expect("running curl");
    let mut received = vec![0; FEED_READ];
    child
        .stdout
        .take()
        .unwrap()
        .read_exact(&mut received)
        .unwrap();
    child.kill().unwrap();
    child.wait().unwrap();
    assert_feed(&received);
    server.server.wait_for_log(RELEASED);
}

#[test]
fn feed_read_1_mib_then_hang_up_over_h1_releases_the_instance() {
    feed_released_over_curl(Proto::H1);
}

#[test]
fn feed_read_1_mib_then_hang_up_over_h2_releases_the_instance() {
    feed_released_over_curl(Proto::H2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn feed_read_1_mib_then_hang_up_over_h3_releases_the_instance() {
    let server = start_feed();
    let mut requests = server.connect().await;
    let mut stream = requests.send_request(request("GET", "/")).await.unwrap();
    stream.finish().await.unwrap();
    let response = stream.recv_response().await.unwrap();
    assert_eq!(response.status(), 200);
    let mut received = Vec::with_capacity(FEED_READ);
    while received.len() < FEED_READ {
        let mut data: Bytes = match stream.recv_data().await.unwrap() {
            Some(mut chunk) => chunk.copy_to_bytes(chunk.remaining()),
            None => panic!("the feed ended after {} bytes", received.len()),
        };
        let take = data.len().min(FEED_READ - received.len());
        received.extend_from_slice(&data.split_to(take));
    }
    assert_feed(&received);
    // Hanging up: the request stream goes (STOP_SENDING), then the connection.
    drop(stream);
    drop(requests);
    let log = tokio::task::spawn_blocking(move || server.server.wait_for_log(RELEASED));
    log.await.unwrap();
}
