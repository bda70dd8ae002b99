//! The TLS listener: the development certificate (created once, reused,
//! trusted by curl --cacert), operator certificates, and --no-tls.

use support::{Server, curl, example, temp_dir, wedge};

fn https_get(server: &Server, extra: &[&str]) -> std::process::Output {
    let url = server.tls_url.as_ref().expect("a TLS listener");
    // The certificate names localhost; resolve it to the listener's address.
    let port = url.rsplit(':').next().unwrap();
    let resolve = format!("localhost:{port}:127.0.0.1");
    let mut args = vec!["--fail", "--resolve", &resolve];
    args.extend_from_slice(extra);
    let target = format!("https://localhost:{port}/");
    args.push(&target);
    curl(&args)
}

#[test]
fn the_development_certificate_is_created_trusted_and_reused() {
    let data = temp_dir("tls");
    let first = Server::start_in(&example("hello"), &[], &data);
    first.wait_for_log("created a self-signed development certificate");
    let cert = data.join("tls/dev-cert.pem");
    let cacert = cert.display().to_string();
    let out = https_get(&first, &["--cacert", &cacert]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(out.stdout, b"Hello, world!\n");
    let pem = std::fs::read(&cert).unwrap();
    drop(first);

    let second = Server::start_in(&example("hello"), &[], &data);
    second.wait_for_log("using a self-signed development certificate");
    assert_eq!(
        std::fs::read(&cert).unwrap(),
        pem,
        "the certificate changed on restart"
    );
    let out = https_get(&second, &["--cacert", &cacert]);
    assert_eq!(out.stdout, b"Hello, world!\n");
}

#[test]
fn http11_is_served_over_tls_with_alpn() {
    let server = Server::start(&example("hello"), &[]);
    let out = https_get(&server, &["-k", "-v", "--http1.1"]);
    assert_eq!(out.stdout, b"Hello, world!\n");
    let trace = String::from_utf8_lossy(&out.stderr);
    assert!(trace.contains("ALPN: server accepted http/1.1"), "{trace}");
}

#[test]
fn an_operator_certificate_is_used() {
    let dir = temp_dir("operator-cert");
    let generated = rcgen::generate_simple_self_signed(vec!["localhost".to_string()]).unwrap();
    let cert = dir.join("cert.pem");
    let key = dir.join("key.pem");
    std::fs::write(&cert, generated.cert.pem()).unwrap();
    std::fs::write(&key, generated.signing_key.serialize_pem()).unwrap();
    let (cert, key) = (cert.display().to_string(), key.display().to_string());
    let server = Server::start(&example("hello"), &["--tls-cert", &cert, "--tls-key", &key]);
    let out = https_get(&server, &["--cacert", &cert]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(out.stdout, b"Hello, world!\n");
    assert!(!server.log().contains("development certificate"));
}

#[test]
fn no_tls_serves_cleartext_only() {
    let server = Server::start(&example("hello"), &["--no-tls"]);
    assert!(server.tls_url.is_none());
    let out = curl(&["--fail", &format!("{}/", server.url)]);
    assert_eq!(out.stdout, b"Hello, world!\n");
}

#[test]
fn a_bad_certificate_file_is_one_error_line() {
    let dir = temp_dir("bad-cert");
    let cert = dir.join("cert.pem");
    std::fs::write(&cert, "not a certificate\n").unwrap();
    let cert = cert.display().to_string();
    let hello = example("hello").display().to_string();
    let out = wedge(
        &[
            "serve",
            &hello,
            "--listen",
            "127.0.0.1:0",
            "--tls-listen",
            "127.0.0.1:0",
            "--tls-cert",
            &cert,
            "--tls-key",
            &cert,
        ],
        &dir,
    );
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(stderr.contains("holds no certificate"), "{stderr}");
}
