//! The guest-fault matrix: every fault of an app over HTTP/1.1, h2c and HTTP/3
//! against one real `wedge serve --config` with the admin API. Each case gets its
//! status (or an aborted body), one log line naming the app and the cause, one count
//! in `wedge_guest_faults_total`; then no instance, stream or connection stays open
//! (`/metrics`), and a healthy request over the same protocol is answered.

use std::path::Path;
use std::time::{Duration, Instant};

use crate::Server;
use crate::admin::Admin;
use crate::admin::parse_text::Samples;
use crate::protocols::{Answer, Client, Proto};

/// What a case must get.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Expect {
    /// A whole response with this status.
    Status(u16),
    /// A 200 head, then a body that never ends cleanly (over HTTP/3 the client may
    /// see the reset alone).
    Aborted,
}

pub struct Case {
    pub fault: &'static str,
    pub path: &'static str,
    pub expect: Expect,
    /// In the one log line the fault writes.
    pub cause: &'static str,
    /// Its `kind` in `wedge_guest_faults_total`.
    pub kind: &'static str,
}

/// The limits a matrix's app runs with (wedge.toml's `[app.limits]`).
pub const LIMITS: &str = "memory = \"32MiB\"\ncpu_time = \"200ms\"\nwall_time = \"2s\"\n";

/// The faults every kind of guest meets the same way under [`LIMITS`]: each example
/// that is a matrix's app answers these paths so.
pub const EVERY_GUEST: [Case; 3] = [
    Case {
        fault: "trap before the head",
        path: "/trap-before-head",
        expect: Expect::Status(500),
        cause: "guest trapped: wasm trap: wasm `unreachable`",
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
];

/// A `200` head and 4 KiB of body, then a trap: what the examples that stream do at
/// `/trap-mid-body`.
pub const TRAP_MID_BODY: Case = Case {
    fault: "trap mid-body",
    path: "/trap-mid-body",
    expect: Expect::Aborted,
    cause: "guest trapped",
    kind: "trap",
};

/// `wedge serve --config` of one app, on cleartext, TLS and HTTP/3, with the admin
/// API (for `/metrics`).
pub struct Matrix {
    pub admin: Admin,
    app: String,
}

impl Matrix {
    /// Serves app `app` (`component` on `/`, with `settings`: more keys of its
    /// `[[app]]` table, and its `[app.limits]`) with the flags `args`.
    pub fn start(
        app: &str,
        component: &Path,
        settings: &str,
        limits: &str,
        args: &[&str],
    ) -> Matrix {
        let table = format!(
            "[[app]]\nname = \"{app}\"\ncomponent = \"{}\"\nroutes = [\"/\"]\n{settings}\n\
             [app.limits]\n{limits}",
            component.display()
        );
        Matrix {
            admin: Admin::start(&table, args, "info"),
            app: app.to_string(),
        }
    }

    pub fn server(&self) -> &Server {
        &self.admin.server
    }

    /// One GET of `path` over `proto`, on a connection of its own that is closed after.
    pub async fn get(&self, proto: Proto, path: &str) -> Answer {
        let client = Client {
            server: self.server(),
            data_dir: &self.admin.data_dir,
        };
        client.get(proto, path).await
    }

    /// The warning lines the app's faults wrote so far.
    pub fn fault_lines(&self) -> Vec<String> {
        let log = self.server().log();
        let tag = format!("app `{}`:", self.app);
        log.lines()
            .filter(|l| l.contains("WARN") && l.contains(&tag))
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

    pub fn faults_of(&self, samples: &Samples, kind: &str) -> f64 {
        let labels = [("app", self.app.as_str()), ("kind", kind)];
        samples.get("wedge_guest_faults_total", &labels)
    }

    /// Nothing of a request left: no instance running, no stream or connection open.
    pub fn settled(&self, samples: &Samples, proto: Proto) -> bool {
        let protocol = [("protocol", proto.label())];
        samples.get("wedge_instances_running", &[("app", self.app.as_str())]) == 0.0
            && samples.get("wedge_streams_open", &protocol) == 0.0
            && samples.get("wedge_connections_open", &protocol) == 0.0
    }

    /// Runs every case over every protocol, each followed by a GET of `healthy` that
    /// must answer `200` with `body`; then waits until nothing is left of them and
    /// checks that each fault was logged once. Returns the samples then.
    pub async fn run<'c>(
        &self,
        cases: impl IntoIterator<Item = &'c Case>,
        (healthy, body): (&str, &[u8]),
    ) -> Samples {
        let mut lines_seen = 0;
        for case in cases {
            for proto in Proto::ALL {
                let what = format!("{} over {proto:?}", case.fault);
                let before = self.faults_of(&self.admin.scrape(), case.kind);

                let answer = self.get(proto, case.path).await;
                match case.expect {
                    Expect::Status(status) => {
                        assert_eq!(
                            (answer.status, answer.complete),
                            (status, true),
                            "{what}: {answer:?}"
                        );
                    }
                    Expect::Aborted => {
                        // HTTP/1.1 and HTTP/2 deliver what came before the failure;
                        // HTTP/3 may not (a reset stream's unread data is discarded).
                        let head =
                            answer.status == 200 || (proto == Proto::H3 && answer.status == 0);
                        assert!(head && !answer.complete, "{what}: {answer:?}");
                    }
                }

                // One log line naming the app and the cause, one count of its kind.
                lines_seen += 1;
                let lines = self.wait_fault_lines(lines_seen);
                assert_eq!(lines.len(), lines_seen, "{what}: {lines:#?}");
                assert!(
                    lines[lines_seen - 1].contains(case.cause),
                    "{what}: {lines:#?}"
                );
                let samples = self.admin.scrape_until(&format!("{what} settled"), |s| {
                    self.settled(s, proto) && self.faults_of(s, case.kind) >= before + 1.0
                });
                assert_eq!(self.faults_of(&samples, case.kind), before + 1.0, "{what}");

                // The host serves on, over the same protocol.
                let answer = self.get(proto, healthy).await;
                assert_eq!(
                    (answer.status, answer.complete, answer.body.as_slice()),
                    (200, true, body),
                    "after {what}"
                );
            }
        }
        // Every request accounted for: nothing running, nothing open, no fault unlogged.
        let samples = self.admin.scrape_until("the last request settled", |s| {
            Proto::ALL.iter().all(|&proto| self.settled(s, proto))
        });
        assert_eq!(self.fault_lines().len(), lines_seen);
        samples
    }
}
