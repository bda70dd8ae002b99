//! What an app hands its guest, end to end: `--env` as WASI environment
//! variables, `--var` through wasi:config/store (the `config` example imports
//! it), and nothing of wedge's own environment.

use support::{Server, curl, example, repo, temp_dir, wedge};

/// Status code and body of a GET of `path`.
fn get(server: &Server, path: &str) -> (String, String) {
    let out = curl(&[
        "--write-out",
        "\n%{http_code}",
        &format!("{}{path}", server.url),
    ]);
    let text = String::from_utf8(out.stdout).unwrap();
    let (body, status) = text.rsplit_once('\n').unwrap();
    (status.to_string(), body.to_string())
}

/// The guest lists exactly `env` and `config` (`KEY=VALUE` lines, sorted).
fn assert_sees(server: &Server, env: &str, config: &str) {
    assert_eq!(get(server, "/env"), ("200".into(), env.into()));
    assert_eq!(get(server, "/config"), ("200".into(), config.into()));
}

/// Runs `wedge ARGS`, which must refuse them with exit status 2; its stderr.
fn refused(args: &[&str]) -> String {
    let out = wedge(args, &temp_dir("data"));
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
    stderr
}

const GIVEN: [&str; 4] = ["--env", "GREETING=hi", "--var", "greeting=hello"];

#[test]
fn the_guest_sees_exactly_the_env_and_config_it_is_given() {
    let mut args = vec!["--no-tls"];
    args.extend(GIVEN);
    // A value keeps any `=` after the first; a repeated key its last value.
    args.extend([
        "--var",
        "url=http://example.com/?a=b",
        "--env",
        "LEVEL=debug",
        "--env",
        "LEVEL=info",
    ]);
    let server = Server::start(&example("config"), &args);
    assert_eq!(get(&server, "/env/GREETING"), ("200".into(), "hi\n".into()));
    assert_eq!(
        get(&server, "/config/greeting"),
        ("200".into(), "hello\n".into())
    );
    assert_sees(
        &server,
        "GREETING=hi\nLEVEL=info\n",
        "greeting=hello\nurl=http://example.com/?a=b\n",
    );
    // The two are separate: a config key is no environment variable, and back.
    assert_eq!(
        get(&server, "/env/greeting"),
        ("404".into(), "no environment variable `greeting`\n".into())
    );
    assert_eq!(
        get(&server, "/config/GREETING"),
        ("404".into(), "no config value `GREETING`\n".into())
    );
}

#[test]
fn without_flags_the_guest_sees_no_env_and_no_config() {
    // wedge runs with the test's environment; none of it may reach the guest.
    assert!(std::env::var_os("PATH").is_some());
    let server = Server::start(&example("config"), &["--no-tls"]);
    assert_sees(&server, "", "");
    assert_eq!(
        get(&server, "/env/PATH"),
        ("404".into(), "no environment variable `PATH`\n".into())
    );
}

#[test]
fn wedge_dev_hands_the_guest_its_env_and_config_too() {
    let mut args = vec!["--no-tls"];
    args.extend(GIVEN);
    let server = Server::dev(&repo().join("examples/config"), &args);
    assert_sees(&server, "GREETING=hi\n", "greeting=hello\n");
}

#[test]
fn a_flag_that_is_not_key_value_is_refused_in_one_line() {
    let component = example("config");
    for bad in ["--env=NOVALUE", "--var==x"] {
        let stderr = refused(&["serve", component.to_str().unwrap(), bad]);
        let value = bad.split_once('=').unwrap().1;
        assert!(
            stderr.contains(&format!("`{value}` is not KEY=VALUE")),
            "{bad}: {stderr}"
        );
    }
}

#[test]
fn with_a_config_file_the_variables_come_from_the_file_not_the_flags() {
    let wedge_toml = repo().join("examples/wedge.toml");
    for flag in ["--env", "--var"] {
        let stderr = refused(&[
            "serve",
            "--config",
            wedge_toml.to_str().unwrap(),
            flag,
            "A=b",
        ]);
        assert!(stderr.contains("cannot be used with"), "{flag}: {stderr}");
    }
}
