//! The command line: bad input exits 2 with one line, the precompiled cache
//! survives restarts, guest crate directories are built, shutdown drains.

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

/// A module that embeds no wasi:http world (tests/e2e/core_modules.rs serves those that do):
/// the line names the ways out.
#[test]
fn a_core_module_without_a_world_is_refused_naming_the_ways_out() {
    let path = file_with("core.wasm", b"\0asm\x01\0\0\0");
    fails_with(
        &["serve", &path],
        "core wasm module that embeds no wasi:http world, not a component; build it for \
         `wasm32-wasip2`, or generate its wasi:http bindings with wit-bindgen",
    );
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
    // As wedge.toml's `memory = 0` is refused, not left to fail the instance pool.
    fails_with(
        &["serve", &hello, "--memory", "0"],
        "must be more than zero",
    );
    fails_with(&["serve", &hello, "--listen", "nowhere"], "nowhere");
    // hyper's read buffer holds at least 8 KiB.
    fails_with(
        &["serve", &hello, "--h1-max-head-size", "8191"],
        "--h1-max-head-size",
    );
    fails_with(&["serve"], "TARGET");
}

/// A zero timeout or time limit would time out every connection or request at once;
/// none of these means "off", so each is refused with the flag named (as `wedge.toml`
/// refuses a zero `cpu_time`). `--queue-timeout 0` (answer 503 at once) and
/// `--drain-timeout 0` (exit at once) do mean something and stay allowed.
#[test]
fn a_zero_timeout_or_time_limit_is_refused() {
    let hello = example("hello").display().to_string();
    for flag in [
        "--cpu-time",
        "--wall-time",
        "--instance-idle",
        "--handshake-timeout",
        "--h1-header-read-timeout",
        "--h1-write-timeout",
        "--h2-handshake-timeout",
        "--h2-settings-timeout",
        "--h2-header-read-timeout",
        "--h2-idle-timeout",
        "--h2-zero-window-timeout",
        "--h2-write-timeout",
        "--h3-idle-timeout",
        "--h3-header-read-timeout",
        "--h3-zero-window-timeout",
        "--outbound-connect-timeout",
        "--outbound-idle-timeout",
        "--kv-timeout",
        "--kv-sync-interval",
        "--registry-timeout",
        "--registry-deadline",
    ] {
        // `--help` last: values are checked as they are parsed, so a refused one
        // fails first, and an accepted one prints the help instead of serving.
        let out = wedge(&["serve", &hello, flag, "0s", "--help"], &temp_dir("cli"));
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{flag}: {stderr}");
        assert!(
            stderr.contains(flag) && stderr.contains("must be more than zero"),
            "{flag}: {stderr}"
        );
    }
    for flag in ["--queue-timeout", "--drain-timeout"] {
        let out = wedge(&["serve", &hello, flag, "0s", "--help"], &temp_dir("cli"));
        assert!(out.status.success(), "{flag} 0s was refused");
    }
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
    // The examples are built (and so up to date) before we ask wedge to.
    let built = std::fs::read(example("hello")).unwrap();
    let server = Server::start(&repo().join("examples/hello"), &[]);
    let out = curl(&["--fail", &format!("{}/", server.url)]);
    assert_eq!(out.stdout, b"Hello, world!\n");
    // Built elsewhere: other tests read the example's artifact meanwhile.
    assert!(
        std::fs::read(example("hello")).unwrap() == built,
        "building the crate rewrote examples/target"
    );
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

#[test]
fn sizes_without_a_unit_are_refused_like_durations() {
    let hello = example("hello").display().to_string();
    fails_with(
        &["serve", &hello, "--memory", "12"],
        "`12` needs a unit, e.g. 12MiB",
    );
    fails_with(
        &["serve", &hello, "--max-body", "4096"],
        "`4096` needs a unit",
    );
    // 0 is 0 in every unit.
    let server = Server::start(&example("hello"), &["--pool-keep-resident", "0"]);
    drop(server);
    // In wedge.toml a string needs a unit too; a TOML integer is a number of bytes.
    let config = |limits: &str| {
        let text = format!(
            "listen = \"127.0.0.1:0\"\n[[app]]\nname = \"hello\"\ncomponent = \"{hello}\"\n\
             routes = [\"/\"]\n[app.limits]\n{limits}\n"
        );
        file_with("wedge.toml", text.as_bytes())
    };
    let out = wedge(
        &["serve", "--config", &config("memory = \"12\"")],
        &temp_dir("cli"),
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("app[0].limits.memory: `12` needs a unit, e.g. 12MiB"),
        "{stderr}"
    );
    let server = Server::start_config(std::path::Path::new(&config("max_body = 4096")), &[]);
    let out = curl(&["--fail", &format!("{}/", server.url)]);
    assert_eq!(out.stdout, b"Hello, world!\n");
}

/// `wedge ARGS --help`: each heading with the flags listed under it.
fn help_sections(args: &[&str]) -> Vec<(String, Vec<String>)> {
    let out = wedge(&[args, &["--help"]].concat(), &temp_dir("cli"));
    assert!(out.status.success());
    let mut sections: Vec<(String, Vec<String>)> = Vec::new();
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        if let Some(heading) = line.strip_suffix(':').filter(|l| !l.starts_with(' ')) {
            sections.push((heading.to_string(), Vec::new()));
        } else if line.trim_start().starts_with('-') {
            // `  -h, --help  …` or `      --listen <ADDR>  …`
            let long = line.split_whitespace().find(|word| word.starts_with("--"));
            sections
                .last_mut()
                .unwrap()
                .1
                .push(long.unwrap().to_string());
        }
    }
    sections
}

