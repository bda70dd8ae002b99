//! Workers (issue #10): with `--workers 2` the kernel spreads connections over both
//! workers (their counters on `/metrics` say which served what), an HTTP/2
//! connection's streams stay on the worker that accepted it, WASI 0.3 instances (whose
//! tasks live on one worker's runtime) serve both workers, and SIGTERM drains every
//! worker. Real binary, real sockets on 127.0.0.1, curl and h2load as the clients.

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use support::admin::Admin;
use support::admin::parse_text::Samples;
use support::{curl, example, sigterm};

/// Connections a test opens at most to see both workers serve one: the kernel's
/// `SO_REUSEPORT` hash may put any number of them on one worker (at 1/2 each, 64 in a
/// row on one is a 2^-63 chance).
const MAX_CONNECTIONS: usize = 64;

const WORKERS: [&str; 2] = ["0", "1"];

fn apps(component: &str) -> String {
    format!(
        "[[app]]\nname = \"app\"\ncomponent = \"{}\"\nroutes = [\"/\"]\n",
        example(component).display()
    )
}

fn two_workers(component: &str, args: &[&str]) -> Admin {
    let args = [&["--workers", "2"][..], args].concat();
    Admin::start(&apps(component), &args, "info")
}

fn per_worker(samples: &Samples, name: &str) -> [f64; 2] {
    WORKERS.map(|w| samples.get(name, &[("worker", w)]))
}

