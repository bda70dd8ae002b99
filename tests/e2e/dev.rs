//! `wedge dev`: builds a guest crate, serves it, rebuilds on every save and swaps the
//! new version in; a broken build keeps the last good version (or shows its errors).

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Buf;

use support::dev::{builds_stay, get, head_and_body, served_url, wait_for_body, wait_for_builds};
use support::{Server, curl, example, new_crate, poll_until, sigint, sigterm, temp_dir};

/// A handler answering `TEXT from PATH`.
fn greeting(text: &str) -> String {
    format!(
        r#"use wedge_sdk::{{Request, Response}};

async fn handle(req: Request) -> Response {{
    Response::text(format!("{text} from {{}}!\n", req.path()))
}}

wedge_sdk::export_handler!(handle);
"#
    )
}

fn write_lib(dir: &Path, source: &str) {
    std::fs::write(dir.join("src/lib.rs"), source).unwrap();
}

#[test]
fn a_save_reloads_a_broken_build_keeps_the_last_version_and_a_fix_reloads() {
    let dir = new_crate(&temp_dir("dev-reload"), "devreload");
    let server = Server::dev(&dir, &[]);
    let url = format!("{}/hi", server.url);
    assert_eq!(get(&url), ("200".into(), "Hello from /hi!\n".into()));
    // The access log names method, path, status and protocol.
    server.wait_for_log("GET /hi 200");
    server.wait_for_log("HTTP/1.1");
    // Every build is new to the precompiled cache: `wedge dev` compiles it tiered
    // by default (Winch first), so a save is served without waiting for Cranelift,
    // whose code takes over after the first request.
    #[cfg(target_arch = "x86_64")]
    {
        server.wait_for_log("with the baseline compiler (Winch)");
        server.wait_for_log("now runs optimized code");
    }

    write_lib(&dir, &greeting("Howdy"));
    wait_for_body(&url, "Howdy from /hi!\n");
    server.wait_for_log("reloaded `devreload`");

    write_lib(&dir, "this is not rust\n");
    let log = server.wait_for_log("still serving the last version that built");
    assert!(
        log.contains("expected one of"),
        "the compiler's error is printed:\n{log}"
    );
    assert_eq!(get(&url), ("200".into(), "Howdy from /hi!\n".into()));

    write_lib(&dir, &greeting("Hi"));
    wait_for_body(&url, "Hi from /hi!\n");
}

/// A handler answering the text of `text/greeting.txt`.
const INCLUDED_GREETING: &str = r#"use wedge_sdk::{Request, Response};

async fn handle(req: Request) -> Response {
    let greeting = include_str!("../text/greeting.txt").trim();
    Response::text(format!("{greeting} from {}!\n", req.path()))
}

wedge_sdk::export_handler!(handle);
"#;

/// Issue 17 item 1: only content changes of what the build reads make a build, one
/// per save; reads (cargo's own), metadata changes, identical saves and editor
/// scratch files make none.
#[test]
fn idle_it_builds_once_and_each_save_that_changes_content_builds_once_more() {
    let dir = new_crate(&temp_dir("dev-quiet"), "devquiet");
    let server = Server::dev(&dir, &[]);
    let url = format!("{}/", server.url);
    assert_eq!(get(&url), ("200".into(), "Hello from /!\n".into()));
    builds_stay(&|| server.log(), 1, Duration::from_secs(10));

    // Not changes: the same content saved, a touch, reads, editor scratch files.
    let lib = dir.join("src/lib.rs");
    std::fs::write(&lib, std::fs::read(&lib).unwrap()).unwrap();
    let manifest = std::fs::File::open(dir.join("Cargo.toml")).unwrap();
    manifest.set_modified(std::time::SystemTime::now()).unwrap();
    drop(manifest);
    std::fs::read_to_string(dir.join("Cargo.lock")).unwrap();
    for scratch in ["src/.lib.rs.swp", "src/4913", "src/lib.rs~", "src/.#lib.rs"] {
        std::fs::write(dir.join(scratch), "scratch").unwrap();
        std::fs::remove_file(dir.join(scratch)).unwrap();
    }
    builds_stay(&|| server.log(), 1, Duration::from_secs(3));

    write_lib(&dir, &greeting("Howdy"));
    wait_for_body(&url, "Howdy from /!\n");
    builds_stay(&|| server.log(), 2, Duration::from_secs(3));

    // A directory made after the start is watched: its file's edits rebuild.
    std::fs::create_dir(dir.join("text")).unwrap();
    std::fs::write(dir.join("text/greeting.txt"), "Hey\n").unwrap();
    let log = wait_for_builds(&|| server.log(), 3);
    assert!(
        log.contains("text/greeting.txt changed: rebuilding"),
        "{log}"
    );
    write_lib(&dir, INCLUDED_GREETING);
    wait_for_body(&url, "Hey from /!\n");
    std::fs::write(dir.join("text/greeting.txt"), "Hi\n").unwrap();
    wait_for_body(&url, "Hi from /!\n");
    builds_stay(&|| server.log(), 5, Duration::from_secs(3));

    // A broken save: one build, its errors printed once.
    write_lib(&dir, "this is not rust\n");
    server.wait_for_log("still serving the last version that built");
    let log = builds_stay(&|| server.log(), 6, Duration::from_secs(3));
    assert_eq!(log.matches("error: expected one of").count(), 1, "{log}");
}

