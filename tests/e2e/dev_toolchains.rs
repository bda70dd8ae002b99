//! `wedge dev` on projects other toolchains build (issue 17 item 10): a build command
//! and the component it writes (`--build`/`--component`, or `[dev]` in the project's
//! wedge.toml), watched and rebuilt as a guest crate is.
//!
//! The watching and failure rules are tested with a build command of shell tools that
//! copies an example component (fast); the whole loop with a real JS project built by
//! componentize-js from npm. That one needs Node.js 20+ and npm: without them it says
//! so and passes, unless `WEDGE_REQUIRE_NPM=1` (CI), which makes it fail.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use support::dev::{builds_stay, get, head_and_body, wait_for_body, wait_for_builds};
use support::{Server, example, temp_dir};

/// A build command of shell tools: copies the component that `src/component` names.
const COPY: &str = "mkdir -p dist && cp \"$(cat src/component)\" dist/app.wasm";

/// A project whose build (`COPY`) makes the example `name`'s component.
fn copy_project(tag: &str, name: &str) -> PathBuf {
    let dir = temp_dir(tag);
    std::fs::create_dir(dir.join("src")).unwrap();
    choose(&dir, name);
    dir
}

/// Saves `src/component` naming the example `name` (or a path, as given).
fn choose(dir: &Path, name: &str) {
    let path = if name.starts_with('/') {
        PathBuf::from(name)
    } else {
        example(name)
    };
    std::fs::write(dir.join("src/component"), path.to_str().unwrap()).unwrap();
}

/// `hello` answers every path so; `faults` answers this one `slept 1`.
const PATH: &str = "/sleep?ms=1";
const HELLO: &str = "Hello, world!\n";
const SLEPT: &str = "slept 1\n";

#[test]
fn a_build_command_builds_once_per_content_change_and_a_failure_keeps_the_last_version() {
    let dir = copy_project("dev-command", "hello");
    let server = Server::dev(&dir, &["--build", COPY, "--component", "dist/app.wasm"]);
    let log = || server.log();
    let url = format!("{}{PATH}", server.url);
    assert_eq!(get(&url), ("200".into(), HELLO.into()));
    builds_stay(&log, 1, Duration::from_secs(5));

    // Not changes: what builds and package managers write, hidden entries, scratch.
    for written in [
        "dist/other.js",
        "node_modules/left-pad/index.js",
        "packages/ui/node_modules/x/index.js",
        "target/debug/out",
        ".cache/x",
        "src/.component.swp",
    ] {
        let path = dir.join(written);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, "written").unwrap();
    }
    builds_stay(&log, 1, Duration::from_secs(3));

    choose(&dir, "faults");
    wait_for_body(&url, SLEPT);
    let log_text = builds_stay(&log, 2, Duration::from_secs(3));
    assert!(
        log_text.contains("src/component changed: rebuilding"),
        "{log_text}"
    );

    // A failing build: its output on stderr, on the error page, and said for curl;
    // the last version serves on.
    choose(&dir, "/no/such/component.wasm");
    let log_text = server.wait_for_log("still serving the last version that built");
    assert!(log_text.contains("cp: cannot stat"), "{log_text}");
    assert!(log_text.contains("` failed (exit status 1)"), "{log_text}");
    let (head, body) = head_and_body(&url);
    assert!(head.contains("x-wedge-build: failed"), "{head}");
    assert_eq!(body, SLEPT);
    let (_, page) = head_and_body(&format!("{}/_wedge/build", server.url));
    assert!(page.contains("cp: cannot stat"), "{page}");
    assert!(page.contains("failed (exit status 1)"), "{page}");
    builds_stay(&log, 3, Duration::from_secs(3));

    choose(&dir, "hello");
    wait_for_body(&url, HELLO);
    builds_stay(&log, 4, Duration::from_secs(3));
    let (head, _) = head_and_body(&url);
    assert!(!head.contains("x-wedge-build"), "{head}");
}

#[test]
fn a_dev_table_in_wedge_toml_says_how_to_build_and_what_to_watch() {
    let dir = copy_project("dev-table", "hello");
    std::fs::write(
        dir.join("wedge.toml"),
        format!("[dev]\nbuild = '{COPY}'\ncomponent = \"dist/app.wasm\"\nwatch = [\"src\"]\n"),
    )
    .unwrap();
    let server = Server::dev(&dir, &[]);
    let log = || server.log();
    let url = format!("{}{PATH}", server.url);
    assert_eq!(get(&url), ("200".into(), HELLO.into()));

    // Only `src` is watched.
    std::fs::write(dir.join("README.md"), "not watched").unwrap();
    builds_stay(&log, 1, Duration::from_secs(3));
    choose(&dir, "faults");
    wait_for_body(&url, SLEPT);
    let log_text = wait_for_builds(&log, 2);
    assert!(log_text.contains("watching "), "{log_text}");
}

/// Runs `wedge dev DIR ARGS`, which must refuse to start: its one-line error.
fn refused(dir: &Path, args: &[&str]) -> String {
    let mut all = vec!["dev", dir.to_str().unwrap()];
    all.extend_from_slice(args);
    let out = support::wedge(&all, &temp_dir("dev-refused-data"));
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.starts_with("error: "), "{stderr}");
    stderr
}

