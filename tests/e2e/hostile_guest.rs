//! A hostile tenant on the real binary: the `hostile` fixture
//! (tests/fixtures/hostile) attacks its host one route at a time — hoarding fields,
//! resources, body buffers and half-written log lines in host memory, spinning in
//! host calls, asking for huge random lists — beside a neighbour app (`hello`)
//! on the same process. Each attack must be stopped as the guest's fault (status,
//! one log line, `wedge_guest_faults_total`), wedge's peak RSS must stay within the
//! attack's budget plus a fixed margin, and the neighbour must keep answering.

use std::sync::atomic::{AtomicBool, Ordering};
use std::thread;
use std::time::Instant;

use support::curl;
use support::metered::{Metered, app};
use support::protocols::{Client, Proto};

const MIB: u64 = 1024 * 1024;
/// What wedge may grow by besides the budgets (allocator slack, the pool's pages of
/// the instances, buffers of the connections): far below any attack's take.
const MARGIN: u64 = 48 * MIB;
/// The hostile app's host-memory budget in these tests.
const BUDGET: u64 = 8 * MIB;

/// GET `path`: status and body.
fn get(wedge: &Metered, path: &str) -> (String, String) {
    let out = curl(&[
        "-w",
        "\n%{http_code}",
        &format!("{}{path}", wedge.server().url),
    ]);
    let text = String::from_utf8(out.stdout).unwrap();
    let (body, status) = text.rsplit_once('\n').unwrap();
    (status.to_string(), body.to_string())
}

/// A field of `/proc/PID/status` in bytes (`VmHWM`, `VmRSS`).
fn proc_status_bytes(pid: u32, field: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let line = status
        .lines()
        .find(|line| line.starts_with(field))
        .unwrap_or_else(|| panic!("no {field} in /proc/{pid}/status"));
    let kib: u64 = line.split_whitespace().nth(1).unwrap().parse().unwrap();
    kib * 1024
}

/// Resets the process's peak RSS to its current RSS (`clear_refs` 5, Linux 4.0+).
fn reset_peak_rss(pid: u32) {
    std::fs::write(format!("/proc/{pid}/clear_refs"), "5").unwrap();
}

/// The hostile app on `/` with `limits`, beside `hello` on `/n`.
fn serve(limits: &str) -> Metered {
    serve_with(limits, &[])
}

/// [`serve`] with `flags` added to `wedge serve`'s.
fn serve_with(limits: &str, flags: &[&str]) -> Metered {
    let apps = [
        app("hostile", "hostile", "/", limits),
        app("neighbour", "hello", "/n", ""),
    ];
    let wedge = Metered::start_with(&apps, flags);
    // Warm: both compiled and instantiated once before anything is measured.
    assert_eq!(get(&wedge, "/hello"), ("200".into(), "hello\n".into()));
    assert_eq!(get(&wedge, "/n").0, "200");
    wedge
}

/// What an attack left: the attacks' answers, the neighbour's answers, and how far
/// wedge's RSS peaked above where it was before.
type Outcome = (Vec<(String, String)>, Vec<String>, u64);

