//! Guest faults end to end. The matrix: every fault of the `faults` example over
//! HTTP/1.1 (curl), h2c (the `h2` crate) and HTTP/3 (the `h3` crate) against one real `wedge serve
//! --config` with the admin API. Each case gets its documented status (or an aborted
//! body), one log line naming the app and the cause, one count in
//! `wedge_guest_faults_total`; then no instance, stream or connection stays open
//! (`/metrics`), and a healthy request over the same protocol is answered.

mod admin_support;
mod h3_support;
mod proto_support;
mod support;

use std::time::{Duration, Instant};

use admin_support::Admin;
use admin_support::parse_text::Samples;
use proto_support::{Answer, Client, Proto};
use support::{Server, example};

/// What a case must get.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Expect {
    /// A whole response with this status.
    Status(u16),
    /// A 200 head, then a body that never ends cleanly (over HTTP/1.1 and HTTP/3 the
    /// client may see the close or reset alone).
    Aborted,
}

struct Case {
    fault: &'static str,
    path: &'static str,
    expect: Expect,
    /// In the one log line the fault writes.
    cause: &'static str,
    /// Its `kind` in `wedge_guest_faults_total`.
    kind: &'static str,
}

/// The limits the matrix's app runs with (wedge.toml's `[app.limits]`).
const LIMITS: &str = "memory = \"32MiB\"\ncpu_time = \"200ms\"\nwall_time = \"2s\"\n";

/// Every guest fault and what it must get (README, "When a guest misbehaves").
const CASES: &[Case] = &[
    Case {
        fault: "trap before the head",
        path: "/trap-before-head",
        expect: Expect::Status(500),
        cause: "guest trapped: wasm trap: wasm `unreachable`",
        kind: "trap",
    },
    Case {
        fault: "trap mid-body",
        path: "/trap-mid-body",
        expect: Expect::Aborted,
        cause: "guest trapped",
        kind: "trap",
    },
    Case {
        fault: "infinite loop",
        path: "/cpu-loop",
        expect: Expect::Status(504),
        cause: "CPU time limit of 200ms exceeded",
        kind: "cpu_timeout",
    },
    Case {
        fault: "memory exhaustion",
        path: "/memory",
        expect: Expect::Status(500),
        cause: "memory limit of 32 MiB exceeded",
        kind: "memory",
    },
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
struct Matrix(Admin);

impl Matrix {
    fn start() -> Matrix {
        let app = format!(
            "[[app]]\nname = \"faults\"\ncomponent = \"{}\"\nroutes = [\"/\"]\n\n\
             [app.limits]\n{LIMITS}",
            example("faults").display(),
        );
        // A pool of two instances: one leaked per case would soon leave none.
        Matrix(Admin::start(&app, &["--max-instances", "2"], "info"))
    }

    fn server(&self) -> &Server {
        &self.0.server
    }

    /// One GET of `path` over `proto`, on a connection of its own that is closed after.
    async fn get(&self, proto: Proto, path: &str) -> Answer {
        let client = Client {
            server: self.server(),
            data_dir: &self.0.data_dir,
        };
        client.get(proto, path).await
    }

    /// The warning lines the app's faults wrote so far.
    fn fault_lines(&self) -> Vec<String> {
        let log = self.server().log();
        log.lines()
            .filter(|l| l.contains("WARN") && l.contains("app `faults`:"))
            .map(String::from)
            .collect()
    }

    /// Waits (bounded) until the log holds `count` fault lines; returns them.
    fn wait_fault_lines(&self, count: usize) -> Vec<String> {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let lines = self.fault_lines();
            if lines.len() >= count {
                return lines;
            }
            assert!(
                Instant::now() < deadline,
                "expected {count} fault lines:\n{}",
                self.server().log()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

fn faults_of(samples: &Samples, kind: &str) -> f64 {
    samples.get(
        "wedge_guest_faults_total",
        &[("app", "faults"), ("kind", kind)],
    )
}

/// Nothing of a request left: no instance running, no stream or connection open.
fn settled(samples: &Samples, proto: Proto) -> bool {
    let protocol = [("protocol", proto.label())];
    samples.get("wedge_instances_running", &[("app", "faults")]) == 0.0
        && samples.get("wedge_streams_open", &protocol) == 0.0
        && samples.get("wedge_connections_open", &protocol) == 0.0
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_guest_fault_over_every_protocol_gets_its_status_and_leaks_nothing() {
    let matrix = tokio::task::spawn_blocking(Matrix::start).await.unwrap();
    let mut lines_seen = 0;
    for case in CASES {
        for proto in Proto::ALL {
            let what = format!("{} over {proto:?}", case.fault);
            let before = faults_of(&matrix.0.scrape(), case.kind);

            let answer = matrix.get(proto, case.path).await;
            match case.expect {
                Expect::Status(status) => {
                    assert_eq!(
                        (answer.status, answer.complete),
                        (status, true),
                        "{what}: {answer:?}"
                    );
                }
                Expect::Aborted => {
                    // HTTP/2 delivers what came before the reset; HTTP/1.1 may lose the
                    // head (hyper drops what it had not flushed when the body fails), and
                    // so may HTTP/3 (a reset stream's unread data is discarded).
                    let head = answer.status == 200 || (proto != Proto::H2 && answer.status == 0);
                    assert!(head && !answer.complete, "{what}: {answer:?}");
                }
            }

            // One log line naming the app and the cause, one count of its kind.
            lines_seen += 1;
            let lines = matrix.wait_fault_lines(lines_seen);
            assert_eq!(lines.len(), lines_seen, "{what}: {lines:#?}");
            assert!(
                lines[lines_seen - 1].contains(case.cause),
                "{what}: {lines:#?}"
            );
            let samples = matrix.0.scrape_until(&format!("{what} settled"), |s| {
                settled(s, proto) && faults_of(s, case.kind) >= before + 1.0
            });
            assert_eq!(faults_of(&samples, case.kind), before + 1.0, "{what}");

            // The host serves on, over the same protocol.
            let healthy = matrix.get(proto, "/sleep?ms=0").await;
            assert_eq!(
                (healthy.status, healthy.complete, healthy.body.as_slice()),
                (200, true, &b"slept 0\n"[..]),
                "after {what}"
            );
        }
    }
    // Every request accounted for: nothing running, nothing open, no fault unlogged.
    let samples = matrix.0.scrape_until("the last request settled", |s| {
        Proto::ALL.iter().all(|&proto| settled(s, proto))
    });
    assert_eq!(matrix.fault_lines().len(), lines_seen);
    let total: f64 = [
        "trap",
        "cpu_timeout",
        "memory",
        "wall_timeout",
        "no_response",
    ]
    .iter()
    .map(|kind| faults_of(&samples, kind))
    .sum();
    assert_eq!(total, (CASES.len() * Proto::ALL.len()) as f64);
}

/// A head of 32 KiB of fields (within what the host lets a guest build) reaches the
/// client whole over each protocol.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_large_guest_head_within_the_limit_is_sent_whole_over_every_protocol() {
    let matrix = tokio::task::spawn_blocking(Matrix::start).await.unwrap();
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
    let (_, answer) = proto_support::curl_send(&["--http1.1"], "GET", &url, None);
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