#[test]
fn a_build_setup_that_cannot_work_is_refused_or_shown_with_its_errors() {
    let dir = copy_project("dev-bad-setup", "hello");
    let needs_component = refused(&dir, &["--build", COPY]);
    assert!(
        needs_component.contains("needs the component it writes: --component PATH"),
        "{needs_component}"
    );
    let needs_build = refused(&dir, &["--component", "dist/app.wasm"]);
    assert!(
        needs_build.contains("needs the command that builds it: --build COMMAND"),
        "{needs_build}"
    );
    let args = ["--build", COPY, "--component", "dist/app.wasm"];
    let watch = refused(&dir, &[&args[..], &["--watch", "nope"]].concat());
    assert!(
        watch.contains("cannot watch") && watch.contains("nope: no such file or directory"),
        "{watch}"
    );
    let nothing = refused(&dir, &[]);
    assert!(
        nothing.contains("has no Cargo.toml") && nothing.contains("--build COMMAND"),
        "{nothing}"
    );
    std::fs::write(
        dir.join("wedge.toml"),
        "[dev]\nbuild = \"make\"\ncomand = 1\n",
    )
    .unwrap();
    let table = refused(&dir, &[]);
    assert!(
        table.contains("wedge.toml:3: dev.comand: unknown key `comand`"),
        "{table}"
    );
    std::fs::remove_file(dir.join("wedge.toml")).unwrap();

    // A command the shell cannot find, and one that writes no component: served as
    // the build's errors until a build succeeds.
    for (command, expected) in [
        (
            "no-such-toolchain-wedge build",
            "found no such command (exit status 127",
        ),
        ("true", "`true` succeeded but wrote no dist/app.wasm"),
    ] {
        let server = Server::dev(&dir, &["--build", command, "--component", "dist/app.wasm"]);
        let (status, text) = get(&format!("{}/", server.url));
        assert_eq!(status, "500", "{text}");
        assert!(text.contains(expected), "{text}");
        server.wait_for_log(expected);
    }
}

/// Whether Node.js 20+ and npm are installed; without them, `false` after saying so
/// (or a panic when `WEDGE_REQUIRE_NPM` is set). componentize-js's dependencies need
/// Node.js 20.
fn node_and_npm() -> bool {
    let version = |program: &str| {
        Command::new(program)
            .arg("--version")
            .output()
            .ok()
            .filter(|out| out.status.success())
            .map(|out| String::from_utf8_lossy(&out.stdout).trim().to_string())
    };
    let node_major = version("node").and_then(|v| {
        let major = v.trim_start_matches('v').split('.').next()?.to_string();
        major.parse::<u32>().ok()
    });
    let missing = match (node_major, version("npm")) {
        (Some(major), Some(_)) if major >= 20 => return true,
        (Some(major), Some(_)) => format!("Node.js {major} is too old (20 or later)"),
        _ => "Node.js and npm are not installed".to_string(),
    };
    support::missing_tool(
        &format!("{missing} (apt-get install nodejs npm)"),
        "WEDGE_REQUIRE_NPM",
    );
    false
}

/// A copy of tests/fixtures/js-hello (a componentize-js project whose wedge.toml says
/// how to build it) with its dependencies linked in.
fn js_project(tag: &str) -> PathBuf {
    support::js::project(&temp_dir(tag)).unwrap_or_else(|why| panic!("{why}"))
}

/// Issue 17 item 10: a componentize-js project (`npm run build`) in the dev loop:
/// served, each save one build and the new answer; a syntax error shown as a
/// compiler's is, the last version serving on.
#[test]
fn a_componentize_js_project_is_served_and_each_save_rebuilds_it_once() {
    if !node_and_npm() {
        return;
    }
    let dir = js_project("dev-js");
    let app = dir.join("src/app.js");
    let source = std::fs::read_to_string(&app).unwrap();
    let server = Server::dev(&dir, &[]);
    let log = || server.log();
    let url = format!("{}/x", server.url);
    assert_eq!(get(&url), ("200".into(), "Hello from JS at /x!\n".into()));
    builds_stay(&log, 1, Duration::from_secs(5));

    std::fs::write(&app, source.replace("Hello", "Howdy")).unwrap();
    wait_for_body(&url, "Howdy from JS at /x!\n");
    builds_stay(&log, 2, Duration::from_secs(5));

    std::fs::write(&app, "this is not js (\n").unwrap();
    let log_text = server.wait_for_log("still serving the last version that built");
    assert!(log_text.contains("SyntaxError"), "{log_text}");
    let (head, body) = head_and_body(&url);
    assert!(head.contains("x-wedge-build: failed"), "{head}");
    assert_eq!(body, "Howdy from JS at /x!\n");
    let (_, page) = head_and_body(&format!("{}/_wedge/build", server.url));
    assert!(page.contains("SyntaxError"), "{page}");
    assert!(
        page.contains("`npm run build` failed (exit status 1)"),
        "{page}"
    );
    // (The fix is one more build, as the crate's and the shell project's tests show:
    // each build of this project is a 13 MB component to compile.)
    builds_stay(&log, 3, Duration::from_secs(3));
}
