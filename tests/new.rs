//! `wedge new NAME` scaffolds a guest crate that `wedge dev NAME` builds and serves.

mod support;

use support::{Server, curl, temp_dir};

#[test]
fn a_new_crate_is_served_immediately() {
    let dir = temp_dir("new");
    let out = std::process::Command::new(support::wedge_bin())
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

#[test]
fn an_existing_directory_or_a_bad_name_is_refused() {
    let dir = temp_dir("new-refused");
    std::fs::create_dir(dir.join("taken")).unwrap();
    for (name, expected) in [("taken", "already exists"), ("9lives", "not a crate name")] {
        let out = std::process::Command::new(support::wedge_bin())
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