/// One request on a connection of its own; its body.
fn get(url: &str) -> String {
    let out = curl(&["--fail", url]);
    assert!(
        out.status.success(),
        "{url}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// Opens connections of one request each (at most `MAX_CONNECTIONS`) until both
/// workers have accepted one; returns how many were opened.
fn until_both_workers_served(admin: &Admin, url: &str, expected: &str) -> usize {
    for opened in 1..=MAX_CONNECTIONS {
        assert_eq!(get(url), expected);
        let accepted = per_worker(&admin.scrape(), "wedge_worker_connections_total");
        if accepted.iter().all(|&n| n >= 1.0) {
            return opened;
        }
    }
    panic!("{MAX_CONNECTIONS} connections, all on one worker");
}

#[test]
fn two_workers_each_serve_connections_and_keep_a_connections_streams() {
    let admin = two_workers("hello", &[]);
    let url = format!("{}/", admin.server.url);
    let opened = until_both_workers_served(&admin, &url, "Hello, world!\n");
    let samples = admin.scrape();
    let accepted = per_worker(&samples, "wedge_worker_connections_total");
    assert_eq!(accepted.iter().sum::<f64>(), opened as f64, "{samples:?}");
    assert_eq!(
        per_worker(&samples, "wedge_worker_requests_total"),
        accepted,
        "one request per connection"
    );

    // Ten requests on one HTTP/2 connection (h2c), five at a time: all on the worker
    // that accepted it.
    let out = Command::new("h2load")
        .args(["-n", "10", "-c", "1", "-m", "5", &url])
        .output()
        .expect("running h2load (apt-get install nghttp2-client)");
    let report = String::from_utf8_lossy(&out.stdout);
    assert!(
        report.contains("10 succeeded") && report.contains("10 2xx"),
        "{report}"
    );
    let after = admin.scrape();
    let accepted_after = per_worker(&after, "wedge_worker_connections_total");
    let requests_after = per_worker(&after, "wedge_worker_requests_total");
    let worker = (0..2)
        .find(|&w| accepted_after[w] == accepted[w] + 1.0)
        .expect("one worker accepted the HTTP/2 connection");
    assert_eq!(requests_after[worker], accepted[worker] + 10.0);
    assert_eq!(requests_after[1 - worker], accepted[1 - worker]);
}

#[test]
fn wasi_p3_apps_answer_on_both_workers() {
    let admin = two_workers("hello_p3", &[]);
    let url = format!("{}/", admin.server.url);
    let opened = until_both_workers_served(&admin, &url, "Hello, world!\n");
    // Both workers' requests reached instances, however many were created for them.
    let samples = admin.scrape();
    let requests = per_worker(&samples, "wedge_worker_requests_total");
    assert_eq!(requests.iter().sum::<f64>(), opened as f64);
    assert!(samples.get("wedge_instances_created_total", &[("app", "app")]) >= 1.0);
    sigterm(admin.server.pid());
    let (status, log) = admin.server.wait_exit(Duration::from_secs(30));
    assert_eq!(status.code(), Some(0), "{log}");
}

/// `curl URL` running in the background.
fn spawn_curl(url: &str) -> Child {
    Command::new("curl")
        .args([
            "--silent",
            "--show-error",
            "--fail",
            "--max-time",
            "150",
            url,
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("running curl")
}

/// Requests to `/sleep?ms=N` (the i-th sleeping `sleep(i)` ms), each on a connection
/// of its own, until both workers have one in flight: a request is, once its worker
/// has begun to answer it and counts its connection open. Returns each request's
/// sleep and its client.
fn in_flight_on_both_workers(admin: &Admin, sleep: impl Fn(u64) -> u64) -> Vec<(u64, Child)> {
    let mut in_flight: Vec<(u64, Child)> = Vec::new();
    loop {
        assert!(in_flight.len() < MAX_CONNECTIONS, "all on one worker");
        let ms = sleep(in_flight.len() as u64);
        let url = format!("{}/sleep?ms={ms}", admin.server.url);
        in_flight.push((ms, spawn_curl(&url)));
        let n = in_flight.len() as f64;
        let samples = admin.scrape_until("the request begun, its connection open", |s| {
            let sum = |name| per_worker(s, name).iter().sum::<f64>();
            sum("wedge_worker_requests_total") == n && sum("wedge_worker_connections_open") == n
        });
        let open = per_worker(&samples, "wedge_worker_connections_open");
        if open.iter().all(|&n| n >= 1.0) {
            return in_flight;
        }
    }
}

/// SIGTERM: new connections are refused at once, every request in flight gets its
/// whole answer, wedge exits 0 within its drain deadline.
fn sigterm_and_drain(admin: Admin, mut in_flight: Vec<(u64, Child)>) {
    for (ms, curl) in &mut in_flight {
        assert!(
            curl.try_wait().unwrap().is_none(),
            "request {ms} ended early"
        );
    }
    sigterm(admin.server.pid());
    let plain = admin.server.authority().to_string();
    let deadline = Instant::now() + Duration::from_secs(10);
    while std::net::TcpStream::connect(&plain).is_ok() {
        assert!(Instant::now() < deadline, "still accepting after SIGTERM");
        std::thread::sleep(Duration::from_millis(10));
    }
    for (ms, curl) in &mut in_flight {
        assert!(
            curl.try_wait().unwrap().is_none(),
            "request {ms} ended before the listeners closed"
        );
    }
    for (ms, curl) in in_flight {
        let out = curl.wait_with_output().unwrap();
        assert!(
            out.status.success(),
            "{ms}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert_eq!(
            String::from_utf8(out.stdout).unwrap(),
            format!("slept {ms}\n")
        );
    }
    let (status, log) = admin.server.wait_exit(Duration::from_secs(30));
    assert_eq!(status.code(), Some(0), "{log}");
    assert!(!log.contains("drain deadline passed"), "{log}");
}

#[test]
fn sigterm_drains_every_worker() {
    let admin = two_workers("faults", &["--drain-timeout", "150s"]);
    let in_flight = in_flight_on_both_workers(&admin, |i| 10_000 + i);
    for (ms, _) in &in_flight {
        admin
            .server
            .wait_for_log(&format!("[app] sleeping {ms} ms"));
    }
    sigterm_and_drain(admin, in_flight);
}

/// A WASI 0.3 instance's task runs on the runtime of the worker whose request started
/// it, and serves the other worker's requests too: that runtime must keep running
/// while the other worker drains, though its own worker is done.
#[test]
fn a_p3_instance_keeps_serving_the_other_worker_while_it_drains() {
    let admin = two_workers("p3_probe", &["--drain-timeout", "150s"]);
    // Each request sleeps a second longer than the one before: the last one, the first
    // on its worker, ends last by a second, after the instance's worker has drained.
    // 10 s at least: opening connections until both workers have one (a curl and
    // metrics scrapes each) must not outlast the first request on a loaded machine.
    let in_flight = in_flight_on_both_workers(&admin, |i| 10_000 + 1000 * i);
    let created = admin
        .scrape()
        .get("wedge_instances_created_total", &[("app", "app")]);
    assert_eq!(created, 1.0, "one instance serves both workers' requests");
    sigterm_and_drain(admin, in_flight);
}
