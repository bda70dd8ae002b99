//! Metrics in process, through wedge's own listeners: example components routed by
//! host, HTTP/1.1 from curl and h2c from the `h2` crate, every hook's count read back
//! from the registry with the strict parser of the Prometheus format (the real
//! binary's `GET /metrics`: tests/e2e/metrics.rs).

use std::sync::Arc;
use std::time::{Duration, Instant};

use h2::client::SendRequest;
use wedge::host::admission::{Admission, AdmissionLimits};
use wedge::host::{App, ArtifactCache, Limits};
use wedge::metrics::Metrics;
use wedge::net::Listeners;
use wedge::net::h2::H2Config;
use wedge::serve::{AccessLog, Frontend};
use wedge::tenancy::{Directory, Route, Serving, Site, Tenant};

use support::admin::parse_text::{Samples, parse};
use support::engine::engine;
use support::h2::{client_with, read_body};
use support::{curl_write_out as answer, example};

/// `example` served as app `name` on host `name.test`, its series in `metrics`.
fn tenant(
    name: &str,
    example_name: &str,
    metrics: &Metrics,
    admission: AdmissionLimits,
) -> Arc<Tenant> {
    let wasm = std::fs::read(example(example_name)).unwrap();
    let cache = ArtifactCache::new(std::env::temp_dir().join("wedge-metrics-test-cache"));
    let app = App::load(
        engine(),
        &cache,
        name,
        &wasm,
        Default::default(),
        Limits::default(),
    )
    .unwrap()
    .with_admission(Arc::new(Admission::new(admission)))
    .with_metrics(metrics.app(name));
    Arc::new(Tenant::new(name, Serving::App(Arc::new(app))))
}

fn route(name: &str) -> Vec<Route> {
    vec![format!("{name}.test/").parse().unwrap()]
}

