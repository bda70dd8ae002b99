//! Many apps in one wedge (`wedge serve --config wedge.toml`): routing by host and
//! path, per-app limits, per-app admission (a flooded app does not hold up another),
//! and config errors reported all at once.

use std::path::{Path, PathBuf};

use support::{Parked, Server, curl, example, temp_dir};

/// Writes `wedge.toml` into a fresh directory: cleartext listener on an ephemeral
/// port, then `apps` (TOML text; `{hello}`, `{echo}` name example components).
fn config(apps: &str) -> PathBuf {
    let dir = temp_dir("tenancy");
    let text = apps
        .replace("{hello}", &example("hello").display().to_string())
        .replace("{echo}", &example("echo").display().to_string())
        .replace("{faults}", &example("faults").display().to_string())
        .replace("{json_api}", &example("json_api").display().to_string());
    let path = dir.join("wedge.toml");
    std::fs::write(&path, format!("listen = \"127.0.0.1:0\"\n\n{text}")).unwrap();
    path
}

fn serve(config: &Path) -> Server {
    Server::start_config(config, &["--access-log"])
}

/// Status and body of a request with the given Host header.
fn get(server: &Server, host: &str, path: &str) -> (String, String) {
    let out = curl(&[
        "--header",
        &format!("host: {host}"),
        "--write-out",
        "\n%{http_code}",
        &format!("{}{path}", server.url),
    ]);
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let (body, status) = text.rsplit_once('\n').unwrap();
    (status.to_string(), body.to_string())
}

#[test]
fn requests_go_to_the_app_of_the_most_specific_route_and_others_get_404() {
    let path = config(
        r#"
[[app]]
name = "hello"
component = "{hello}"
routes = ["hello.localhost/", "/hello"]

[[app]]
name = "echo"
component = "{echo}"
routes = ["*.localhost/echo", "/echo"]
"#,
    );
    let server = serve(&path);
    assert_eq!(get(&server, "hello.localhost", "/anything").0, "200");
    assert_eq!(
        get(&server, "other", "/hello/x"),
        ("200".into(), "Hello, world!\n".into())
    );
    // The exact host beats the wildcard, whatever the path.
    assert_eq!(
        get(&server, "hello.localhost", "/echo").1,
        "Hello, world!\n"
    );
    // The wildcard host reaches echo; echo answers an empty GET with an empty body.
    assert_eq!(
        get(&server, "a.localhost", "/echo"),
        ("200".into(), String::new())
    );
    let (status, body) = get(&server, "other", "/helloworld");
    assert_eq!(status, "404");
    assert_eq!(body, "404 Not Found: no app serves other/helloworld\n");
    // The access log names the app each request went to.
    server.wait_for_log("[hello] GET /anything 200");
    server.wait_for_log("[echo] GET /echo 200");
}

