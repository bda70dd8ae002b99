use std::time::Duration;

use super::parse_text::{Samples, parse};
use super::*;

const MS: Duration = Duration::from_millis(1);

#[test]
fn requests_of_two_apps_are_counted_apart_by_protocol_and_status_class() {
    let metrics = Metrics::new();
    let a = metrics.app("a");
    let b = metrics.app("b \"quoted\"");
    for _ in 0..3 {
        a.request_done(Protocol::H1, 200, 10, MS);
    }
    a.request_done(Protocol::H2, 404, 5, 2 * MS);
    a.request_done(Protocol::H2, 0, 0, 3 * MS);
    for _ in 0..4 {
        b.request_done(Protocol::H3, 503, 100, Duration::from_secs(2));
    }
    // A second version of `a` records into the same series.
    metrics.app("a").request_done(Protocol::H1, 204, 0, MS);

    let samples = parse(&metrics.encode());
    let requests = |app, protocol, status| {
        samples.get(
            "wedge_requests_total",
            &[("app", app), ("protocol", protocol), ("status", status)],
        )
    };
    assert_eq!(requests("a", "h1", "2xx"), 4.0);
    assert_eq!(requests("a", "h2", "4xx"), 1.0);
    assert_eq!(requests("a", "h2", "none"), 1.0);
    assert_eq!(requests("a", "h3", "2xx"), 0.0);
    assert_eq!(requests("b \"quoted\"", "h3", "5xx"), 4.0);
    assert_eq!(requests("b \"quoted\"", "h1", "2xx"), 0.0);

    let bytes = |app| samples.get("wedge_response_body_bytes_total", &[("app", app)]);
    assert_eq!(bytes("a"), 35.0);
    assert_eq!(bytes("b \"quoted\""), 400.0);

    let duration = "wedge_request_duration_seconds";
    assert_eq!(
        samples.get(&format!("{duration}_count"), &[("app", "a")]),
        6.0
    );
    let bucket = |app, le| samples.get(&format!("{duration}_bucket"), &[("app", app), ("le", le)]);
    assert_eq!(bucket("a", "0.001"), 4.0);
    assert_eq!(bucket("a", "0.005"), 6.0);
    assert_eq!(bucket("b \"quoted\"", "1"), 0.0);
    assert_eq!(bucket("b \"quoted\"", "2.5"), 4.0);
    assert_eq!(bucket("b \"quoted\"", "+Inf"), 4.0);
    let sum = samples.get(&format!("{duration}_sum"), &[("app", "b \"quoted\"")]);
    assert!((sum - 8.0).abs() < 1e-9, "{sum}");
}

#[test]
fn faults_refusals_instances_and_body_bytes_are_counted_per_app() {
    let metrics = Metrics::new();
    let a = metrics.app("a");
    let b = metrics.app("b");
    a.fault(FaultKind::Trap);
    a.fault(FaultKind::Trap);
    a.fault(FaultKind::WallTimeout);
    b.fault(FaultKind::CpuTimeout);
    b.fault(FaultKind::Memory);
    b.fault(FaultKind::NoResponse);
    b.refused();
    a.request_body_read(7);
    let running = [a.instance(), a.instance(), b.instance()];

    let samples = parse(&metrics.encode());
    let faults =
        |app, kind| samples.get("wedge_guest_faults_total", &[("app", app), ("kind", kind)]);
    assert_eq!(faults("a", "trap"), 2.0);
    assert_eq!(faults("a", "wall_timeout"), 1.0);
    assert_eq!(faults("a", "cpu_timeout"), 0.0);
    assert_eq!(faults("b", "cpu_timeout"), 1.0);
    assert_eq!(faults("b", "memory"), 1.0);
    assert_eq!(faults("b", "no_response"), 1.0);
    assert_eq!(faults("b", "trap"), 0.0);
    let refused = |app| samples.get("wedge_admission_refused_total", &[("app", app)]);
    assert_eq!((refused("a"), refused("b")), (0.0, 1.0));
    let read = |app| samples.get("wedge_request_body_bytes_total", &[("app", app)]);
    assert_eq!((read("a"), read("b")), (7.0, 0.0));
    let instances =
        |samples: &Samples, app| samples.get("wedge_instances_running", &[("app", app)]);
    assert_eq!(
        (instances(&samples, "a"), instances(&samples, "b")),
        (2.0, 1.0)
    );

    drop(running);
    let samples = parse(&metrics.encode());
    assert_eq!(
        (instances(&samples, "a"), instances(&samples, "b")),
        (0.0, 0.0)
    );
    // Created counts every instance ever made, gone or not.
    let created = |app| samples.get("wedge_instances_created_total", &[("app", app)]);
    assert_eq!((created("a"), created("b")), (2.0, 1.0));
}