/// A handler that prints when it starts, reads the whole body, and answers how much
/// it read, naming its version.
fn body_counter(version: &str) -> String {
    format!(
        r#"use wedge_sdk::{{Request, Response}};

async fn handle(req: Request) -> Result<Response, wedge_sdk::Error> {{
    println!("{version} started");
    let body = req.into_body().read_to_end(1 << 20).await?;
    Ok(Response::text(format!("{version} read {{}} bytes\n", body.len())))
}}

wedge_sdk::export_handler!(handle);
"#
    )
}

#[test]
fn a_request_in_flight_across_a_reload_finishes_on_the_old_version() {
    let dir = new_crate(&temp_dir("dev-inflight"), "devinflight");
    write_lib(&dir, &body_counter("v1"));
    let server = Server::dev(&dir, &[]);

    // A request whose body is still coming: its handler runs in version 1.
    let mut stream = TcpStream::connect(server.authority()).unwrap();
    write!(
        stream,
        "POST /upload HTTP/1.1\r\nhost: x\r\nconnection: close\r\ntransfer-encoding: chunked\r\n\r\n5\r\nhello\r\n"
    )
    .unwrap();
    server.wait_for_log("v1 started");

    write_lib(&dir, &body_counter("v2"));
    poll_until("version 2 serving", || {
        let out = curl(&["--data-binary", "abc", &format!("{}/", server.url)]);
        (String::from_utf8_lossy(&out.stdout) == "v2 read 3 bytes\n").then_some(())
    });

    // The old request goes on: the rest of its body, then version 1's answer.
    write!(stream, "6\r\n world\r\n0\r\n\r\n").unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).unwrap();
    assert!(response.starts_with("HTTP/1.1 200"), "{response}");
    assert!(response.ends_with("v1 read 11 bytes\n"), "{response}");
}

#[test]
fn without_a_good_build_requests_get_the_errors_until_a_fix_builds() {
    let dir = new_crate(&temp_dir("dev-broken"), "devbroken");
    write_lib(&dir, "fn broken( {}\n");
    let server = Server::dev(&dir, &[]);
    let url = format!("{}/", server.url);

    let (status, text) = get(&url);
    assert_eq!(status, "500");
    assert!(text.contains("`devbroken` failed to build"), "{text}");
    assert!(text.contains("error"), "{text}");

    let out = curl(&["--include", "--header", "accept: text/html,*/*;q=0.8", &url]);
    let page = String::from_utf8_lossy(&out.stdout);
    assert!(page.contains("content-type: text/html"), "{page}");
    assert!(
        page.contains("<h1>devbroken failed to build</h1>"),
        "{page}"
    );
    // For curl users, and in rustc's colours, reloading itself once fixed.
    assert!(page.contains("x-wedge-build: failed"), "{page}");
    assert!(
        page.contains("<span style=\"color:#ff616e;font-weight:bold;\">error</span>"),
        "{page}"
    );
    assert!(
        page.contains("new EventSource(\"/_wedge/events\")"),
        "{page}"
    );

    write_lib(&dir, &greeting("Fixed"));
    wait_for_body(&url, "Fixed from /!\n");
}

