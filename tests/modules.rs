//! Core wasm modules: a `wasm32-wasip1` module that embeds the wasi:http world
//! (`examples/wasip1-handler`, built with wit-bindgen) is made a component when it is
//! loaded, then served, limited and cached like any component, over HTTP/1.1, HTTP/2
//! and HTTP/3 (tests/cli.rs: a module that embeds no world is refused).

mod admin_support;
mod h3_support;
mod proto_support;
mod support;

use std::path::PathBuf;

use admin_support::Admin;
use proto_support::{Client, Proto};
use support::{Server, example, pattern, poll_until, repo, temp_dir};

const HELLO: &[u8] = b"Hello from a wasm32-wasip1 module!\n";

/// What the log says of a module made a component.
const COMPONENTIZED: &str =
    "(a wasm module, componentized with the WASI preview 1 reactor adapter)";

fn module() -> PathBuf {
    example("wasip1_handler")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wasip1_module_is_componentized_once_and_served_over_every_protocol() {
    let data_dir = temp_dir("modules");
    let server = Server::start_in(&module(), &[], &data_dir);
    server.wait_for_log(&format!("compiled app `wasip1_handler` {COMPONENTIZED} in"));
    let client = Client {
        server: &server,
        data_dir: &data_dir,
    };
    for proto in Proto::ALL {
        let answer = client.get(proto, "/").await;
        assert_eq!(
            (answer.status, answer.complete, answer.body.as_slice()),
            (200, true, HELLO),
            "{proto:?}"
        );
    }
    // Its standard library's preview 1 `fd_write`, through the adapter, to the log.
    server.wait_for_log("[wasip1_handler] wasip1-handler: hello on stdout");
    drop(server);

    // The precompiled cache is keyed by the module's own bytes: a restart neither
    // componentizes nor compiles it again.
    let again = Server::start_in(&module(), &["--no-tls"], &data_dir);
    let log = again.wait_for_log(&format!(
        "loaded app `wasip1_handler` {COMPONENTIZED} from the precompiled cache"
    ));
    assert!(!log.contains("compiled app"), "{log}");
    let client = Client {
        server: &again,
        data_dir: &data_dir,
    };
    assert_eq!(client.get(Proto::H1, "/").await.body, HELLO);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bodies_stream_both_ways_through_a_componentized_module_over_every_protocol() {
    let data_dir = temp_dir("modules");
    let server = Server::start_in(&module(), &[], &data_dir);
    let client = Client {
        server: &server,
        data_dir: &data_dir,
    };
    let pieces: Vec<Vec<u8>> = (0..4).map(|i| pattern(10_000, i)).collect();
    let pieces: Vec<&[u8]> = pieces.iter().map(Vec::as_slice).collect();
    let big = pattern(4 << 20, 7);
    for proto in Proto::ALL {
        // Each piece comes back before the next is sent.
        let (status, echoed) = client.ping_pong(proto, "/echo", &pieces).await;
        assert_eq!(status, 200, "{proto:?}");
        assert!(echoed == pieces.concat(), "{proto:?}: the echo differs");
        let answer = client.send(proto, "POST", "/echo", Some(&big)).await;
        assert_eq!((answer.status, answer.complete), (200, true), "{proto:?}");
        assert!(answer.body == big, "{proto:?}: 4 MiB echoed differ");
    }
}

/// Each fault of a module's guest, with its status, its one log line and its count.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_componentized_modules_faults_are_contained_over_every_protocol() {
    let app = format!(
        "[[app]]\nname = \"module\"\ncomponent = \"{}\"\nroutes = [\"/\"]\n\n\
         [app.limits]\nmemory = \"32MiB\"\ncpu_time = \"200ms\"\n",
        module().display()
    );
    let admin = tokio::task::spawn_blocking(move || Admin::start(&app, &[], "info"))
        .await
        .unwrap();
    let client = Client {
        server: &admin.server,
        data_dir: &admin.data_dir,
    };
    let cases = [
        (
            "/trap",
            500,
            "guest trapped: wasm trap: wasm `unreachable`",
            "trap",
        ),
        (
            "/cpu-loop",
            504,
            "CPU time limit of 200ms exceeded",
            "cpu_timeout",
        ),
        ("/memory", 500, "memory limit of 32 MiB exceeded", "memory"),
    ];
    let mut lines = 0;
    for (path, status, cause, kind) in cases {
        for proto in Proto::ALL {
            let what = format!("{path} over {proto:?}");
            let counted = [("app", "module"), ("kind", kind)];
            let before = admin.scrape().get("wedge_guest_faults_total", &counted);
            let answer = client.get(proto, path).await;
            assert_eq!((answer.status, answer.complete), (status, true), "{what}");
            let samples = admin.scrape_until(&format!("{what} counted, its instance gone"), |s| {
                s.get("wedge_guest_faults_total", &counted) > before
                    && s.get("wedge_instances_running", &[("app", "module")]) == 0.0
            });
            assert_eq!(
                samples.get("wedge_guest_faults_total", &counted),
                before + 1.0
            );
            lines += 1;
            let faults = poll_until(&format!("{what}'s log line"), || {
                let faults = fault_lines(&admin.server);
                (faults.len() >= lines).then_some(faults)
            });
            assert_eq!(faults.len(), lines, "{what}: {faults:#?}");
            assert!(faults[lines - 1].contains(cause), "{what}: {faults:#?}");
            let healthy = client.get(proto, "/").await;
            assert_eq!(healthy.body, HELLO, "after {what}");
        }
    }
}

/// The lines wedge wrote about the `module` app's faults.
fn fault_lines(server: &Server) -> Vec<String> {
    let log = server.log();
    let lines = log
        .lines()
        .filter(|l| l.contains("WARN") && l.contains("app `module`:"));
    lines.map(String::from).collect()
}

/// `wedge serve DIR` and `wedge dev DIR` build a crate whose
/// `[package.metadata.wedge]` says `target = "wasm32-wasip1"` for that target, and
/// serve the module it made.
#[test]
fn a_crate_built_for_wasip1_is_served_by_serve_and_dev() {
    let dir = repo().join("examples/wasip1-handler");
    for server in [
        Server::start(&dir, &["--no-tls"]),
        Server::dev(&dir, &["--no-tls"]),
    ] {
        let log = server.wait_for_log("for wasm32-wasip1");
        assert!(log.contains(COMPONENTIZED), "{log}");
        let url = format!("{}/", server.url);
        let (_, answer) = proto_support::curl_send(&["--http1.1"], "GET", &url, None);
        assert_eq!((answer.status, answer.body.as_slice()), (200, HELLO));
    }
}
