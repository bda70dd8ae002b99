//! WAGI end to end: `examples/wagi`, a plain Rust `wasm32-wasip1` program (std::env,
//! std::io), run once per request by a real `wedge serve --wagi` (or `executor =
//! "wagi"`), over HTTP/1.1 (curl, hyper), h2c (the `h2` crate) and HTTP/3 (the `h3`
//! crate): the request as CGI variables and stdin, the response what it writes on
//! stdout, streamed both ways; each fault contained (`support::faults`); and every way
//! in (a file, a crate directory, `wedge dev`, the admin API, an OCI reference).

use std::collections::BTreeMap;
use std::path::PathBuf;

use support::faults::{Case, EVERY_GUEST, Expect, LIMITS, Matrix, TRAP_MID_BODY};
use support::protocols::{Client, Proto};
use support::{Server, example, pattern, repo, temp_dir};

const HELLO: &[u8] = b"Hello from a WAGI program!\n";

/// What makes an `[[app]]` a WAGI program's.
const WAGI: &str = "executor = \"wagi\"";

fn program() -> PathBuf {
    example("wagi")
}

/// `wedge serve wagi.wasm --wagi ARGS` with TLS (for HTTP/3), and its data dir.
fn serve(args: &[&str]) -> (Server, PathBuf) {
    let data_dir = temp_dir("wagi");
    let args = [&["--wagi"][..], args].concat();
    (Server::start_in(&program(), &args, &data_dir), data_dir)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wagi_program_answers_from_its_cgi_variables_over_every_protocol() {
    let (server, data_dir) = serve(&["--env", "GREETING=hi"]);
    server.wait_for_log(
        "compiled app `wagi` (a wasm module, componentized with the WASI preview 1 command adapter)",
    );
    let client = Client {
        server: &server,
        data_dir: &data_dir,
    };
    // curl sends to 127.0.0.1 with a content-length; the h2 and h3 clients to
    // `localhost`, without one (stdin then ends with the body).
    for (proto, version, host, length) in [
        (Proto::H1, "HTTP/1.1", "127.0.0.1", Some("5")),
        (Proto::H2, "HTTP/2", "localhost", None),
        (Proto::H3, "HTTP/3", "localhost", None),
    ] {
        let hello = client.get(proto, "/").await;
        assert_eq!(
            (hello.status, hello.complete, hello.body.as_slice()),
            (200, true, HELLO),
            "{proto:?}"
        );
        assert_eq!(
            hello.header("content-type"),
            Some("text/plain"),
            "{proto:?}"
        );

        let answer = client
            .send(proto, "POST", "/env?a=1&b=%20", Some(b"12345"))
            .await;
        assert_eq!((answer.status, answer.complete), (200, true), "{proto:?}");
        let env: BTreeMap<&str, &str> = answer
            .text()
            .lines()
            .filter_map(|line| line.split_once('='))
            .collect();
        for (name, value) in [
            ("GATEWAY_INTERFACE", "CGI/1.1"),
            ("REQUEST_METHOD", "POST"),
            ("PATH_INFO", "/env"),
            ("SCRIPT_NAME", ""),
            ("QUERY_STRING", "a=1&b=%20"),
            ("REQUEST_URI", "/env?a=1&b=%20"),
            ("SERVER_NAME", host),
            ("SERVER_PROTOCOL", version),
            ("REMOTE_ADDR", "127.0.0.1"),
            ("GREETING", "hi"),
        ] {
            assert_eq!(
                env.get(name),
                Some(&value),
                "{name} over {proto:?}: {env:?}"
            );
        }
        assert_eq!(env.get("CONTENT_LENGTH").copied(), length, "{proto:?}");
        assert_eq!(env.get("HTTPS"), (proto == Proto::H3).then_some(&"on"));
        // CGI's variables, the request's fields and the app's own: nothing of the host's.
        let cgi = [
            "CONTENT_LENGTH",
            "CONTENT_TYPE",
            "GATEWAY_INTERFACE",
            "GREETING",
            "HTTPS",
            "PATH_INFO",
            "QUERY_STRING",
            "REMOTE_ADDR",
            "REQUEST_METHOD",
            "REQUEST_URI",
            "SCRIPT_NAME",
            "SERVER_NAME",
            "SERVER_PORT",
            "SERVER_PROTOCOL",
            "SERVER_SOFTWARE",
        ];
        for name in env.keys() {
            assert!(
                cgi.contains(name) || name.starts_with("HTTP_"),
                "{name} over {proto:?}"
            );
        }
        assert!(env.contains_key("HTTP_HOST"), "{proto:?}: {env:?}");

        let not_found = client.get(proto, "/not-found").await;
        assert_eq!(
            (not_found.status, not_found.body.as_slice()),
            (404, &b"no such thing\n"[..])
        );
        let redirect = client.get(proto, "/redirect").await;
        assert_eq!(redirect.status, 302, "{proto:?}");
        assert_eq!(redirect.header("location"), Some("https://example.com/"));
        let stream = client.get(proto, "/stream").await;
        assert_eq!((stream.status, stream.body.len()), (200, 8 * 1024));
        let sandbox = client.get(proto, "/sandbox").await;
        assert_eq!(sandbox.body, b"filesystem: denied\n", "{proto:?}");
    }
    // A request's `Proxy` field would be `HTTP_PROXY`, which HTTP clients take for
    // their outgoing proxy (httpoxy): it is left out, the field beside it is not.
    let url = format!("{}/env", server.url);
    let headers = [
        "--http1.1",
        "-H",
        "Proxy: http://127.0.0.1:9/",
        "-H",
        "X-Probe: 1",
    ];
    let (_, answer) = support::protocols::curl_send(&headers, "GET", &url, None);
    let text = answer.text();
    assert!(text.contains("\nHTTP_X_PROBE=1\n"), "{text}");
    assert!(!text.contains("HTTP_PROXY"), "{text}");
    let stderr = client.get(Proto::H1, "/stderr").await;
    assert_eq!(stderr.body, HELLO);
    // Its stderr goes to wedge's log, tagged with the app's name.
    server.wait_for_log("[wagi stderr] wagi: a line on stderr");
}

/// stdin is read as it arrives and stdout reaches the client as it is written.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bodies_stream_both_ways_through_a_wagi_program_over_every_protocol() {
    let (server, data_dir) = serve(&[]);
    let client = Client {
        server: &server,
        data_dir: &data_dir,
    };
    client.echo_streams_both_ways("/echo").await;
}