#[test]
fn serves_tls_with_http2_and_advertises_http3() {
    let dir = new_crate(&temp_dir("dev-tls"), "devtls");
    let server = Server::dev(&dir, &[]);
    let tls_url = server.tls_url.clone().expect("a TLS URL");
    assert!(tls_url.starts_with("https://localhost:"), "{tls_url}");
    let out = curl(&["-k", "--http2", "--include", &format!("{tls_url}/x")]);
    let response = String::from_utf8_lossy(&out.stdout);
    assert!(response.starts_with("HTTP/2 200"), "{response}");
    assert!(response.contains("alt-svc: h3=\":"), "{response}");
    assert!(response.ends_with("Hello from /x!\n"), "{response}");
    server.wait_for_log("GET /x 200");
}

#[test]
fn a_missing_crate_is_one_line_and_exit_2() {
    let dir = temp_dir("dev-missing");
    let out = support::wedge(&["dev", dir.join("nope").to_str().unwrap()], &dir);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(stderr.contains("is not a directory"), "{stderr}");
    let out = support::wedge(&["dev", dir.to_str().unwrap()], &dir);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("wedge new NAME"), "{stderr}");
}

/// A handler answering `Hello from PATH!`, but under `/endless`: a body that never
/// ends (16 KiB writes as fast as the client takes them).
const ENDLESS: &str = r#"use wedge_sdk::{Request, Response};

async fn handle(req: Request) -> Response {
    if req.path().starts_with("/endless") {
        return Response::stream(200, |mut w| async move {
            loop {
                w.write(&[b'.'; 16 * 1024]).await?;
                w.flush().await?;
            }
        });
    }
    Response::text(format!("Hello from {}!\n", req.path()))
}

wedge_sdk::export_handler!(handle);
"#;

/// The access log's line for `what` (`GET /path `), once logged.
fn access_line(server: &Server, what: &str) -> String {
    let log = server.wait_for_log(what);
    log.lines().find(|l| l.contains(what)).unwrap().to_string()
}

/// Issue 17 item 4: "(client gone)" says a client left before the body ended, on
/// every protocol; a body sent to its end (one HTTP/1.1 stops reading at its
/// content-length, a HEAD's absent one) is not cut off.
#[test]
fn the_access_log_says_client_gone_only_when_a_client_left_mid_body() {
    let dir = new_crate(&temp_dir("dev-gone"), "devgone");
    write_lib(&dir, ENDLESS);
    let data_dir = temp_dir("dev-gone-data");
    let h3_server = support::h3::H3Server {
        server: Server::dev_via(&[], &dir, &[], &data_dir),
        data_dir,
    };
    let server = &h3_server.server;

    // HTTP/1.1: whole, a HEAD, and a client that closes mid-body.
    assert_eq!(get(&format!("{}/h1", server.url)).0, "200");
    let out = curl(&["--head", &format!("{}/h1-head", server.url)]);
    assert!(String::from_utf8_lossy(&out.stdout).starts_with("HTTP/1.1 200"));
    let mut stream = TcpStream::connect(server.authority()).unwrap();
    write!(stream, "GET /endless-h1 HTTP/1.1\r\nhost: x\r\n\r\n").unwrap();
    stream.read_exact(&mut [0; 4096]).unwrap();
    drop(stream);

    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        // HTTP/2 (h2c): whole, and a stream the client resets mid-body.
        let tcp = tokio::net::TcpStream::connect(server.authority())
            .await
            .unwrap();
        let (mut h2, connection) = h2::client::handshake(tcp).await.unwrap();
        tokio::spawn(connection);
        let get = |path: &str| {
            let uri = format!("http://localhost{path}");
            http::Request::get(uri).body(()).unwrap()
        };
        let (response, _) = h2.send_request(get("/h2"), true).unwrap();
        let mut body = response.await.unwrap().into_body();
        while let Some(chunk) = body.data().await {
            body.flow_control()
                .release_capacity(chunk.unwrap().len())
                .unwrap();
        }
        let (response, _) = h2.send_request(get("/endless-h2"), true).unwrap();
        let mut body = response.await.unwrap().into_body();
        body.data().await.unwrap().unwrap();
        drop(body); // RST_STREAM (CANCEL)
        access_line(server, "GET /endless-h2 ");

        // HTTP/3: whole, and a stream the client stops mid-body.
        let mut requests = h3_server.connect().await;
        let (status, _) = support::h3::exchange(&mut requests, "GET", "/h3", None).await;
        assert_eq!(status, 200);
        let mut stream = requests
            .send_request(support::h3::request("GET", "/endless-h3"))
            .await
            .unwrap();
        stream.finish().await.unwrap();
        stream.recv_response().await.unwrap();
        let chunk = stream.recv_data().await.unwrap().unwrap();
        assert!(chunk.has_remaining());
        stream.stop_sending(h3::error::Code::H3_REQUEST_CANCELLED);
        drop(stream);
    });

    for (what, protocol) in [
        ("GET /h1 ", "HTTP/1.1"),
        ("HEAD /h1-head ", "HTTP/1.1"),
        ("GET /h2 ", "h2"),
        ("GET /h3 ", "h3"),
    ] {
        let line = access_line(server, what);
        assert!(line.ends_with(&format!(" {protocol}")), "{line}");
    }
    for (what, protocol) in [
        ("GET /endless-h1 ", "HTTP/1.1"),
        ("GET /endless-h2 ", "h2"),
        ("GET /endless-h3 ", "h3"),
    ] {
        let line = access_line(server, what);
        assert!(
            line.ends_with(&format!(" {protocol} (client gone)")),
            "{line}"
        );
    }
    // Piped, the log has no styles, escaped or not.
    let log = server.log();
    assert!(!log.contains('\x1b') && !log.contains("\\x1b"), "{log}");
}

