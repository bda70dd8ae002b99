//! Tiered compilation (`--compile tiered`): a component the precompiled
//! cache does not hold serves at once on Winch's code; its first request queues the
//! Cranelift compile, which replaces it for new requests while a request in flight
//! finishes on the Winch code; the Cranelift code is cached, and a start that finds
//! it there never runs Winch.

use std::path::{Path, PathBuf};

use support::{Parked, Server, curl, example, temp_dir, wedge, wedge_logging};

const BASELINE: &str = "with the baseline compiler (Winch)";
const SWITCHED: &str = "now runs optimized code";
const TIERED: &[&str] = &["--no-tls", "--compile", "tiered"];

/// The body of a POST of `body` to the echo example.
fn echo(server: &Server, body: &str) -> String {
    let out = curl(&["--fail", "--data-binary", body, &format!("{}/", server.url)]);
    assert!(out.status.success(), "{out:?}");
    String::from_utf8(out.stdout).unwrap()
}

fn cached_artifacts(data: &Path) -> usize {
    std::fs::read_dir(data.join("precompiled"))
        .map(|dir| dir.count())
        .unwrap_or(0)
}

#[test]
fn winch_code_serves_first_and_cranelift_code_takes_over_while_a_request_in_flight_finishes() {
    let data = temp_dir("tiered-data");
    let server = Server::start_in(&example("echo"), TIERED, &data);
    // Nothing is optimized before the app's first request.
    let log = server.wait_for_log(BASELINE);
    assert!(!log.contains(SWITCHED), "{log}");
    assert_eq!(cached_artifacts(&data), 0, "Winch's code is not cached");

    // The first request holds a Winch instance (its response has started) across
    // the switch, which it queued.
    let parked = Parked::open(&server, "/");
    server.wait_for_log(SWITCHED);
    let rest = parked.finish_with("world");
    assert!(rest.contains("5\r\nworld\r\n"), "{rest:?}");
    assert!(rest.ends_with("0\r\n\r\n"), "the response ended: {rest:?}");

    assert_eq!(echo(&server, "after"), "after");
    assert_eq!(cached_artifacts(&data), 1, "Cranelift's code is cached");
    let log = server.log();
    assert_eq!(log.matches(SWITCHED).count(), 1, "{log}");
}

#[test]
fn a_start_that_finds_the_cranelift_code_in_the_cache_does_not_run_winch() {
    let data = temp_dir("tiered-warm");
    {
        let server = Server::start_in(&example("echo"), TIERED, &data);
        assert_eq!(echo(&server, "first"), "first");
        server.wait_for_log(SWITCHED);
    }
    let server = Server::start_in(&example("echo"), TIERED, &data);
    let log = server.wait_for_log("from the precompiled cache");
    assert!(!log.contains(BASELINE), "{log}");
    assert_eq!(echo(&server, "warm"), "warm");
}

#[test]
fn by_default_cranelift_compiles_before_serving() {
    let data = temp_dir("optimized-data");
    let server = Server::start_in(&example("echo"), &["--no-tls"], &data);
    let log = server.wait_for_log("(stored in the precompiled cache)");
    assert!(!log.contains(BASELINE), "{log}");
    assert_eq!(echo(&server, "hi"), "hi");
    assert_eq!(cached_artifacts(&data), 1);
}

#[test]
fn an_unknown_compile_mode_is_refused() {
    let out = wedge(
        &["serve", "x.wasm", "--compile", "fast"],
        &temp_dir("compile-mode"),
    );
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("`fast` is no compile mode: `tiered` or `optimized`"),
        "{stderr}"
    );
}

/// A wedge.toml in a fresh directory: a cleartext listener, tiered compilation, and
/// an app of the echo example for each `(name, route)`.
fn tiered_config(apps: &[(&str, &str)]) -> PathBuf {
    let path = temp_dir("tiered-config").join("wedge.toml");
    std::fs::write(&path, tiered_config_text(apps)).unwrap();
    path
}

fn tiered_config_text(apps: &[(&str, &str)]) -> String {
    let echo = example("echo").display().to_string();
    let mut text = String::from("listen = \"127.0.0.1:0\"\ncompile = \"tiered\"\n");
    for (name, route) in apps {
        text.push_str(&format!(
            "\n[[app]]\nname = \"{name}\"\ncomponent = \"{echo}\"\nroutes = [\"{route}\"]\n"
        ));
    }
    text
}

