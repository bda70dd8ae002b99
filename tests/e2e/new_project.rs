//! `wedge new NAME` scaffolds a guest crate that `wedge dev NAME` builds and serves.

use std::path::Path;
use std::process::{Command, Output};

use support::{Server, curl, repo, temp_dir};

#[test]
fn a_new_crate_is_served_immediately() {
    let dir = temp_dir("new");
    let out = support::wedge_command()
        .args(["new", "greeter"])
        .current_dir(&dir)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("wedge dev greeter"));
    let server = Server::dev(&dir.join("greeter"), &[]);
    let out = curl(&["--fail", &format!("{}/hi", server.url)]);
    assert_eq!(String::from_utf8_lossy(&out.stdout), "Hello from /hi!\n");
}

/// `wedge new --wagi` makes a WAGI program on the standard library alone, which
/// `wedge dev` builds for wasm32-wasip1 and runs as WAGI (tests/e2e/wagi.rs has the rest).
#[test]
fn a_new_wagi_crate_is_served_immediately() {
    let dir = temp_dir("new-wagi");
    let out = wedge_new(&dir, &["cgi", "--wagi"], None);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("edit cgi/src/main.rs, then run `wedge dev cgi`"),
        "{stdout}"
    );
    assert!(!stdout.contains("wedge-sdk"), "{stdout}");
    let server = Server::dev(&dir.join("cgi"), &[]);
    let log = server.wait_for_log("componentized with the WASI preview 1 command adapter");
    assert!(log.contains("for wasm32-wasip1"), "{log}");
    let out = curl(&["--fail", &format!("{}/hi?x", server.url)]);
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "Hello from GET /hi!\n"
    );
}

#[test]
fn an_existing_directory_or_a_bad_name_is_refused() {
    let dir = temp_dir("new-refused");
    std::fs::create_dir(dir.join("taken")).unwrap();
    for (name, expected) in [
        ("taken", "already exists"),
        ("9lives", "`9lives` is not an app name"),
        // A crate name, but not an app's: wedge.toml and `wedge deploy` refuse it.
        ("MyApp", "`MyApp` is not an app name: use lowercase letters"),
    ] {
        let out = support::wedge_command()
            .args(["new", name])
            .current_dir(&dir)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{stderr}");
        assert_eq!(stderr.lines().count(), 1, "{stderr}");
        assert!(stderr.contains(expected), "{stderr}");
    }
}

/// `wedge new ARGS` in `dir`, git finding no repository above the tests' temporary
/// directories, with `path` as PATH if given.
fn wedge_new(dir: &Path, args: &[&str], path: Option<&Path>) -> Output {
    let mut command = support::wedge_command();
    command
        .arg("new")
        .args(args)
        .current_dir(dir)
        .env("GIT_CEILING_DIRECTORIES", std::env::temp_dir());
    if let Some(path) = path {
        command.env("PATH", path);
    }
    let out = command.output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

fn git(dir: &Path, args: &[&str]) -> Output {
    let out = Command::new("git")
        .args(args)
        .current_dir(dir)
        .output()
        .expect("git (apt-get install git)");
    assert!(out.status.success(), "git {args:?}");
    out
}

#[test]
fn a_new_crate_gets_a_repository_and_an_sdk_path_it_can_keep() {
    // Outside any repository: a new one, the SDK wedge was built from by its path.
    let dir = temp_dir("new-git").canonicalize().unwrap();
    let out = wedge_new(&dir, &["outside"], None);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("git: a new repository in outside/"),
        "{stdout}"
    );
    let top = git(&dir.join("outside"), &["rev-parse", "--show-toplevel"]);
    assert_eq!(
        String::from_utf8_lossy(&top.stdout).trim(),
        dir.join("outside").display().to_string()
    );
    let sdk = repo().join("guest-sdk").canonicalize().unwrap();
    let manifest = std::fs::read_to_string(dir.join("outside/Cargo.toml")).unwrap();
    assert!(
        manifest.contains(&format!("wedge-sdk = {{ path = \"{}\" }}", sdk.display())),
        "{manifest}"
    );
    assert!(manifest.contains("`wedge new --sdk PATH`"), "{manifest}");

    // Inside a repository holding the SDK (--sdk): no repository of its own, and
    // the SDK by a path relative to the crate, which moves with the repository.
    let project = dir.join("project");
    std::fs::create_dir_all(project.join("vendor/wedge-sdk")).unwrap();
    std::fs::create_dir_all(project.join("apps")).unwrap();
    std::fs::write(project.join("vendor/wedge-sdk/Cargo.toml"), "").unwrap();
    git(&project, &["init", "--quiet"]);
    let out = wedge_new(
        &project.join("apps"),
        &["inside", "--sdk", "../vendor/wedge-sdk"],
        None,
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains(&format!(
            "git: inside the repository at {}",
            project.display()
        )),
        "{stdout}"
    );
    assert!(!project.join("apps/inside/.git").exists());
    let manifest = std::fs::read_to_string(project.join("apps/inside/Cargo.toml")).unwrap();
    assert!(
        manifest.contains(r#"wedge-sdk = { path = "../../vendor/wedge-sdk" }"#),
        "{manifest}"
    );

    // Without git: the crate all the same, and a line saying why there is no repository.
    let no_git = temp_dir("no-git");
    let out = wedge_new(&dir, &["nogit"], Some(&no_git));
    assert!(
        String::from_utf8_lossy(&out.stderr)
            .contains("git is not installed: no repository created")
    );
    assert!(dir.join("nogit/Cargo.toml").is_file());
    assert!(!dir.join("nogit/.git").exists());
}

#[test]
fn a_crate_with_dashes_is_served_under_its_own_name() {
    let dir = temp_dir("new-dashes");
    let out = wedge_new(&dir, &["dashed-name"], None);
    assert!(String::from_utf8_lossy(&out.stdout).contains("wedge dev dashed-name"));
    let server = Server::dev(&dir.join("dashed-name"), &[]);
    // The lib target (and its .wasm) is `dashed_name`; the app is the package.
    let log = server.wait_for_log("app `dashed-name`");
    assert!(!log.contains("dashed_name"), "{log}");
    let out = curl(&["--fail", &format!("{}/hi", server.url)]);
    assert_eq!(String::from_utf8_lossy(&out.stdout), "Hello from /hi!\n");
}

#[test]
fn wedge_dev_listens_where_host_says() {
    let dir = temp_dir("new-host");
    wedge_new(&dir, &["devhost"], None);
    // ::1 rather than 0.0.0.0, to stay on loopback: the flag is the same.
    let server = Server::dev(&dir.join("devhost"), &["--host", "::1", "--no-tls"]);
    assert!(server.url.starts_with("http://[::1]:"), "{}", server.url);
    let out = curl(&["--fail", &format!("{}/hi", server.url)]);
    assert_eq!(String::from_utf8_lossy(&out.stdout), "Hello from /hi!\n");
    let port = server.url.rsplit(':').next().unwrap();
    let out = curl(&[&format!("http://127.0.0.1:{port}/")]);
    assert_eq!(out.status.code(), Some(7), "127.0.0.1 answered");
}