/// Runs `attacks` requests to `path` at once while the neighbour is asked again
/// and again. Prints what RELIABILITY.md's table shows (RSS, the neighbour's
/// latency: figures, not assertions).
fn attack(wedge: &Metered, path: &str, attacks: usize) -> Outcome {
    let pid = wedge.server().pid();
    reset_peak_rss(pid);
    let before = proc_status_bytes(pid, "VmRSS");
    let done = AtomicBool::new(false);
    let (answers, neighbour) = thread::scope(|scope| {
        let neighbour = scope.spawn(|| {
            let mut answers = Vec::new();
            let mut latencies = Vec::new();
            // At least one answer, while the attack lasts (bounded by its wall time).
            while answers.is_empty() || (!done.load(Ordering::Acquire) && answers.len() < 10_000) {
                let sent = Instant::now();
                answers.push(get(wedge, "/n").0);
                latencies.push(sent.elapsed());
            }
            latencies.sort();
            let median = latencies[latencies.len() / 2];
            let max = latencies[latencies.len() - 1];
            eprintln!(
                "{path} x{attacks}: neighbour answered {} times, median {median:?}, max {max:?}",
                answers.len()
            );
            answers
        });
        let attackers: Vec<_> = (0..attacks)
            .map(|_| scope.spawn(|| get(wedge, path)))
            .collect();
        let answers: Vec<_> = attackers.into_iter().map(|a| a.join().unwrap()).collect();
        done.store(true, Ordering::Release);
        (answers, neighbour.join().unwrap())
    });
    let peak = proc_status_bytes(pid, "VmHWM");
    let growth = peak.saturating_sub(before);
    eprintln!(
        "{path} x{attacks}: {:?}; RSS {} MiB before, peak +{:.1} MiB",
        answers.iter().map(|(status, _)| status).collect::<Vec<_>>(),
        before / MIB,
        growth as f64 / MIB as f64
    );
    (answers, neighbour, growth)
}

/// Asserts the attack was stopped as the guest's `kind` fault with `status`, logged
/// with `cause`, within `bound` of RSS growth, the neighbour always answering.
fn assert_stopped(
    wedge: &Metered,
    (answers, neighbour, growth): Outcome,
    status: &str,
    cause: &str,
    kind: &str,
    bound: u64,
) {
    for (got, body) in &answers {
        assert_eq!(got, status, "the attack was not stopped: {body}");
    }
    let log = wedge.server().wait_for_log(cause);
    let lines = log
        .lines()
        .filter(|line| line.contains("app `hostile`") && line.contains(cause))
        .count();
    assert!(
        lines >= answers.len(),
        "{lines} log lines for {} attacks:\n{log}",
        answers.len()
    );
    let faults = wedge.samples().get(
        "wedge_guest_faults_total",
        &[("app", "hostile"), ("kind", kind)],
    );
    assert!(
        faults >= answers.len() as f64,
        "{faults} {kind} faults counted"
    );
    assert!(
        neighbour.iter().all(|status| status == "200"),
        "the neighbour was hurt: {neighbour:?}"
    );
    assert!(
        growth < bound,
        "wedge's RSS peaked {} MiB above where it was (bound {} MiB)",
        growth / MIB,
        bound / MIB
    );
    // The instance's host memory went with it: the app serves on.
    assert_eq!(get(wedge, "/hello"), ("200".into(), "hello\n".into()));
}

/// The hoarders' limits: CPU time to spare (a debug build's host calls are slow),
/// so that only the host-memory budget can stop them.
const HOSTILE_LIMITS: &str = "host_memory = \"8MiB\"\ncpu_time = \"20s\"\nwall_time = \"60s\"\n";

#[test]
fn hoarded_fields_are_stopped_at_the_host_memory_budget() {
    let wedge = serve(HOSTILE_LIMITS);
    // 2,000 fields of 100 KiB: 200 MiB unless the budget stops it.
    let outcome = attack(&wedge, "/fields-hoard?kib=100&max=2000", 3);
    let cause = "host memory limit of 8MiB exceeded";
    assert_stopped(
        &wedge,
        outcome,
        "500",
        cause,
        "host_memory",
        3 * BUDGET + MARGIN,
    );
}

#[test]
fn hoarded_fields_on_a_reused_instance_are_stopped_too() {
    let limits = format!("{HOSTILE_LIMITS}instance_reuse = 10\n");
    let wedge = serve(&limits);
    let outcome = attack(&wedge, "/fields-hoard?kib=100&max=2000", 1);
    let cause = "host memory limit of 8MiB exceeded";
    assert_stopped(
        &wedge,
        outcome,
        "500",
        cause,
        "host_memory",
        BUDGET + MARGIN,
    );
}

#[test]
fn hoarded_body_buffers_are_stopped_at_the_host_memory_budget() {
    let wedge = serve(HOSTILE_LIMITS);
    // 2,000 responses whose body streams each hold what the host accepts at once.
    let outcome = attack(&wedge, "/body-hoard?max=2000", 2);
    let cause = "host memory limit of 8MiB exceeded";
    assert_stopped(
        &wedge,
        outcome,
        "500",
        cause,
        "host_memory",
        2 * BUDGET + MARGIN,
    );
}