#[test]
fn each_app_gets_its_own_limits() {
    let path = config(
        r#"
[[app]]
name = "small"
component = "{echo}"
routes = ["/small"]
[app.limits]
max_body = "1KiB"

[[app]]
name = "large"
component = "{echo}"
routes = ["/large"]
[app.limits]
max_body = "1MiB"
"#,
    );
    let server = serve(&path);
    let body = "x".repeat(4096);
    let post = |path: &str| {
        let out = curl(&[
            "--write-out",
            "%{http_code}",
            "--output",
            "/dev/null",
            "--data-binary",
            &body,
            &format!("{}{path}", server.url),
        ]);
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    assert_eq!(post("/small"), "413");
    assert_eq!(post("/large"), "200");
}

#[test]
fn a_flooded_app_does_not_hold_up_another() {
    let path = config(
        r#"
[[app]]
name = "flooded"
component = "{echo}"
routes = ["/flooded"]
[app.limits]
max_concurrent = 2
queue = 0

[[app]]
name = "calm"
component = "{hello}"
routes = ["/calm"]
[app.limits]
max_concurrent = 2
queue = 0
"#,
    );
    let server = serve(&path);
    let parked = [
        Parked::open(&server, "/flooded"),
        Parked::open(&server, "/flooded"),
    ];
    // The flooded app is full: its next request is refused at once...
    assert_eq!(get(&server, "x", "/flooded").0, "503");
    // ...while the other app answers, its requests not queued behind the flood.
    for _ in 0..5 {
        assert_eq!(get(&server, "x", "/calm").0, "200");
    }
    for request in parked {
        request.finish();
    }
}

#[test]
fn every_config_error_is_reported_with_its_line_and_exit_2() {
    let path = config(
        r#"
[[app]]
name = "hello"
component = "{hello}"
routes = ["nopath"]
[app.limits]
memory = "12XB"
"#,
    );
    let out = support::wedge(
        &["serve", "--config", path.to_str().unwrap()],
        &temp_dir("data"),
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    let lines: Vec<&str> = stderr.lines().collect();
    assert_eq!(lines.len(), 2, "{stderr}");
    let file = path.display().to_string();
    assert!(
        lines[0].starts_with(&format!("error: {file}:7: app[0].routes[0]")),
        "{stderr}"
    );
    assert!(
        lines[1].starts_with(&format!("error: {file}:9: app[0].limits.memory")),
        "{stderr}"
    );
}

#[test]
fn a_changed_config_is_reloaded_and_an_invalid_one_refused() {
    let app = |name: &str, component: &str| {
        format!("[[app]]\nname = \"{name}\"\ncomponent = \"{component}\"\nroutes = [\"/a\"]\n")
    };
    let path = config(&app("first", "{hello}"));
    let server = serve(&path);
    assert_eq!(
        get(&server, "x", "/a"),
        ("200".into(), "Hello, world!\n".into())
    );

    let rewrite = |apps: &str| {
        let text = std::fs::read_to_string(&path).unwrap();
        let listen = text.lines().next().unwrap();
        let apps = apps.replace("{echo}", &example("echo").display().to_string());
        std::fs::write(&path, format!("{listen}\n{apps}")).unwrap();
    };
    // The file changes: /a goes to echo (an empty GET echoes nothing).
    rewrite(&app("second", "{echo}"));
    support::poll_until("the reloaded app answering", || {
        (get(&server, "x", "/a") == ("200".into(), String::new())).then_some(())
    });

    // An invalid file is refused, the previous apps serve on.
    rewrite("[[app]]\nname = \"broken\"\n");
    server.wait_for_log("config reload refused");
    assert_eq!(get(&server, "x", "/a"), ("200".into(), String::new()));

    // SIGHUP reloads too.
    rewrite(&app("second", "{echo}"));
    server.wait_for_log("config reloaded");
    support::sighup(server.pid());
    server.wait_for_log("SIGHUP: reloading");
    assert_eq!(get(&server, "x", "/a"), ("200".into(), String::new()));
}

#[test]
fn an_app_may_be_given_more_memory_than_the_default_pool_holds() {
    // The pool is sized to the largest memory a configured app is given, so the app
    // runs into its own limit (256 MiB), not the pool's default (128 MiB). Touching
    // 256 MiB page by page on a loaded machine can take longer than the default CPU
    // budget (1 s), which would end the request with another fault: it gets 30 s.
    let path = config(
        r#"
[[app]]
name = "big"
component = "{faults}"
routes = ["/"]
[app.limits]
memory = "256MiB"
cpu_time = "30s"
"#,
    );
    let server = serve(&path);
    assert_eq!(get(&server, "x", "/memory").0, "500");
    server.wait_for_log("app `big`: memory limit of 256 MiB exceeded");
}

#[test]
fn per_app_flags_beside_a_config_are_refused() {
    // They would be ignored: per-app limits come from the file.
    let path = config("[[app]]\nname = \"hello\"\ncomponent = \"{hello}\"\nroutes = [\"/\"]\n");
    for flag in [
        ["--cpu-time", "1s"],
        ["--max-concurrent", "5"],
        ["--allow-outbound", "x"],
    ] {
        let mut args = vec!["serve", "--config", path.to_str().unwrap()];
        args.extend(flag);
        let out = support::wedge(&args, &temp_dir("data"));
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{flag:?}: {stderr}");
        assert!(stderr.contains("cannot be used with"), "{flag:?}: {stderr}");
    }
}

#[test]
fn a_reloaded_app_shares_its_slots_with_the_version_still_running() {
    let app = |routes: &str| {
        format!(
            "[[app]]\nname = \"one\"\ncomponent = \"{{echo}}\"\nroutes = [{routes}]\n\
             [app.limits]\nmax_concurrent = 1\nqueue = 0\n"
        )
    };
    let path = config(&app("\"/a\""));
    let server = serve(&path);
    let parked = Parked::open(&server, "/a");
    // A new version of the app (another route); the old one still runs the parked request.
    let listen = std::fs::read_to_string(&path).unwrap();
    let listen = listen.lines().next().unwrap().to_string();
    let next = app("\"/a\", \"/b\"").replace("{echo}", &example("echo").display().to_string());
    std::fs::write(&path, format!("{listen}\n{next}")).unwrap();
    server.wait_for_log("config reloaded");
    // One slot in all: the new version does not bring a second.
    assert_eq!(get(&server, "x", "/b").0, "503");
    parked.finish();
    support::poll_until("the slot free again", || {
        (get(&server, "x", "/b").0 == "200").then_some(())
    });
}

#[test]
fn time_limits_are_each_apps_own() {
    let path = config(
        r#"
[[app]]
name = "tight"
component = "{faults}"
routes = ["tight.localhost/"]
[app.limits]
cpu_time = "50ms"
wall_time = "200ms"

[[app]]
name = "loose"
component = "{faults}"
routes = ["loose.localhost/"]
"#,
    );
    let server = serve(&path);
    assert_eq!(get(&server, "tight.localhost", "/sleep?ms=400").0, "504");
    server.wait_for_log("app `tight`: wall-clock limit of 200ms exceeded");
    assert_eq!(get(&server, "tight.localhost", "/cpu-loop").0, "504");
    server.wait_for_log("app `tight`: CPU time limit of 50ms exceeded");
    assert_eq!(
        get(&server, "loose.localhost", "/sleep?ms=400"),
        ("200".into(), "slept 400\n".into())
    );
}

/// Issue 17 item 6: an app on a path route keeps the whole path and learns its mount
/// point from `x-wedge-base-path`; the SDK router matches below it, so the obvious
/// app (`/items`) answers `/api/items`, and its links start with `/api`. A client
/// cannot say where an app is mounted: its own field is dropped.
#[test]
fn an_app_on_a_path_route_learns_where_it_is_mounted() {
    let path = config(
        r#"
[[app]]
name = "api"
component = "{json_api}"
routes = ["/api"]

[[app]]
name = "root"
component = "{json_api}"
routes = ["/"]
"#,
    );
    let server = serve(&path);
    let (status, body) = get(&server, "x", "/api/items/2");
    assert_eq!(status, "200", "{body}");
    assert!(body.contains("coffee"), "{body}");
    let out = curl(&[
        "--include",
        "--json",
        r#"{"name": "mate", "price_cents": 300}"#,
        &format!("{}/api/items", server.url),
    ]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.starts_with("HTTP/1.1 201"), "{text}");
    assert!(text.contains("location: /api/items/3\r\n"), "{text}");
    // On `/` there is no base path, whatever the client claims.
    let out = curl(&[
        "--write-out",
        "\n%{http_code}",
        "--header",
        "x-wedge-base-path: /items",
        &format!("{}/items/1", server.url),
    ]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.ends_with("\n200") && text.contains("tea"), "{text}");
}