/// `wedge dev` on a terminal (`script` gives it one), killed with SIGTERM on drop.
struct OnTerminal {
    script: std::process::Child,
    output: Arc<Mutex<String>>,
}

impl OnTerminal {
    fn dev(dir: &Path) -> OnTerminal {
        let command = format!(
            "exec {} dev {} --port 0 --no-tls",
            support::wedge_bin().display(),
            dir.display()
        );
        let mut script = Command::new("script")
            .args([
                "--quiet",
                "--flush",
                "--return",
                "--command",
                &command,
                "/dev/null",
            ])
            .env(
                "CARGO_TARGET_DIR",
                support::repo().join("target/guest-tests"),
            )
            .env("WEDGE_DATA_DIR", temp_dir("dev-tty-data"))
            .env("WEDGE_LOG", "info")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .spawn()
            .expect("running script (util-linux)");
        let output = Arc::new(Mutex::new(String::new()));
        let stdout = script.stdout.take().unwrap();
        let out = output.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                out.lock().unwrap().push_str(&line);
                out.lock().unwrap().push('\n');
            }
        });
        OnTerminal { script, output }
    }

    fn wait_for(&self, needle: &str) -> String {
        poll_until(needle, || {
            let output = self.output.lock().unwrap().clone();
            output.contains(needle).then_some(output)
        })
    }
}

impl Drop for OnTerminal {
    fn drop(&mut self) {
        // script passes SIGTERM on to wedge, which stops.
        let pid = self.script.id().to_string();
        let _ = Command::new("kill").args(["-TERM", &pid]).status();
        let _ = self.script.wait();
    }
}

/// Issue 17 item 4: on a terminal the access log's styles are ANSI escapes the
/// terminal renders, not the escapes spelled out.
#[test]
fn on_a_terminal_the_access_log_is_in_colour() {
    let dir = new_crate(&temp_dir("dev-tty"), "devtty");
    let terminal = OnTerminal::dev(&dir);
    let output = terminal.wait_for("wedge: serving");
    let url = served_url(&output);
    assert_eq!(get(&format!("{url}/styled")).0, "200");
    let output = terminal.wait_for("/styled");
    assert!(
        output.contains("\x1b[1mGET /styled\x1b[0m \x1b[32m200\x1b[0m"),
        "{output:?}"
    );
    assert!(!output.contains("\\x1b"), "escapes spelled out: {output:?}");
}

