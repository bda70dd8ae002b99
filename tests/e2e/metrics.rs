//! Metrics end to end: the real binary, requests over HTTP/1.1, HTTP/2 and HTTP/3,
//! then `GET /metrics` on the admin API, read with the strict parser of the
//! Prometheus format (every hook's count in process: runtime/tests/in_process).

use support::admin::parse_text::{Samples, parse};
use support::h3::{H3Server, exchange};
use support::{Server, curl, curl_write_out as answer, example, poll_until, temp_dir};

const TOKEN: &str = "metrics-test-token-0123456789";

/// `GET /metrics` on the admin API of `admin_url` with the token: the samples.
fn scrape(admin_url: &str) -> Samples {
    let auth = format!("Authorization: Bearer {TOKEN}");
    let out = curl(&["--fail", "--header", &auth, &format!("{admin_url}/metrics")]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    parse(&String::from_utf8(out.stdout).unwrap())
}

/// The real binary with a wedge.toml of two apps and the admin API; requests over
/// HTTP/1.1 (cleartext), HTTP/2 (TLS, curl) and HTTP/3 (the h3 crate), then the
/// admin API's `/metrics` counts each.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_admin_api_serves_what_each_protocol_sent() {
    let dir = temp_dir("metrics");
    std::fs::write(dir.join("token"), format!("{TOKEN}\n")).unwrap();
    let config = format!(
        "listen = \"127.0.0.1:0\"\ntls_listen = \"127.0.0.1:0\"\n\
         admin = \"127.0.0.1:0\"\nadmin_token_file = \"token\"\n\n\
         [[app]]\nname = \"hello\"\ncomponent = \"{}\"\nroutes = [\"/hello\"]\n\n\
         [[app]]\nname = \"echo\"\ncomponent = \"{}\"\nroutes = [\"/echo\"]\n",
        example("hello").display(),
        example("echo").display()
    );
    std::fs::write(dir.join("wedge.toml"), config).unwrap();
    let data_dir = temp_dir("data");
    let data = data_dir.display().to_string();
    let server = Server::start_config(&dir.join("wedge.toml"), &["--data-dir", &data]);
    let admin_url = server.admin_url();
    let h3 = H3Server { server, data_dir };
    let plain = h3.server.url.clone();
    let tls = h3.server.tls_url.clone().unwrap();

    let h1_and_h2 = tokio::task::spawn_blocking(move || {
        let mut statuses = Vec::new();
        for _ in 0..3 {
            statuses.push(answer(&["%{http_code}", &format!("{plain}/hello")]));
        }
        for _ in 0..2 {
            let url = format!("{tls}/echo");
            let args = ["%{http_version} %{http_code}", "-k", "--http2"];
            statuses.push(answer(
                &[&args[..], &["--data-binary", "0123456789", &url]].concat(),
            ));
        }
        statuses
    });
    assert_eq!(
        h1_and_h2.await.unwrap(),
        ["200", "200", "200", "2 200", "2 200"]
    );
    let mut requests = h3.connect().await;
    for _ in 0..4 {
        let (status, _) = exchange(&mut requests, "GET", "/hello", None).await;
        assert_eq!(status, 200);
    }

    // A request is counted when its response body is done, which the client may
    // see first: scrape until the last one is in.
    let samples = poll_until("the h3 requests counted", || {
        let samples = scrape(&admin_url);
        let h3 = [("app", "hello"), ("protocol", "h3"), ("status", "2xx")];
        (samples.get("wedge_requests_total", &h3) == 4.0).then_some(samples)
    });
    let requests = |app, protocol| {
        samples.get(
            "wedge_requests_total",
            &[("app", app), ("protocol", protocol), ("status", "2xx")],
        )
    };
    assert_eq!(requests("hello", "h1"), 3.0);
    assert_eq!(requests("echo", "h2"), 2.0);
    assert_eq!(requests("echo", "h1") + requests("hello", "h2"), 0.0);
    let echo = [("app", "echo")];
    assert_eq!(samples.get("wedge_request_body_bytes_total", &echo), 20.0);
    assert_eq!(samples.get("wedge_response_body_bytes_total", &echo), 20.0);
    assert_eq!(
        samples.get("wedge_request_duration_seconds_count", &[("app", "hello")]),
        7.0
    );
    let protocol = |name, protocol| samples.get(name, &[("protocol", protocol)]);
    assert_eq!(protocol("wedge_connections_total", "h1"), 3.0);
    assert_eq!(protocol("wedge_connections_total", "h2"), 2.0);
    assert_eq!(protocol("wedge_connections_total", "h3"), 1.0);
    assert_eq!(protocol("wedge_connections_open", "h3"), 1.0);
}
