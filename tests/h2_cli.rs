//! h2c against the real `wedge` binary with real clients, beside tests/h2_clients.rs
//! (hello, TLS, h2load): a 10 MiB echo with curl's prior knowledge and the streamed
//! example through nghttp (Debian `nghttp2-client`).

mod support;

use std::io::Write;
use std::process::Command;

use support::{Server, curl, example, pattern, sha256, temp_dir};

fn run(program: &str, args: &[&str]) -> std::process::Output {
    Command::new(program)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("running {program} (apt-get install nghttp2-client): {e}"))
}

#[test]
fn curl_prior_knowledge_echoes_10_mib_byte_identical() {
    let server = Server::start(&example("echo"), &["--no-tls"]);
    let dir = temp_dir("h2-echo");
    let body = pattern(10 * 1024 * 1024, 11);
    let input = dir.join("in.bin");
    let output = dir.join("out.bin");
    std::fs::File::create(&input)
        .unwrap()
        .write_all(&body)
        .unwrap();
    let out = curl(&[
        "--http2-prior-knowledge",
        "--fail",
        "--data-binary",
        &format!("@{}", input.display()),
        "-H",
        "content-type: application/octet-stream",
        "--output",
        &output.display().to_string(),
        &format!("{}/", server.url),
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let echoed = std::fs::read(&output).unwrap();
    assert_eq!(echoed.len(), body.len());
    assert_eq!(sha256(&echoed), sha256(&body));
}

#[test]
fn nghttp_gets_the_stream_example_as_8192_exact_bytes() {
    let server = Server::start(&example("stream"), &["--no-tls"]);
    let out = run("nghttp", &[&format!("{}/", server.url)]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let expected: Vec<u8> = (0..8u8).flat_map(|i| [b'a' + i; 1024]).collect();
    assert_eq!(out.stdout, expected);
}