#[test]
fn hoarded_half_lines_of_stdout_are_stopped_at_the_host_memory_budget() {
    let wedge = serve(HOSTILE_LIMITS);
    // 5,000 stdout streams, each holding a 4,000-byte line without its newline.
    let outcome = attack(&wedge, "/stdout-hoard?max=5000", 2);
    let cause = "host memory limit of 8MiB exceeded";
    assert_stopped(
        &wedge,
        outcome,
        "500",
        cause,
        "host_memory",
        2 * BUDGET + MARGIN,
    );
}

#[test]
fn hoarded_resources_are_stopped_at_max_resources() {
    let limits = format!("{HOSTILE_LIMITS}max_resources = 1000\n");
    let wedge = serve(&limits);
    let outcome = attack(&wedge, "/resource-hoard?max=50000", 2);
    let cause = "more than 1000 resources";
    assert_stopped(
        &wedge,
        outcome,
        "500",
        cause,
        "host_memory",
        2 * BUDGET + MARGIN,
    );
}

#[test]
fn a_guest_spinning_in_host_calls_is_stopped_at_its_cpu_time() {
    let wedge = serve("cpu_time = \"200ms\"\nwall_time = \"10s\"\n");
    // Each round builds and drops a 100 KiB field: host work, no guest compute.
    let outcome = attack(&wedge, "/host-spin?kib=100&max=10000000", 2);
    let cause = "CPU time limit of 200ms exceeded";
    assert_stopped(
        &wedge,
        outcome,
        "504",
        cause,
        "cpu_timeout",
        2 * BUDGET + MARGIN,
    );
}

/// WASI 0.2's `write` traps past the permit `check-write` gave: the log stream took
/// any write whole before (1 MiB split in one host call), where its permit is 4 KiB.
#[test]
fn a_log_write_past_check_write_traps() {
    let wedge = serve(HOSTILE_LIMITS);
    let outcome = attack(&wedge, "/unasked-write?kib=1024", 1);
    let cause = "check-write permitted 4096";
    assert_stopped(&wedge, outcome, "500", cause, "trap", BUDGET + MARGIN);
}

/// A guest's error code may carry a message as long as its host-call budget: wedge
/// formatted it whole (`Debug`, each control character 5 octets), escaped it again
/// and logged it as one line, before any budget looked at it. 6 MiB made one line of
/// about 30 MB, and put the app's notice budget in debt for minutes, so the next
/// fault's line was dropped.
#[test]
fn a_guests_huge_error_text_is_cut_before_wedge_formats_it() {
    let wedge = serve(HOSTILE_LIMITS);
    let outcome = attack(&wedge, "/error-text?kib=6144", 1);
    let cause = "the handler answered with an error";
    let log = wedge.server().wait_for_log(cause);
    let longest = log.lines().map(str::len).max().unwrap_or(0);
    assert!(longest <= 16 * 1024, "a log line of {longest} bytes");
    assert_stopped(
        &wedge,
        outcome,
        "500",
        cause,
        "guest_error",
        BUDGET + MARGIN,
    );
    // The notices' budget is not in debt: the next fault is told.
    assert_eq!(get(&wedge, "/informational").0, "500");
    wedge.server().wait_for_log("status 101 is informational");
}

#[test]
fn huge_random_lists_are_refused_within_the_host_memory_budget() {
    let wedge = serve(HOSTILE_LIMITS);
    // Twenty lists of 64 MiB, each dropped by the guest at once.
    let outcome = attack(&wedge, "/random-hoard?max=20", 1);
    let cause = "exceeds limit 8388608";
    assert_stopped(&wedge, outcome, "500", cause, "trap", BUDGET + MARGIN);
}