/// Polls the registry until `ready` holds for its samples (bounded).
async fn scrape_until(metrics: &Metrics, what: &str, ready: impl Fn(&Samples) -> bool) -> Samples {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let samples = parse(&metrics.encode());
        if ready(&samples) {
            return samples;
        }
        assert!(Instant::now() < deadline, "never saw {what}: {samples:?}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// One h2 request to `host` and `path`: its status and body.
async fn h2_get(client: &mut SendRequest<bytes::Bytes>, host: &str, path: &str) -> (u16, Vec<u8>) {
    let request = http::Request::get(format!("http://{host}{path}"))
        .body(())
        .unwrap();
    let (response, _) = client.send_request(request, true).unwrap();
    let response = response.await.unwrap();
    let status = response.status().as_u16();
    (status, read_body(response.into_body()).await)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_faults_refusals_and_connections_are_counted_per_app_and_protocol() {
    let metrics = Arc::new(Metrics::new());
    let full = AdmissionLimits {
        max_concurrent: 0,
        queue: 0,
        queue_timeout: Duration::from_secs(1),
        ..AdmissionLimits::default()
    };
    let site = Site::new(
        Directory::new(vec![
            (
                tenant("echo", "echo", &metrics, AdmissionLimits::default()),
                route("echo"),
            ),
            (
                tenant("faults", "faults", &metrics, AdmissionLimits::default()),
                route("faults"),
            ),
            (tenant("busy", "hello", &metrics, full), route("busy")),
        ])
        .unwrap(),
    );
    let listeners = Listeners::bind(Some("127.0.0.1:0".parse().unwrap()), None, false).unwrap();
    let addr = listeners.plain_addr().unwrap();
    let frontend = Frontend::new(Arc::new(site), AccessLog::Off).with_metrics(metrics.clone());
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(listeners.serve(
        frontend,
        Arc::new(H2Config::default()),
        None,
        None,
        async {
            let _ = stopped.await;
        },
        Duration::from_secs(5),
    ));

    // HTTP/1.1: three echoes of 1000 bytes, a host no app serves, a full app.
    let url = format!("http://{addr}/");
    let h1 = tokio::task::spawn_blocking(move || {
        let payload = "x".repeat(1000);
        let mut answers = Vec::new();
        for host in ["echo", "echo", "echo", "nobody", "busy"] {
            let host = format!("Host: {host}.test");
            answers.push(answer(&[
                "%{http_code}",
                "-H",
                &host,
                "--data-binary",
                &payload,
                &url,
            ]));
        }
        answers
    });
    assert_eq!(h1.await.unwrap(), ["200", "200", "200", "404", "503"]);

    // h2c: two echoes with no body, a trap, a handler that never answers.
    let mut client = client_with(addr, h2::client::Builder::new()).await;
    assert_eq!(
        h2_get(&mut client, "echo.test", "/").await,
        (200, Vec::new())
    );
    assert_eq!(h2_get(&mut client, "echo.test", "/").await.0, 200);
    assert_eq!(
        h2_get(&mut client, "faults.test", "/trap-before-head")
            .await
            .0,
        500
    );
    assert_eq!(
        h2_get(&mut client, "faults.test", "/no-response").await.0,
        500
    );

    // A request parked in the guest: an instance runs and a stream is open until the
    // client goes away. (The calls above may still be ending after their answers.)
    scrape_until(&metrics, "the faulted calls ended", |s| {
        s.get("wedge_instances_running", &[("app", "faults")]) == 0.0
    })
    .await;
    let parked = http::Request::get("http://faults.test/sleep?ms=60000")
        .body(())
        .unwrap();
    let (_parked, _) = client.send_request(parked, true).unwrap();
    let samples = scrape_until(&metrics, "the parked request", |s| {
        s.get("wedge_instances_running", &[("app", "faults")]) == 1.0
    })
    .await;
    assert_eq!(
        samples.get("wedge_streams_open", &[("protocol", "h2")]),
        1.0
    );
    assert_eq!(
        samples.get("wedge_connections_open", &[("protocol", "h2")]),
        1.0
    );
    drop((client, _parked));
    // A request is counted when its connection lets go of its response body: the
    // refused one too (its unread upload may keep its connection a little longer).
    let refused = [("app", "busy"), ("protocol", "h1"), ("status", "5xx")];
    let samples = scrape_until(&metrics, "everything closed", |s| {
        s.get("wedge_instances_running", &[("app", "faults")]) == 0.0
            && s.get("wedge_connections_open", &[("protocol", "h2")]) == 0.0
            && s.get("wedge_connections_open", &[("protocol", "h1")]) == 0.0
            && s.get("wedge_requests_total", &refused) == 1.0
    })
    .await;

    let requests = |app, protocol, status| {
        samples.get(
            "wedge_requests_total",
            &[("app", app), ("protocol", protocol), ("status", status)],
        )
    };
    assert_eq!(requests("echo", "h1", "2xx"), 3.0);
    assert_eq!(requests("echo", "h2", "2xx"), 2.0);
    assert_eq!(requests("busy", "h1", "5xx"), 1.0);
    assert_eq!(requests("faults", "h2", "5xx"), 2.0);
    assert_eq!(requests("faults", "h2", "none"), 1.0);
    assert_eq!(requests("faults", "h1", "2xx"), 0.0);
    let echo = [("app", "echo")];
    assert_eq!(samples.get("wedge_request_body_bytes_total", &echo), 3000.0);
    assert_eq!(
        samples.get("wedge_response_body_bytes_total", &echo),
        3000.0
    );
    assert_eq!(
        samples.get("wedge_request_duration_seconds_count", &echo),
        5.0
    );
    let fault = |kind| {
        samples.get(
            "wedge_guest_faults_total",
            &[("app", "faults"), ("kind", kind)],
        )
    };
    assert_eq!(
        (fault("trap"), fault("no_response"), fault("memory")),
        (1.0, 1.0, 0.0)
    );
    assert_eq!(
        samples.get("wedge_admission_refused_total", &[("app", "busy")]),
        1.0
    );
    assert_eq!(samples.get("wedge_admission_refused_total", &echo), 0.0);
    let protocol = |name, protocol| samples.get(name, &[("protocol", protocol)]);
    assert_eq!(protocol("wedge_unrouted_requests_total", "h1"), 1.0);
    assert_eq!(protocol("wedge_connections_total", "h1"), 5.0);
    assert_eq!(protocol("wedge_connections_total", "h2"), 1.0);
    assert_eq!(protocol("wedge_streams_open", "h2"), 0.0);
    assert_eq!(protocol("wedge_streams_open", "h1"), 0.0);

    let _ = stop.send(());
    let _drained = server.await.unwrap().unwrap();
}
