//! Per-app admission end to end: past `--max-concurrent` running instances requests
//! wait in a queue bounded by `--queue` and `--queue-timeout`, then get 503 with
//! Retry-After; a freed slot serves the next request.

use support::{Parked, Server, curl, example};

/// Status line and headers (lowercased) and body of a curl request.
fn post(server: &Server) -> (String, String) {
    let out = curl(&[
        "--include",
        "--data-binary",
        "hi",
        &format!("{}/", server.url),
    ]);
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    (
        text.lines().next().unwrap_or("").to_string(),
        text.to_lowercase(),
    )
}

#[test]
fn past_max_concurrent_with_no_queue_requests_get_503_with_retry_after() {
    let server = Server::start(&example("echo"), &["--max-concurrent", "1", "--queue", "0"]);
    let parked = Parked::open(&server, "/");
    let (status, response) = post(&server);
    assert!(status.contains("503"), "{response}");
    assert!(response.contains("retry-after: 1"), "{response}");
    assert!(response.contains("already wait"), "{response}");
    server.wait_for_log("request refused: all 1 instances busy");

    parked.finish();
    support::poll_until("a free slot after the parked request ended", || {
        let (status, _) = post(&server);
        status.contains("200").then_some(())
    });
}

#[test]
fn a_queued_request_is_refused_after_the_queue_timeout() {
    let server = Server::start(
        &example("echo"),
        &[
            "--max-concurrent",
            "1",
            "--queue",
            "4",
            "--queue-timeout",
            "100ms",
        ],
    );
    let parked = Parked::open(&server, "/");
    let (status, response) = post(&server);
    assert!(status.contains("503"), "{response}");
    assert!(
        response.contains("none came free within 100ms"),
        "{response}"
    );
    parked.finish();
}

#[test]
fn past_max_instances_across_all_apps_requests_get_503_with_retry_after() {
    // The app would admit more, but the host's pool has one instance.
    let server = Server::start(
        &example("echo"),
        &["--max-instances", "1", "--max-concurrent", "5"],
    );
    let parked = Parked::open(&server, "/");
    let (status, response) = post(&server);
    assert!(status.contains("503"), "{response}");
    assert!(response.contains("retry-after: 1"), "{response}");
    assert!(response.contains("the host is busy"), "{response}");
    server.wait_for_log("no instance free in the host's pool");
    parked.finish();
    support::poll_until("a free instance after the parked request ended", || {
        let (status, _) = post(&server);
        status.contains("200").then_some(())
    });
}