#[test]
fn a_guest_flooding_its_output_is_held_to_its_log_budget() {
    // CPU time to spare: 100,000 prints are a lot of host calls, and the meter
    // counts the wall time of each, preemption on a loaded machine included.
    let wedge = serve_with(
        "log_rate = \"1KiB\"\nlog_burst = \"16KiB\"\ncpu_time = \"20s\"\n",
        &["--access-log"],
    );
    // 100,000 lines of 100 bytes: 10 MB in the log unless the budget drops it.
    let started = Instant::now();
    let (answers, neighbour, _) = attack(&wedge, "/log-flood?lines=100000", 1);
    let took = started.elapsed();
    // Output is not a fault: the guest runs on, its excess is dropped.
    let answer = (
        "200".to_string(),
        "survived: printed 100000 lines\n".to_string(),
    );
    assert_eq!(answers, [answer]);
    assert!(
        neighbour.iter().all(|status| status == "200"),
        "{neighbour:?}"
    );
    // The access log line comes after everything the guest printed.
    let log = wedge.server().wait_for_log("GET /log-flood 200");
    let kept = log.lines().filter(|l| l.contains("[hostile] xxxx")).count() as u64;
    let reports = log
        .lines()
        .filter(|l| l.contains("app `hostile`: guest output over its budget (1KiB/s, burst 16KiB)"))
        .count() as u64;
    let dropped = wedge.samples().get(
        "wedge_guest_output_dropped_bytes_total",
        &[("app", "hostile")],
    ) as u64;
    eprintln!("kept {kept} lines, dropped {dropped} bytes, {reports} reports in {took:?}");
    assert_eq!(
        kept * 100 + dropped,
        10_000_000,
        "every byte is logged or counted"
    );
    // At most the burst, the rate for as long as the attack took, and one line of debt.
    let allowed = 16 * 1024 + 1024 * (took.as_secs() + 1) + 100;
    assert!(
        kept * 100 <= allowed,
        "{kept} lines logged, {allowed} bytes allowed"
    );
    // One report at the first drop, then at most one a second.
    assert!(
        (1..=took.as_secs() + 1).contains(&reports),
        "{reports} reports in {took:?}"
    );
}

/// Hostile-tenant review (stop 40): fault lines shared their budget with the notices
/// a guest causes once per host call: while a guest made outbound requests no
/// allow-list names (one refusal line each), 3 of 4 "CPU time limit exceeded" lines
/// and 1 of 4 "guest trapped" lines were dropped. Faults now have a budget of their own.
#[test]
fn a_guests_flood_of_notices_does_not_crowd_out_a_fault_line() {
    let limits = "log_rate = \"1KiB\"\nlog_burst = \"16KiB\"\ncpu_time = \"5s\"\n";
    let wedge = serve_with(limits, &[]);
    thread::scope(|scope| {
        // Refusals until its CPU time is up (504).
        let flood = scope.spawn(|| get(&wedge, "/deny-flood?requests=100000000"));
        wedge
            .server()
            .wait_for_log("wedge's lines about it dropped");
        // While the notices' budget is spent, a fault of the same app.
        assert_eq!(get(&wedge, "/informational").0, "500");
        wedge.server().wait_for_log("status 101 is informational");
        assert_eq!(flood.join().unwrap().0, "504");
    });
}

