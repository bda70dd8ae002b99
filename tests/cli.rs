//! The command line: bad input exits 2 with one line, the precompiled cache
//! survives restarts, guest crate directories are built, shutdown drains.

mod support;

use std::time::Duration;

use support::{Server, curl, example, repo, sigterm, temp_dir, wedge};

/// `wedge ARGS` fails with exit code 2 and exactly one line on stderr
/// containing `expected`, and nothing that looks like a panic.
fn fails_with(args: &[&str], expected: &str) {
    let mut args = args.to_vec();
    if args.len() >= 2 && !args.contains(&"--listen") {
        args.extend(["--listen", "127.0.0.1:0", "--tls-listen", "127.0.0.1:0"]);
    }
    let args = &args[..];
    let out = wedge(args, &temp_dir("cli"));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
    let lines: Vec<&str> = stderr.lines().filter(|l| !l.trim().is_empty()).collect();
    assert_eq!(
        lines.len(),
        1,
        "{args:?} printed more than one line:\n{stderr}"
    );
    assert!(lines[0].contains(expected), "{args:?}: {stderr}");
    assert!(
        !stderr.contains("panicked") && !stderr.contains("backtrace"),
        "{stderr}"
    );
}

fn file_with(name: &str, bytes: &[u8]) -> String {
    let path = temp_dir("input").join(name);
    std::fs::write(&path, bytes).unwrap();
    path.display().to_string()
}

#[test]
fn a_missing_file_is_refused() {
    fails_with(&["serve", "/nonexistent/app.wasm"], "does not exist");
}

#[test]
fn a_file_that_is_not_wasm_is_refused() {
    let path = file_with("notes.wasm", b"hello, I am text\n");
    fails_with(&["serve", &path], "not a WebAssembly file");
}

#[test]
fn a_core_module_is_refused_with_a_hint() {
    let path = file_with("core.wasm", b"\0asm\x01\0\0\0");
    fails_with(&["serve", &path], "core wasm module, not a component");
}

#[test]
fn a_component_of_neither_world_names_both_and_what_it_exports() {
    // The smallest valid component: a header and no sections, so no exports.
    let path = file_with("empty.wasm", b"\0asm\x0d\0\x01\0");
    fails_with(
        &["serve", &path],
        "exports neither `wasi:http/incoming-handler@0.2.x` nor `wasi:http/handler@0.3.x` \
         (it exports: nothing)",
    );
}

#[test]
fn a_port_in_use_is_refused() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap().to_string();
    let hello = example("hello").display().to_string();
    fails_with(
        &["serve", &hello, "--listen", &addr],
        &format!("cannot listen on {addr}"),
    );
}

#[test]
fn bad_flags_and_values_are_refused() {
    let hello = example("hello").display().to_string();
    fails_with(&["serve", &hello, "--no-such-flag"], "--no-such-flag");
    fails_with(&["serve", &hello, "--memory", "lots"], "lots");
    fails_with(&["serve", &hello, "--cpu-time", "soon"], "soon");
    fails_with(&["serve", &hello, "--listen", "nowhere"], "nowhere");
    fails_with(&["serve"], "TARGET");
}

#[test]
fn workers_must_be_a_positive_number() {
    let hello = example("hello").display().to_string();
    fails_with(&["serve", &hello, "--workers", "0"], "--workers");
    fails_with(&["serve", &hello, "--workers", "x"], "--workers");
}

#[test]
fn every_core_gets_a_worker_by_default() {
    let cores = std::thread::available_parallelism().unwrap().get();
    let server = Server::start(&example("hello"), &[]);
    server.wait_for_log(&format!("workers: {cores}\n"));
    let server = Server::start(&example("hello"), &["--workers", "3"]);
    server.wait_for_log("workers: 3\n");
}

#[test]
fn instance_reuse_flags_are_checked() {
    let hello = example("hello").display().to_string();
    fails_with(
        &["serve", &hello, "--instance-reuse", "0"],
        "--instance-reuse",
    );
    fails_with(
        &["serve", &hello, "--instance-concurrency", "0"],
        "--instance-concurrency",
    );
    fails_with(
        &["serve", &hello, "--instance-idle", "0s"],
        "must be more than zero",
    );
    // Per-app settings come from the file beside --config, like the other limits.
    let config = file_with("wedge.toml", b"listen = \"127.0.0.1:0\"\n");
    let out = wedge(
        &["serve", "--config", &config, "--instance-reuse", "2"],
        &temp_dir("cli"),
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("--instance-reuse"), "{stderr}");
}

#[test]
fn a_directory_without_a_crate_is_refused() {
    let dir = temp_dir("empty-dir").display().to_string();
    fails_with(&["serve", &dir], "without a Cargo.toml");
}

#[test]
fn the_second_start_loads_the_precompiled_component() {
    let data = temp_dir("cache");
    let hello = example("hello");
    let first = Server::start_in(&hello, &[], &data);
    let log = first.wait_for_log("compiled app `hello`");
    assert!(!log.contains("precompiled cache in"), "{log}");
    drop(first);
    let second = Server::start_in(&hello, &[], &data);
    let log = second.wait_for_log("loaded app `hello` from the precompiled cache");
    assert!(
        !log.contains("compiled app `hello` in"),
        "the second start compiled again:\n{log}"
    );
    let out = curl(&["--fail", &format!("{}/", second.url)]);
    assert_eq!(out.stdout, b"Hello, world!\n");
}

#[test]
fn a_guest_crate_directory_is_built_and_served() {
    example("hello"); // the examples are built (and so up to date) before we ask wedge to
    let server = Server::start(&repo().join("examples/hello"), &[]);
    let out = curl(&["--fail", &format!("{}/", server.url)]);
    assert_eq!(out.stdout, b"Hello, world!\n");
}

#[test]
fn sigterm_finishes_requests_in_flight_then_exits_0() {
    let server = Server::start(&example("faults"), &["--drain-timeout", "30s"]);
    let url = format!("{}/sleep?ms=1500", server.url);
    let in_flight = std::thread::spawn(move || curl(&["--fail", "--include", &url]));
    server.wait_for_log("[faults] sleeping 1500 ms");
    sigterm(server.pid());
    let out = in_flight.join().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let response = String::from_utf8_lossy(&out.stdout).to_lowercase();
    // HTTP/1.1's way to say "no more requests on this connection" while draining.
    assert!(response.contains("\r\nconnection: close\r\n"), "{response}");
    assert!(response.ends_with("\r\n\r\nslept 1500\n"), "{response}");
    let url = server.url.clone();
    let (status, log) = server.wait_exit(Duration::from_secs(60));
    assert_eq!(status.code(), Some(0), "{log}");
    // Stopped: new connections are refused.
    let out = curl(&[&format!("{url}/")]);
    assert_eq!(out.status.code(), Some(7), "curl should fail to connect");
}

#[test]
fn ci_runs_the_test_command_the_readme_gives() {
    let readme = std::fs::read_to_string(repo().join("README.md")).unwrap();
    let after = readme
        .split("Run all tests")
        .nth(1)
        .expect("a 'Run all tests' section");
    let command = after
        .split("```sh\n")
        .nth(1)
        .and_then(|block| block.lines().next())
        .expect("a command under 'Run all tests'");
    let ci = std::fs::read_to_string(repo().join(".ci/run")).unwrap();
    assert!(
        ci.lines().any(|line| line.trim() == command.trim()),
        ".ci/run does not run README's test command `{command}`"
    );
}