fn flags_under<'a>(sections: &'a [(String, Vec<String>)], heading: &str) -> &'a [String] {
    let found = sections.iter().find(|(h, _)| h == heading);
    &found
        .unwrap_or_else(|| panic!("no heading {heading:?} in {sections:?}"))
        .1
}

#[test]
fn help_groups_the_flags_by_purpose() {
    let serve = help_sections(&["serve"]);
    let headings: Vec<&str> = serve.iter().map(|(h, _)| h.as_str()).collect();
    assert_eq!(
        headings,
        [
            "Arguments",
            "Options",
            "Listeners and TLS",
            "Limits per instance and request",
            "Instances and queueing",
            "Process and logs",
            "Connections and HTTP/1.1",
            "HTTP/2",
            "HTTP/3",
            "Outbound HTTP",
            "Guest environment and config",
            "Key-value store",
            "Admin API",
            "OCI registries",
        ]
    );
    assert_eq!(flags_under(&serve, "Options"), ["--config", "--help"]);
    assert_eq!(
        flags_under(&serve, "Listeners and TLS"),
        [
            "--listen",
            "--tls-listen",
            "--no-tls",
            "--tls-cert",
            "--tls-key"
        ]
    );
    assert_eq!(
        flags_under(&serve, "Guest environment and config"),
        ["--env", "--var"]
    );
    assert_eq!(
        flags_under(&serve, "Key-value store"),
        [
            "--kv",
            "--kv-durability",
            "--kv-bucket",
            "--kv-max-keys",
            "--kv-max-key-size",
            "--kv-max-value-size",
            "--kv-max-bytes",
            "--kv-max-in-flight",
            "--kv-timeout",
            "--kv-sync-interval",
            "--kv-max-write-rate",
            "--kv-max-handles",
            "--kv-max-batch",
            "--kv-ca"
        ]
    );
    assert_eq!(
        flags_under(&serve, "Admin API"),
        [
            "--admin",
            "--admin-token-file",
            "--admin-tls-cert",
            "--admin-tls-key",
            "--admin-max-upload"
        ]
    );
    assert!(flags_under(&serve, "Limits per instance and request").contains(&"--memory".into()));
    assert!(flags_under(&serve, "Process and logs").contains(&"--access-log".into()));

    let dev = help_sections(&["dev"]);
    assert_eq!(
        flags_under(&dev, "Listeners and TLS"),
        [
            "--port",
            "--tls-port",
            "--no-tls",
            "--host",
            "--tls-cert",
            "--tls-key"
        ]
    );
    assert_eq!(
        flags_under(&dev, "Projects other toolchains build"),
        ["--build", "--component", "--watch"]
    );
    assert!(dev.iter().all(|(heading, _)| heading != "Admin API"));
}

#[test]
fn usage_errors_point_to_the_help_of_their_subcommand() {
    let hello = example("hello").display().to_string();
    fails_with(
        &["serve", &hello, "--no-such-flag"],
        "(see `wedge serve --help`)",
    );
    fails_with(&["deploy", "hi"], "(see `wedge deploy --help`)");
    fails_with(&["dev", "--port", "x"], "(see `wedge dev --help`)");
    fails_with(&["no-such-command"], "(see `wedge --help`)");
}