/// A handler with an HTML page at `/`, JSON at `/api` and text elsewhere; `extra`
/// goes into the text's format arguments (`, missing` breaks the build).
fn pages(extra: &str) -> String {
    format!(
        r#"use wedge_sdk::{{Request, Response}};

async fn handle(req: Request) -> Response {{
    match req.path() {{
        "/" => Response::html("<!DOCTYPE html><html><body><h1>v1</h1></body></html>"),
        "/api" => Response::bytes("{{\"ok\":true}}").with_header("content-type", "application/json"),
        path => Response::text(format!("text at {{path}}\n"{extra})),
    }}
}}

wedge_sdk::export_handler!(handle);
"#
    )
}

/// A server-sent event stream read by `curl --no-buffer`, line by line.
struct Events {
    curl: std::process::Child,
    lines: std::sync::mpsc::Receiver<String>,
}

impl Events {
    fn open(url: &str) -> Events {
        let mut curl = Command::new("curl")
            .args(["--silent", "--show-error", "--no-buffer", url])
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let stdout = curl.stdout.take().unwrap();
        let (tx, lines) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        Events { curl, lines }
    }

    /// The next line that is not blank (bounded: a build may come first).
    fn next(&self) -> String {
        loop {
            let line = self
                .lines
                .recv_timeout(Duration::from_secs(300))
                .expect("an event");
            if !line.is_empty() {
                return line;
            }
        }
    }