/// A removed app whose first request is still in flight is not compiled optimized
/// nor switched: its Cranelift compile was queued by that request, but the tenant it
/// would go into no longer serves.
#[test]
fn a_removed_app_with_a_request_in_flight_is_not_compiled_optimized() {
    let path = tiered_config(&[("gone", "/gone"), ("kept", "/kept")]);
    let server = Server::start_config(&path, &[]);
    // Its first request queues the compile and keeps the tenant alive.
    let parked = Parked::open(&server, "/gone");
    std::fs::write(&path, tiered_config_text(&[("kept", "/kept")])).unwrap();
    server.wait_for_log("config reloaded");
    // The one background compiler takes jobs in order: once `kept`'s, queued after
    // `gone`'s, is done, so is `gone`'s.
    assert_eq!(
        curl(&[
            "--fail",
            "--data-binary",
            "k",
            &format!("{}/kept", server.url)
        ])
        .stdout,
        b"k"
    );
    let log = server.wait_for_log("app `kept` now runs optimized code");
    // Switched before the reload (a compile faster than the reload) it may have been;
    // after it, never.
    let (_, after_reload) = log.split_once("config reloaded").unwrap();
    assert!(!after_reload.contains("app `gone` now runs"), "{log}");
    assert!(parked.finish_with("!").ends_with("0\r\n\r\n"));
}

/// The debug line each compile of a component at load logs.
const COMPILED: &str = "compiled by ";

/// A component that compiles but cannot be served (here: it exports no handler; an
/// import wedge does not provide fails the same step) is compiled once, in either
/// mode, and its error reported: no other engine or compiler would do better.
#[test]
fn a_component_that_compiles_but_cannot_be_served_is_compiled_once() {
    let dir = temp_dir("unservable");
    let empty = dir.join("empty.wasm");
    // The smallest valid component: a header and no sections.
    std::fs::write(&empty, b"\0asm\x0d\0\x01\0").unwrap();
    let empty = empty.display().to_string();
    for mode in ["tiered", "optimized"] {
        let args = ["serve", &empty, "--no-tls", "--compile", mode];
        let out = wedge_logging(&args, &dir, "info,wedge=debug");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{mode}: {stderr}");
        assert!(stderr.contains("exports neither"), "{mode}: {stderr}");
        assert_eq!(stderr.matches(COMPILED).count(), 1, "{mode}: {stderr}");
    }
}

/// A Spin SDK handler imports Spin's async key-value API, which only the engine with
/// component-model concurrency links: it is compiled for that engine alone.
#[test]
fn a_component_importing_spin_key_value_is_compiled_once_for_the_engine_with_concurrency() {
    let path = temp_dir("spin-once").join("wedge.toml");
    let spin = example("spin_kv").display().to_string();
    let text = format!(
        "listen = \"127.0.0.1:0\"\n\n[[app]]\nname = \"spin\"\ncomponent = \"{spin}\"\nroutes = [\"/\"]\n"
    );
    std::fs::write(&path, text).unwrap();
    let server = Server::start_config_logging(&path, &[], "info,wedge=debug");
    let log = server.wait_for_log("compiled app `spin`");
    assert_eq!(log.matches(COMPILED).count(), 1, "{log}");
    assert!(
        log.contains("compiled by Cranelift for the engine with component-model concurrency"),
        "{log}"
    );
}

/// The engines are built for one compile mode: a reload that changes `compile`
/// says it takes effect after a restart.
#[test]
fn a_changed_compile_mode_on_reload_is_reported_as_needing_a_restart() {
    let path = tiered_config(&[("app", "/")]);
    let server = Server::start_config(&path, &[]);
    let text = tiered_config_text(&[("app", "/")]);
    std::fs::write(&path, text.replace("compile = \"tiered\"\n", "")).unwrap();
    let log = server.wait_for_log("config reloaded");
    assert!(
        log.contains("compile mode changed to `optimized` in")
            && log.contains(
                "it takes effect after a restart (until then components are compiled `tiered`)"
            ),
        "{log}"
    );
}