/// stdin never gives a program more than `max_body`. A body declared larger gets
/// `413`; one that goes past it once the program's head is out fails the program's
/// read at the limit: the echo stops there, its end aborted, over each protocol.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stdin_is_bounded_by_max_body() {
    let (server, data_dir) = serve(&["--max-body", "16KiB"]);
    let client = Client {
        server: &server,
        data_dir: &data_dir,
    };
    let declared = client
        .send(Proto::H1, "POST", "/echo", Some(&pattern(64 * 1024, 3)))
        .await;
    assert_eq!(declared.status, 413, "{declared:?}");
    let pieces: Vec<Vec<u8>> = (0..3).map(|i| pattern(8 * 1024, i)).collect();
    let pieces: Vec<&[u8]> = pieces.iter().map(Vec::as_slice).collect();
    for proto in Proto::ALL {
        let echo = client.ping_pong(proto, "/echo", &pieces).await;
        assert_eq!((echo.status, echo.complete), (200, false), "{proto:?}");
        assert!(
            echo.received == pieces[..2].concat(),
            "{proto:?}: {} bytes",
            echo.received.len()
        );
    }
}

/// Each fault of a WAGI program, with its status, its one log line and its count.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wagi_programs_faults_are_contained_over_every_protocol() {
    let start = || Matrix::start("cgi", &program(), WAGI, LIMITS, &[]);
    let matrix = tokio::task::spawn_blocking(start).await.unwrap();
    let cases = [
        TRAP_MID_BODY,
        Case {
            fault: "HTML where the head should be",
            path: "/malformed",
            expect: Expect::Status(502),
            cause: "malformed CGI response: CGI response head line 1: not a `Name: value` field",
            kind: "malformed_cgi",
        },
        Case {
            fault: "no end to the head",
            path: "/no-head",
            expect: Expect::Status(502),
            cause: "malformed CGI response: the program ended before its CGI response head did",
            kind: "malformed_cgi",
        },
        // Heads no client would take as they are, were they sent on: a `+` length is
        // an empty reply over HTTP/1.1, a reset stream over HTTP/2 and HTTP/3.
        Case {
            fault: "a Content-Length with a sign",
            path: "/as-written?Content-Type:%20text/plain%0AContent-Length:%20+4%0A%0Abody",
            expect: Expect::Status(502),
            cause: "malformed CGI response: CGI response head line 2: not a length",
            kind: "malformed_cgi",
        },
        Case {
            fault: "a status past 599",
            path: "/as-written?Status:%20999%0AContent-Type:%20text/plain%0A%0Abody",
            expect: Expect::Status(502),
            cause: "malformed CGI response: CGI response head line 1: not a status",
            kind: "malformed_cgi",
        },
        Case {
            fault: "a failure status",
            path: "/exit",
            expect: Expect::Status(500),
            // `exit(3)`: WASI passes on that it failed, not the 3.
            cause: "the program exited with a failure status",
            kind: "guest_error",
        },
    ];
    matrix
        .run(EVERY_GUEST.iter().chain(&cases), ("/", HELLO))
        .await;
}

