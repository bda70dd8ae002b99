//! Guest faults end to end: each gets its documented status (or an aborted
//! body), one log line naming the app and the cause, and the host keeps serving.

mod support;

use support::{Server, curl, example};

/// Status code and body of one request on a new connection.
fn get(server: &Server, path: &str) -> (String, Vec<u8>, i32) {
    let out = curl(&[
        "--write-out",
        "\n%{http_code}",
        &format!("{}{path}", server.url),
    ]);
    let code = out.status.code().unwrap_or(-1);
    let mut body = out.stdout;
    let split = body.iter().rposition(|&b| b == b'\n').unwrap();
    let status = String::from_utf8(body.split_off(split))
        .unwrap()
        .trim()
        .to_string();
    (status, body, code)
}

/// The server still answers a healthy request on a new connection.
fn still_serves(server: &Server) {
    let (status, body, _) = get(server, "/sleep?ms=0");
    assert_eq!(status, "200");
    assert_eq!(body, b"slept 0\n");
}

fn fault_lines(log: &str) -> Vec<&str> {
    log.lines()
        .filter(|l| l.contains("app `faults`:"))
        .collect()
}

/// One request to `path` on a server started with `args` answers `status`,
/// logs exactly one fault line containing `cause`, and the host serves on.
fn fault_case(args: &[&str], path: &str, status: &str, cause: &str) {
    let server = Server::start(&example("faults"), args);
    let (got, _, _) = get(&server, path);
    assert_eq!(got, status, "{}", server.log());
    let log = server.wait_for_log(cause);
    let lines = fault_lines(&log);
    assert_eq!(lines.len(), 1, "{log}");
    assert!(lines[0].contains(cause), "{log}");
    still_serves(&server);
}

#[test]
fn a_trap_before_the_head_is_a_500() {
    fault_case(&[], "/trap-before-head", "500", "guest trapped");
}

#[test]
fn a_trap_after_the_head_aborts_the_body() {
    let server = Server::start(&example("faults"), &[]);
    let out = curl(&[
        "--output",
        "/dev/null",
        &format!("{}/trap-mid-body", server.url),
    ]);
    // 18: partial body; 52: nothing before the close; 56: reset. Never 0 (a clean end).
    let code = out.status.code().unwrap();
    assert!(
        [18, 52, 56].contains(&code),
        "curl exit {code}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let log = server.wait_for_log("guest trapped");
    assert_eq!(fault_lines(&log).len(), 1, "{log}");
    still_serves(&server);
}

#[test]
fn a_cpu_loop_is_stopped_with_504() {
    fault_case(
        &["--cpu-time", "200ms"],
        "/cpu-loop",
        "504",
        "CPU time limit of 200ms exceeded",
    );
}

#[test]
fn waiting_on_io_does_not_count_as_cpu_time() {
    // The guest waits four times its CPU budget; only the waiting is long.
    let server = Server::start(&example("faults"), &["--cpu-time", "250ms"]);
    let (status, body, _) = get(&server, "/sleep?ms=1000");
    assert_eq!(status, "200", "{}", server.log());
    assert_eq!(body, b"slept 1000\n");
}

#[test]
fn the_wall_clock_limit_answers_504() {
    fault_case(
        &["--wall-time", "1s"],
        "/sleep?ms=30000",
        "504",
        "wall-clock limit of 1s exceeded",
    );
}

#[test]
fn memory_exhaustion_is_a_500() {
    fault_case(
        &["--memory", "32MiB"],
        "/memory",
        "500",
        "memory limit of 32 MiB exceeded",
    );
}

#[test]
fn no_response_is_a_500() {
    fault_case(
        &[],
        "/no-response",
        "500",
        "returned without setting a response",
    );
}

#[test]
fn guest_output_is_logged_with_the_app_name() {
    let server = Server::start(&example("faults"), &[]);
    let (status, _, _) = get(&server, "/stdout");
    assert_eq!(status, "200");
    server.wait_for_log("[faults] hello from the guest");
    server.wait_for_log("[faults stderr] guest stderr line");
}

#[test]
fn the_guest_sees_no_host_environment_and_no_filesystem() {
    let server = Server::start(&example("faults"), &[]);
    let (status, body, _) = get(&server, "/sandbox");
    assert_eq!(status, "200");
    assert_eq!(
        String::from_utf8(body).unwrap(),
        "env vars: 0\nfilesystem: denied\n"
    );
}
