//! Core wasm modules: a `wasm32-wasip1` module that embeds the wasi:http world
//! (`examples/wasip1-handler`, built with wit-bindgen) is made a component when it is
//! loaded, then served, limited and cached like any component, over HTTP/1.1, HTTP/2
//! and HTTP/3 (tests/e2e/cli.rs: a module that embeds no world is refused).

use std::path::PathBuf;

use support::faults::{EVERY_GUEST, LIMITS, Matrix};
use support::protocols::{Client, Proto};
use support::{Server, example, repo, temp_dir};

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
    client.echo_streams_both_ways("/echo").await;
}

/// Each fault of a module's guest, with its status, its one log line and its count
/// (`support::faults`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_componentized_modules_faults_are_contained_over_every_protocol() {
    let start = || Matrix::start("module", &module(), "", LIMITS, &[]);
    let matrix = tokio::task::spawn_blocking(start).await.unwrap();
    matrix.run(&EVERY_GUEST, ("/", HELLO)).await;
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
        // The build's line comes first; `wedge dev` may log it before the module
        // is componentized and loaded, so wait for the later line.
        let log = server.wait_for_log(COMPONENTIZED);
        assert!(log.contains("for wasm32-wasip1"), "{log}");
        let url = format!("{}/", server.url);
        let (_, answer) = support::protocols::curl_send(&["--http1.1"], "GET", &url, None);
        assert_eq!((answer.status, answer.body.as_slice()), (200, HELLO));
    }
}