/// A program waiting on a clock holds its app's one instance slot (`max_concurrent =
/// 1`, no queue): the next request gets `503` with `Retry-After`; the program is cut
/// off at its wall time (`504`, `wall_timeout`) and the slot is free again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn admission_and_wall_time_hold_for_wagi_programs() {
    let limits = "wall_time = \"2s\"\nmax_concurrent = 1\nqueue = 0\n";
    let start = || Matrix::start("cgi", &program(), WAGI, limits, &[]);
    let matrix = tokio::task::spawn_blocking(start).await.unwrap();
    let url = matrix.server().url.clone();
    let sleeper = tokio::task::spawn_blocking(move || {
        support::protocols::curl_send(&["--http1.1"], "GET", &format!("{url}/sleep?600000"), None)
    });
    matrix.admin.scrape_until("the sleeper running", |s| {
        s.get("wedge_instances_running", &[("app", "cgi")]) == 1.0
    });
    let refused = matrix.get(Proto::H2, "/").await;
    assert_eq!(refused.status, 503, "{refused:?}");
    assert_eq!(refused.header("retry-after"), Some("1"));
    let (_, slept) = sleeper.await.unwrap();
    assert_eq!(slept.status, 504, "{slept:?}");
    let samples = matrix.admin.scrape_until("the sleeper gone", |s| {
        s.get("wedge_instances_running", &[("app", "cgi")]) == 0.0
    });
    assert_eq!(matrix.faults_of(&samples, "wall_timeout"), 1.0);
    assert_eq!(matrix.get(Proto::H3, "/sleep?0").await.body, b"slept 0\n");
}

/// `--max-cgi-head` bounds the head wedge holds before its empty line: past it the
/// output is no CGI response (`502`, one log line naming the key); below it, served.
/// `--cgi-output-buffer` far below a streamed body still lets it all through (the
/// program waits for the client, then writes on).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cgi_head_and_output_buffer_take_their_limits() {
    let (server, data_dir) = serve(&["--max-cgi-head", "1KiB", "--cgi-output-buffer", "1KiB"]);
    let client = Client {
        server: &server,
        data_dir: &data_dir,
    };
    let within = client.get(Proto::H1, "/long-head?900").await;
    assert_eq!((within.status, within.body.as_slice()), (200, HELLO));
    assert_eq!(within.header("x-padding").map(str::len), Some(900));
    let past = client.get(Proto::H2, "/long-head?2000").await;
    assert_eq!(past.status, 502, "{past:?}");
    server.wait_for_log("longer than 1024 bytes (max_cgi_head)");
    // The same head with its empty line in the write that took it past the limit.
    let padding = "p".repeat(2000);
    let whole = format!("/as-written?X-Padding:%20{padding}%0AContent-Type:%20text/plain%0A%0Ahi");
    let past_in_one_write = client.get(Proto::H1, &whole).await;
    assert_eq!(past_in_one_write.status, 502, "{past_in_one_write:?}");
    let streamed = client.get(Proto::H3, "/stream").await;
    assert_eq!(streamed.status, 200);
    assert_eq!(streamed.body.len(), 8 * 1024);
}

/// A program that writes `Content-Type` or `Location` twice means its last (two
/// would reach the client as a list, which browsers refuse for `Location`), and a
/// `204`'s `Content-Length` is not sent (RFC 9110 §8.6), over each protocol.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fields_a_response_has_one_of_reach_the_client_once() {
    let (server, data_dir) = serve(&[]);
    let client = Client {
        server: &server,
        data_dir: &data_dir,
    };
    let twice = "/as-written?Status:%20200%0AContent-Type:%20text/plain%0ALocation:%20/a%0A\
                 Content-Type:%20text/html%0ALocation:%20/b%0A%0Abody";
    let no_content = "/as-written?Status:%20204%0AContent-Length:%205%0A%0A";
    for proto in Proto::ALL {
        let answer = client.get(proto, twice).await;
        let values = |name: &str| -> Vec<&str> {
            let fields = answer.headers.iter().filter(|(n, _)| n == name);
            fields.map(|(_, value)| value.as_str()).collect()
        };
        assert_eq!(
            values("content-type"),
            ["text/html"],
            "{proto:?}: {answer:?}"
        );
        assert_eq!(values("location"), ["/b"], "{proto:?}: {answer:?}");
        assert_eq!((answer.status, answer.body.as_slice()), (200, &b"body"[..]));

        let answer = client.get(proto, no_content).await;
        assert_eq!(answer.status, 204, "{proto:?}: {answer:?}");
        assert_eq!(
            answer.header("content-length"),
            None,
            "{proto:?}: {answer:?}"
        );
    }
}

