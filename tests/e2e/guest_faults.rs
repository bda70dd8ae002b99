//! Guest faults end to end. The matrix (`support::faults`): every fault of the `faults`
//! example over HTTP/1.1 (curl), h2c (the `h2` crate) and HTTP/3 (the `h3` crate)
//! against one real `wedge serve --config` with the admin API. Each case gets its
//! documented status (or an aborted body), one log line naming the app and the cause,
//! one count in `wedge_guest_faults_total`; then no instance, stream or connection
//! stays open (`/metrics`), and a healthy request over the same protocol is answered.

use support::faults::{Case, EVERY_GUEST, Expect, LIMITS, Matrix, TRAP_MID_BODY};
use support::protocols::Proto;
use support::{Server, example};

/// Every guest fault and what it must get (README, "When a guest misbehaves"), with
/// those of [`EVERY_GUEST`].
const CASES: &[Case] = &[
    TRAP_MID_BODY,
    Case {
        fault: "stack overflow",
        path: "/stack-overflow",
        expect: Expect::Status(500),
        cause: "guest trapped: wasm trap: call stack exhausted",
        kind: "trap",
    },
    Case {
        fault: "never responding",
        path: "/sleep?ms=600000",
        expect: Expect::Status(504),
        cause: "wall-clock limit of 2s exceeded",
        kind: "wall_timeout",
    },
    Case {
        fault: "returning without a response",
        path: "/no-response",
        expect: Expect::Status(500),
        cause: "the handler returned without setting a response",
        kind: "no_response",
    },
    Case {
        fault: "responding twice",
        path: "/respond-twice",
        expect: Expect::Aborted,
        cause: "guest trapped: unknown handle index",
        kind: "trap",
    },
    Case {
        fault: "writing after finish",
        path: "/write-after-finish",
        expect: Expect::Aborted,
        cause: "guest trapped: unknown handle index",
        kind: "trap",
    },
    Case {
        fault: "huge headers (1 MiB)",
        path: "/huge-headers?kib=1024",
        expect: Expect::Status(500),
        cause: "guest trapped: total size of fields exceeds limit",
        kind: "trap",
    },
];

/// `wedge serve --config` of the `faults` app under [`LIMITS`], on cleartext, TLS
/// and HTTP/3, with the admin API (for `/metrics`).
fn start() -> Matrix {
    // A pool of two instances: one leaked per case would soon leave none.
    let pool = ["--max-instances", "2"];
    Matrix::start("faults", &example("faults"), "", LIMITS, &pool)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_guest_fault_over_every_protocol_gets_its_status_and_leaks_nothing() {
    let matrix = tokio::task::spawn_blocking(start).await.unwrap();
    let cases = EVERY_GUEST.iter().chain(CASES);
    let samples = matrix.run(cases, ("/sleep?ms=0", b"slept 0\n")).await;
    let total: f64 = [
        "trap",
        "cpu_timeout",
        "memory",
        "wall_timeout",
        "no_response",
    ]
    .iter()
    .map(|kind| matrix.faults_of(&samples, kind))
    .sum();
    let count = EVERY_GUEST.len() + CASES.len();
    assert_eq!(total, (count * Proto::ALL.len()) as f64);
}

/// A head of 32 KiB of fields (within what the host lets a guest build) reaches the
/// client whole over each protocol.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_large_guest_head_within_the_limit_is_sent_whole_over_every_protocol() {
    let matrix = tokio::task::spawn_blocking(start).await.unwrap();
    for proto in Proto::ALL {
        let answer = matrix.get(proto, "/huge-headers?kib=32").await;
        assert_eq!(
            (answer.status, answer.complete, answer.body.as_slice()),
            (200, true, &b"32 KiB of headers\n"[..]),
            "{proto:?}"
        );
    }
    assert!(matrix.fault_lines().is_empty(), "{}", matrix.server().log());
}

/// Status code and body of one request on a new connection.
fn get(server: &Server, path: &str) -> (String, Vec<u8>) {
    let url = format!("{}{path}", server.url);
    let (_, answer) = support::protocols::curl_send(&["--http1.1"], "GET", &url, None);
    (answer.status.to_string(), answer.body)
}

/// `wedge serve`'s limit flags (the matrix sets them in wedge.toml): each is the
/// limit applied, as its fault's log line says.
#[test]
fn the_limit_flags_are_the_limits_applied() {
    let cases = [
        (
            "--cpu-time",
            "300ms",
            "/cpu-loop",
            "504",
            "CPU time limit of 300ms exceeded",
        ),
        (
            "--wall-time",
            "1s",
            "/sleep?ms=30000",
            "504",
            "wall-clock limit of 1s exceeded",
        ),
        (
            "--memory",
            "24MiB",
            "/memory",
            "500",
            "memory limit of 24 MiB exceeded",
        ),
    ];
    for (flag, value, path, status, cause) in cases {
        let server = Server::start(&example("faults"), &["--no-tls", flag, value]);
        let (got, _) = get(&server, path);
        assert_eq!(got, status, "{flag} {value}: {}", server.log());
        server.wait_for_log(cause);
    }
}

#[test]
fn waiting_on_io_does_not_count_as_cpu_time() {
    // The guest waits four times its CPU budget; only the waiting is long.
    let server = Server::start(&example("faults"), &["--cpu-time", "250ms"]);
    let (status, body) = get(&server, "/sleep?ms=1000");
    assert_eq!(status, "200", "{}", server.log());
    assert_eq!(body, b"slept 1000\n");
}

#[test]
fn guest_output_is_logged_with_the_app_name() {
    let server = Server::start(&example("faults"), &[]);
    let (status, _) = get(&server, "/stdout");
    assert_eq!(status, "200");
    server.wait_for_log("[faults] hello from the guest");
    server.wait_for_log("[faults stderr] guest stderr line");
}

#[test]
fn the_guest_sees_no_host_environment_and_no_filesystem() {
    let server = Server::start(&example("faults"), &[]);
    let (status, body) = get(&server, "/sandbox");
    assert_eq!(status, "200");
    assert_eq!(
        String::from_utf8(body).unwrap(),
        "env vars: 0\nfilesystem: denied\n"
    );
}