#[test]
fn listen_addresses_may_name_a_host() {
    // Resolved when the flags are read: to its first IPv4 address.
    let server = Server::start(&example("hello"), &["--tls-listen", "localhost:0"]);
    let tls = server.tls_url.clone().unwrap();
    assert!(tls.starts_with("https://127.0.0.1:"), "{tls}");
    let out = curl(&["--fail", "--insecure", &format!("{tls}/")]);
    assert_eq!(out.stdout, b"Hello, world!\n");
    let hello = example("hello").display().to_string();
    fails_with(
        &["serve", &hello, "--listen", "localhost"],
        "is not HOST:PORT",
    );
    fails_with(
        &["serve", &hello, "--listen", "localhost:http"],
        "`http` in `localhost:http` is not a port",
    );
}

/// A process killed on drop.
struct Running(std::process::Child);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// `wedge serve --config FILE`'s first `lines` lines on stdout (bounded), and the
/// process, still serving.
fn start_up_lines(config: &str, lines: usize) -> (Vec<String>, Running) {
    use std::io::BufRead;
    let mut child = support::wedge_command()
        .args(["serve", "--config", config])
        .env("WEDGE_DATA_DIR", temp_dir("data"))
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let child = Running(child);
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(stdout)
            .lines()
            .map_while(Result::ok)
        {
            let _ = tx.send(line);
        }
    });
    let deadline = std::time::Instant::now() + Duration::from_secs(120);
    let mut read = Vec::new();
    while read.len() < lines {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        match rx.recv_timeout(left) {
            Ok(line) => read.push(line),
            Err(_) => panic!("wedge printed only {read:?}"),
        }
    }
    (read, child)
}

#[test]
fn a_multi_app_start_lists_each_app_with_its_route_urls() {
    let hello = example("hello").display().to_string();
    let config = file_with(
        "wedge.toml",
        format!(
            "listen = \"127.0.0.1:0\"\ntls_listen = \"127.0.0.1:0\"\n\
             [[app]]\nname = \"api\"\ncomponent = \"{hello}\"\n\
             routes = [\"api.example.com/\", \"/api\"]\n\
             [[app]]\nname = \"hidden\"\ncomponent = \"{hello}\"\n\
             [[app]]\nname = \"site\"\ncomponent = \"{hello}\"\nroutes = [\"/\"]\n"
        )
        .as_bytes(),
    );
    let (lines, _server) = start_up_lines(&config, 5);
    let words: Vec<Vec<&str>> = lines
        .iter()
        .map(|l| l.split_whitespace().collect())
        .collect();
    // wedge: serving 3 apps from FILE on http://127.0.0.1:P/ and https://127.0.0.1:Q/ (h3 on udp Q)
    assert_eq!(
        words[0][..5],
        ["wedge:", "serving", "3", "apps", "from"],
        "{lines:?}"
    );
    let (plain, tls) = (words[0][7], words[0][9]);
    let port = |url: &str| {
        url.trim_end_matches('/')
            .rsplit(':')
            .next()
            .unwrap()
            .to_string()
    };
    let (p, q) = (port(plain), port(tls));
    assert_eq!(
        words[1..],
        [
            vec![
                "api".to_string(),
                format!("http://api.example.com:{p}/"),
                format!("https://api.example.com:{q}/")
            ],
            vec![format!("{plain}api"), format!("{tls}api")],
            vec![
                "hidden".to_string(),
                "(no".into(),
                "route:".into(),
                "no".into(),
                "request".into(),
                "reaches".into(),
                "it)".into()
            ],
            vec!["site".to_string(), plain.to_string(), tls.to_string()],
        ],
        "{lines:?}"
    );
    // The URLs listed are the apps'.
    let api = curl(&["--fail", &format!("{plain}api")]);
    assert_eq!(api.stdout, b"Hello, world!\n");
    let resolve = format!("api.example.com:{q}:127.0.0.1");
    let host = format!("https://api.example.com:{q}/");
    let api = curl(&["--fail", "--insecure", "--resolve", &resolve, &host]);
    assert_eq!(api.stdout, b"Hello, world!\n");
}