/// What a program writes is held for the client up to `--cgi-output-buffer`, also
/// when the program writes without asking `check-write` (a component calling WASI's
/// streams itself): a write past what was permitted traps it. Taken, its bytes
/// would stay held after the program ended, its instance slot free again, for as
/// long as the client took to read them: per request, not per instance.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_past_what_check_write_permitted_traps_the_program() {
    let data_dir = temp_dir("wagi-hostile");
    let server = Server::start_in(&example("hostile-wagi"), &["--wagi"], &data_dir);
    let client = Client {
        server: &server,
        data_dir: &data_dir,
    };
    let answer = client.get(Proto::H2, "/unpermitted").await;
    assert!(
        !answer.complete && answer.body.is_empty(),
        "{} body bytes: {:?}",
        answer.body.len(),
        answer.headers
    );
    server.wait_for_log("the program wrote 1048576 bytes to stdout where check-write permitted");
    let hello = client.get(Proto::H1, "/").await;
    assert_eq!(hello.body, b"hostile-wagi\n");
}

#[test]
fn a_program_is_refused_where_a_handler_is_expected_and_the_reverse() {
    // A WAGI program embeds no wasi:http world: the error names `--wagi`.
    let (status, log) = Server::start_or_exit(&program(), &[]).err().unwrap();
    assert_eq!(status.code(), Some(2), "{log}");
    assert!(log.contains("serve it as WAGI (`--wagi`"), "{log}");
    // A wasi:http component is no command.
    let (status, log) = Server::start_or_exit(&example("hello"), &["--wagi"])
        .err()
        .unwrap();
    assert_eq!(status.code(), Some(2), "{log}");
    assert!(log.contains("exporting `wasi:cli/run@0.2.x`"), "{log}");
}

/// `wedge serve DIR` and `wedge dev DIR` build a crate whose metadata says
/// `executor = "wagi"` for wasm32-wasip1 and run it as WAGI, without `--wagi`.
#[test]
fn a_wagi_crate_is_served_by_serve_and_dev() {
    let dir = repo().join("examples/wagi");
    for server in [
        Server::start(&dir, &["--no-tls"]),
        Server::dev(&dir, &["--no-tls"]),
    ] {
        let log = server.wait_for_log("for wasm32-wasip1");
        assert!(log.contains("WASI preview 1 command adapter"), "{log}");
        let url = format!("{}/", server.url);
        let (_, answer) = support::protocols::curl_send(&["--http1.1"], "GET", &url, None);
        assert_eq!((answer.status, answer.body.as_slice()), (200, HELLO));
    }
}

/// Deployed through the admin API with `executor = "wagi"` in its settings, mounted
/// on `/cgi`: `SCRIPT_NAME` is the mount point, `PATH_INFO` the rest.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wagi_program_deploys_through_the_admin_api_under_a_mount_point() {
    let admin = tokio::task::spawn_blocking(|| support::admin::Admin::start("", &[], "info"))
        .await
        .unwrap();
    let settings = temp_dir("wagi-deploy").join("cgi.toml");
    std::fs::write(&settings, "routes = [\"/cgi\"]\nexecutor = \"wagi\"\n").unwrap();
    let out = support::curl(&[
        "--fail",
        "-X",
        "PUT",
        "-H",
        &format!("Authorization: Bearer {}", support::admin::TOKEN),
        "-F",
        &format!("component=@{}", program().display()),
        "-F",
        &format!("config=@{}", settings.display()),
        &format!("{}/apps/cgi", admin.admin_url),
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let client = Client {
        server: &admin.server,
        data_dir: &admin.data_dir,
    };
    let answer = client.get(Proto::H1, "/cgi/env").await;
    let text = answer.text();
    assert!(text.contains("\nSCRIPT_NAME=/cgi\n"), "{text}");
    assert!(text.contains("\nPATH_INFO=/env\n"), "{text}");
}