    /// How curl ended (bounded).
    fn wait(mut self) -> std::process::ExitStatus {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            if let Some(status) = self.curl.try_wait().unwrap() {
                return status;
            }
            assert!(Instant::now() < deadline, "the event stream did not end");
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

#[test]
fn while_a_build_is_broken_responses_say_so_html_pages_carry_a_banner_and_events_tell_the_fix() {
    let dir = new_crate(&temp_dir("dev-overlay"), "devoverlay");
    write_lib(&dir, &pages(""));
    let server = Server::dev(&dir, &[]);
    let page = format!("{}/", server.url);
    let api = format!("{}/api", server.url);
    let (head, body) = head_and_body(&page);
    assert!(!head.contains("x-wedge-build"), "{head}");
    assert_eq!(body, "<!DOCTYPE html><html><body><h1>v1</h1></body></html>");

    write_lib(&dir, &pages(", missing"));
    server.wait_for_log("still serving the last version that built");
    // HTML: marked, and the banner before </body>; its length is no longer known.
    let (head, body) = head_and_body(&page);
    assert!(head.contains("x-wedge-build: failed"), "{head}");
    assert!(!head.contains("content-length"), "{head}");
    let (before, banner) = body
        .split_once("<div id=\"wedge-build-failed\"")
        .unwrap_or_else(|| panic!("no banner: {body}"));
    assert_eq!(before, "<!DOCTYPE html><html><body><h1>v1</h1>");
    assert!(banner.ends_with("</script>\n</body></html>"), "{banner}");
    assert!(banner.contains("devoverlay failed to build"), "{banner}");
    assert!(banner.contains(" at src/lib.rs:7:"), "{banner}");
    assert!(banner.contains("href=\"/_wedge/build\""), "{banner}");
    // Not HTML: only marked.
    let (head, body) = head_and_body(&api);
    assert!(head.contains("x-wedge-build: failed"), "{head}");
    assert!(head.contains("content-length: 11"), "{head}");
    assert_eq!(body, "{\"ok\":true}");
    let (head, body) = head_and_body(&format!("{}/text", server.url));
    assert!(head.contains("x-wedge-build: failed"), "{head}");
    assert_eq!(body, "text at /text\n");
    // The error page: rustc's colours, file:line marked.
    let (head, body) = head_and_body(&format!("{}/_wedge/build", server.url));
    assert!(head.starts_with("http/1.1 200"), "{head}");
    assert!(head.contains("content-type: text/html"), "{head}");
    assert!(
        body.contains("<h1>devoverlay failed to build</h1>"),
        "{body}"
    );
    assert!(
        body.contains("<span style=\"color:#ff616e;font-weight:bold;\">error[E0425]</span>"),
        "{body}"
    );
    assert!(body.contains("<span class=\"loc\">src/lib.rs:7:"), "{body}");

    // The events: the state now, then the fix.
    let events = Events::open(&format!("{}/_wedge/events", server.url));
    assert_eq!(events.next(), "retry: 1000");
    assert!(events.next().starts_with("data: failed "));
    write_lib(&dir, &pages(""));
    assert_eq!(events.next(), "data: ok");
    let (head, body) = head_and_body(&page);
    assert!(!head.contains("x-wedge-build"), "{head}");
    assert!(head.contains("content-length: 52"), "{head}");
    assert_eq!(body, "<!DOCTYPE html><html><body><h1>v1</h1></body></html>");

    // A shutdown ends the stream (a clean end of its body), holding no drain up.
    support::sigterm(server.pid());
    assert!(events.wait().success(), "curl saw the stream cut off");
    let (status, log) = server.wait_exit(Duration::from_secs(60));
    assert!(status.success(), "{log}");
    assert!(!log.contains("drain deadline passed"), "{log}");
}

/// An HTTP/1.1 `GET path` in flight: the thread returns what the server answered
/// once it answered or closed the connection.
fn request_in_flight(server: &Server, path: &str) -> std::thread::JoinHandle<String> {
    let mut stream = TcpStream::connect(server.authority()).unwrap();
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n"
    )
    .unwrap();
    std::thread::spawn(move || {
        let mut answer = String::new();
        let _ = stream.read_to_string(&mut answer);
        answer
    })
}

/// Issue 17 item 5: the first Ctrl-C lets a request in flight finish; a second one
/// exits at once (130), saying how many requests it cut off. `wedge serve`.
#[test]
fn a_second_ctrl_c_exits_at_once_and_the_first_alone_drains() {
    // The drain would wait far longer than the test's bound on the exit.
    let args = ["--drain-timeout", "10m", "--wall-time", "15m", "--no-tls"];

    let server = Server::start(&example("faults"), &args);
    let slow = request_in_flight(&server, "/sleep?ms=3000");
    server.wait_for_log("sleeping 3000 ms");
    sigint(server.pid());
    server.wait_for_log("shutting down");
    let answer = slow.join().unwrap();
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    assert!(answer.ends_with("slept 3000\n"), "{answer}");
    let (status, log) = server.wait_exit(Duration::from_secs(60));
    assert_eq!(status.code(), Some(0), "{log}");

    let server = Server::start(&example("faults"), &args);
    let stuck = request_in_flight(&server, "/sleep?ms=600000");
    server.wait_for_log("sleeping 600000 ms");
    sigint(server.pid());
    server.wait_for_log("shutting down");
    sigint(server.pid());
    // Bounded far below the drain: an exit within it is an exit at once.
    let (status, log) = server.wait_exit(Duration::from_secs(60));
    assert_eq!(status.code(), Some(130), "{log}");
    assert!(
        log.contains("Ctrl-C again: exiting at once, cutting off 1 request in flight"),
        "{log}"
    );
    let answer = stuck.join().unwrap();
    assert_eq!(answer, "", "the request was cut off");
}

/// The same in `wedge dev`, by SIGTERM, a request waiting for its body in flight.
#[test]
fn a_second_sigterm_ends_wedge_dev_at_once() {
    let dir = new_crate(&temp_dir("dev-sigterm"), "devsigterm");
    write_lib(&dir, &body_counter("v1"));
    let server = Server::dev(&dir, &["--drain-timeout", "10m"]);
    let mut stream = TcpStream::connect(server.authority()).unwrap();
    write!(
        stream,
        "POST / HTTP/1.1\r\nhost: x\r\ntransfer-encoding: chunked\r\n\r\n2\r\nhi\r\n"
    )
    .unwrap();
    server.wait_for_log("v1 started");
    sigterm(server.pid());
    server.wait_for_log("shutting down");
    sigterm(server.pid());
    let (status, log) = server.wait_exit(Duration::from_secs(60));
    assert_eq!(status.code(), Some(130), "{log}");
    assert!(
        log.contains("SIGTERM again: exiting at once, cutting off 1 request in flight"),
        "{log}"
    );
}