/// Attack review (issue 16): what a guest makes wedge write is the app's log budget
/// too, not only its stdout: wedge's refusal of each outbound request to a
/// destination no allow-list names, and empty lines, each charged what wedge writes
/// around it (before, 80,000 refusals or a million empty lines a request passed).
#[test]
fn what_a_guest_makes_wedge_log_is_held_to_its_log_budget() {
    let limits = "log_rate = \"1KiB\"\nlog_burst = \"16KiB\"\ncpu_time = \"20s\"\n";
    let wedge = serve_with(limits, &["--access-log"]);
    let attacks = [
        (
            "/deny-flood",
            "requests=20000",
            "survived: sent 20000 requests\n",
        ),
        (
            "/empty-lines",
            "lines=100000",
            "survived: printed 100000 empty lines\n",
        ),
    ];
    for (path, query, answer) in attacks {
        let before = wedge.server().log().len();
        let started = Instant::now();
        assert_eq!(
            get(&wedge, &format!("{path}?{query}")),
            ("200".to_string(), answer.to_string())
        );
        let took = started.elapsed();
        // The access log line comes after everything the request made wedge write.
        let log = wedge.server().wait_for_log(&format!("GET {path} 200"));
        let grown = (log.len() - before) as u64;
        // The burst, the rate for as long as it took, one line past it, and the
        // access and report lines (not the app's).
        let allowed = 16 * 1024 + 1024 * (took.as_secs() + 1) + 4096;
        eprintln!("{path}: the log grew {grown} bytes in {took:?}");
        assert!(
            grown <= allowed,
            "{path}: {grown} bytes logged, {allowed} allowed"
        );
    }
    let dropped = wedge.samples().get(
        "wedge_guest_output_dropped_bytes_total",
        &[("app", "hostile")],
    );
    assert!(dropped > 100_000.0, "{dropped} bytes counted as dropped");
}

/// Attack review (issue 16): a guest's line cannot pass for two, or for one of
/// wedge's own: control characters, line separators and bidirectional overrides
/// are shown escaped.
#[test]
fn a_guest_cannot_forge_log_lines() {
    let wedge = serve("");
    assert_eq!(get(&wedge, "/forge"), ("200".into(), "printed\n".into()));
    let log = wedge.server().wait_for_log(
        r"[hostile] forged\u{d}INFO wedge: admin token accepted\u{2028}\u{202e}txt.exe",
    );
    assert!(!log.contains("\rINFO wedge"), "{log}");
    assert!(!log.contains('\u{202e}'), "{log}");
}

/// Attack review (issue 22's, applied to wasi:http guests): a guest answering with a
/// 1xx status, which is no final response, gets a 500 and one log line, over
/// HTTP/1.1 and HTTP/2 (where a 1xx with a body makes the client reset the stream
/// or close the connection, other apps' streams on it too); the app serves on.
#[test]
fn a_guest_answering_with_an_informational_status_gets_its_fault() {
    let wedge = serve("");
    for status in [100, 101, 103] {
        let (code, body) = get(&wedge, &format!("/informational?status={status}"));
        assert_eq!(code, "500", "{status}: {body}");
        wedge.server().wait_for_log(&format!(
            "status {status} is informational, not a final response"
        ));
    }
    let out = curl(&[
        "--http2-prior-knowledge",
        "-w",
        "\n%{http_code}",
        &format!("{}/informational", wedge.server().url),
    ]);
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.ends_with("\n500"), "{text}");
    assert_eq!(get(&wedge, "/hello"), ("200".into(), "hello\n".into()));
}

/// A guest that writes a body on a response that has none (a 204 or a 304, or any
/// answer to HEAD, RFC 9110 §6.4.1) gets its head sent alone over every protocol:
/// HTTP/2 and HTTP/3 clients take content there for a malformed response (it was
/// sent over h2, and curl reset the stream with PROTOCOL_ERROR).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_body_on_a_response_that_has_none_is_not_sent_over_any_protocol() {
    let data_dir = support::temp_dir("no-content");
    let server = support::Server::start_in(&support::example("hostile"), &[], &data_dir);
    let client = Client {
        server: &server,
        data_dir: &data_dir,
    };
    for proto in Proto::ALL {
        for status in [204, 304] {
            let answer = client
                .get(proto, &format!("/informational?status={status}"))
                .await;
            assert_eq!(
                (answer.status, answer.complete, answer.body.as_slice()),
                (status, true, &b""[..]),
                "{proto:?}"
            );
        }
    }
    // curl, for HTTP/1.1, would wait for the body a HEAD response announces.
    for proto in [Proto::H2, Proto::H3] {
        let answer = client.send(proto, "HEAD", "/hello", None).await;
        assert_eq!(
            (answer.status, answer.complete, answer.body.as_slice()),
            (200, true, &b""[..]),
            "{proto:?}"
        );
    }
}