#[test]
fn connections_and_streams_are_counted_per_protocol_while_open() {
    let metrics = Metrics::new();
    let h2 = [
        metrics.connection(Protocol::H2),
        metrics.connection(Protocol::H2),
    ];
    let h3 = metrics.connection(Protocol::H3);
    let streams = [
        metrics.stream(Protocol::H2),
        metrics.stream(Protocol::H2),
        metrics.stream(Protocol::H2),
    ];
    metrics.unrouted(Protocol::H1);
    drop(h3);

    let samples = parse(&metrics.encode());
    let get = |samples: &Samples, name, protocol| samples.get(name, &[("protocol", protocol)]);
    assert_eq!(get(&samples, "wedge_connections_total", "h2"), 2.0);
    assert_eq!(get(&samples, "wedge_connections_total", "h3"), 1.0);
    assert_eq!(get(&samples, "wedge_connections_open", "h2"), 2.0);
    assert_eq!(get(&samples, "wedge_connections_open", "h3"), 0.0);
    assert_eq!(get(&samples, "wedge_streams_open", "h2"), 3.0);
    assert_eq!(get(&samples, "wedge_streams_open", "h1"), 0.0);
    assert_eq!(get(&samples, "wedge_unrouted_requests_total", "h1"), 1.0);

    drop((h2, streams));
    let samples = parse(&metrics.encode());
    assert_eq!(get(&samples, "wedge_connections_open", "h2"), 0.0);
    assert_eq!(get(&samples, "wedge_streams_open", "h2"), 0.0);
}

#[test]
fn the_parser_rejects_what_is_not_prometheus_text() {
    for bad in [
        "wedge_x 1\n",                                  // no # TYPE
        "# TYPE wedge_x counter\nwedge_y 1\n",          // outside its family
        "# TYPE wedge_x gauge\nwedge_x{a=\"1} 1\n",     // unterminated value
        "# TYPE wedge_x gauge\nwedge_x one\n",          // not a number
        "# TYPE wedge_x gauge\nwedge_x 1\nwedge_x 2\n", // given twice
    ] {
        assert!(std::panic::catch_unwind(|| parse(bad)).is_err(), "{bad:?}");
    }
}

#[test]
fn each_worker_counts_its_own_connections_and_requests() {
    let metrics = Metrics::new();
    let (zero, one) = (metrics.worker(0), metrics.worker(1));
    let open = zero.accepted();
    drop(one.accepted());
    drop(one.accepted());
    one.request();
    // A worker's handles taken again (another listener's frontend) share its series.
    metrics.worker(1).request();

    let samples = parse(&metrics.encode());
    let get = |name, worker| samples.get(name, &[("worker", worker)]);
    assert_eq!(get("wedge_worker_connections_total", "0"), 1.0);
    assert_eq!(get("wedge_worker_connections_total", "1"), 2.0);
    assert_eq!(get("wedge_worker_connections_open", "0"), 1.0);
    assert_eq!(get("wedge_worker_connections_open", "1"), 0.0);
    assert_eq!(get("wedge_worker_requests_total", "0"), 0.0);
    assert_eq!(get("wedge_worker_requests_total", "1"), 2.0);
    drop(open);
    let samples = parse(&metrics.encode());
    assert_eq!(
        samples.get("wedge_worker_connections_open", &[("worker", "0")]),
        0.0
    );
}
