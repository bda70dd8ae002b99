//! `wedge dev`: builds a guest crate, serves it, rebuilds on every save and swaps the
//! new version in; a broken build keeps the last good version (or shows its errors).

mod support;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;

use support::{Server, curl, new_crate, poll_until, temp_dir};

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

fn get(url: &str) -> (String, String) {
    let out = curl(&["--write-out", "\n%{http_code}", url]);
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let (body, status) = text.rsplit_once('\n').unwrap_or((&text, ""));
    (status.to_string(), body.to_string())
}

/// Polls until `url` answers `expected` (a reload may be building meanwhile).
fn wait_for_body(url: &str, expected: &str) {
    poll_until(&format!("{url} answering {expected:?}"), || {
        (get(url) == ("200".to_string(), expected.to_string())).then_some(())
    });
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
