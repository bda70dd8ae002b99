//! Instance isolation: a fresh instance never sees what an earlier instance left in
//! its memory, whether the pool slot gave its pages back (`--pool-keep-resident 0`)
//! or kept them resident and reset the dirtied ones (the default), and also after
//! the earlier instance trapped. With instance reuse the same probe sees the marks,
//! which shows it can tell.

use support::{Server, curl, example};

fn dirty(server: &Server, query: &str) -> String {
    let out = curl(&[&format!("{}/dirty{query}", server.url)]);
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// 40 requests, every fourth trapping after it marked its memory: each sees a
/// fresh instance's memory.
fn every_instance_starts_clean(args: &[&str]) {
    let server = Server::start(&example("faults"), args);
    for round in 0..40 {
        let query = if round % 4 == 3 { "?trap" } else { "" };
        let seen = dirty(&server, query);
        // A trapping request's body may be cut before its text arrives.
        if query.is_empty() || !seen.is_empty() {
            assert_eq!(seen, "clean", "round {round}: {}", server.log());
        }
    }
}

#[test]
fn pages_kept_resident_are_reset_between_instances() {
    every_instance_starts_clean(&[]);
}

#[test]
fn pages_given_back_come_back_zeroed() {
    every_instance_starts_clean(&["--pool-keep-resident", "0"]);
}

#[test]
fn a_reused_instance_keeps_its_memory() {
    let server = Server::start(&example("faults"), &["--instance-reuse", "4"]);
    let answers: Vec<String> = (0..4).map(|_| dirty(&server, "")).collect();
    assert!(
        answers.iter().any(|a| a == "seen 64"),
        "no request saw an earlier one's marks on a reused instance: {answers:?}"
    );
}
