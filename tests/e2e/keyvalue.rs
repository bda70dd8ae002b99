//! State for handlers, end to end: `wasi:keyvalue` on the embedded backend and on a
//! real `redis-server`, through the `counter` example and the `kv-probe` fixture
//! (both versions wedge serves): counts that survive a restart and a `kill -9`, apps
//! that never see each other's keys (on one file each, and on one Redis), every
//! quota an error for the guest while wedge keeps serving, Redis down or frozen as a
//! bounded error while other apps serve and wedge reconnecting, and two wedges
//! sharing one Redis keeping an exact count.

use std::path::PathBuf;
use std::process::Command;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use support::admin::{Admin, TOKEN};
use support::redis::RedisServer;
use support::{Server, curl, example, temp_dir, wedge};

/// Status and body of a request: `method` to `path`, with `body` if any.
fn call(server: &Server, method: &str, path: &str, body: Option<&str>) -> (String, String) {
    let url = format!("{}{path}", server.url);
    let mut args = vec!["--request", method, "--write-out", "\n%{http_code}", &url];
    if let Some(body) = body {
        args.extend(["--data-binary", body]);
    }
    let out = curl(&args);
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let (body, status) = text.rsplit_once('\n').unwrap();
    (status.to_string(), body.to_string())
}

fn ok(body: &str) -> (String, String) {
    ("200".to_string(), body.to_string())
}

fn refused(why: &str) -> impl Fn(&(String, String)) -> bool + '_ {
    move |(status, body)| status == "409" && body.contains(why)
}

/// Writes a `wedge.toml` (cleartext listener on an ephemeral port, then `apps`, where
/// `{probe}` names the kv-probe fixture) into a fresh directory.
fn config(apps: &str) -> PathBuf {
    let text = apps.replace("{probe}", &example("kv_probe").display().to_string());
    let path = temp_dir("kv-config").join("wedge.toml");
    std::fs::write(&path, format!("listen = \"127.0.0.1:0\"\n\n{text}")).unwrap();
    path
}

#[test]
fn the_counter_counts_and_keeps_its_counts_across_a_restart() {
    let data = temp_dir("kv-counter");
    let counter = example("counter");
    let server = Server::start_in(&counter, &["--no-tls"], &data);
    assert_eq!(call(&server, "GET", "/hits", None), ok("0\n"));
    for n in 1..=3 {
        assert_eq!(call(&server, "POST", "/hits", None), ok(&format!("{n}\n")));
    }
    assert_eq!(call(&server, "POST", "/misses?by=-2", None), ok("-2\n"));
    assert_eq!(call(&server, "GET", "/", None), ok("hits=3\nmisses=-2\n"));
    drop(server);
    let server = Server::start_in(&counter, &["--no-tls"], &data);
    assert_eq!(call(&server, "GET", "/hits", None), ok("3\n"));
    assert!(data.join("kv/counter.sqlite3").is_file());
}

/// Increments from several clients at once, the server killed with SIGKILL once 40
/// were acknowledged: after a restart the count holds every acknowledged one (the
/// largest count answered), and no more than the requests then in flight besides.
/// With the default durability (`os`: acknowledged once the OS has the write, no
/// fsync) and with `disk` (fsync before the acknowledgement).
#[test]
fn acknowledged_increments_survive_kill_9() {
    increments_survive_kill_9(&[], "wedge-kv-sync", Grouped::Maybe);
}

#[test]
fn acknowledged_increments_survive_kill_9_with_disk_durability() {
    increments_survive_kill_9(
        &["--kv-durability", "disk"],
        "wedge-kv-writer",
        Grouped::Maybe,
    );
}

/// The same once commits held several increments each (`os` groups the writes of
/// one turn of the event loop into one commit): each client sends 16 at once, and
/// the file is synced hourly, so its write-ahead log keeps a page for every
/// commit; the kill comes once it holds fewer pages than increments were
/// acknowledged before it was looked at.
#[test]
fn acknowledged_increments_survive_kill_9_when_commits_are_grouped() {
    let flags = ["--kv-sync-interval", "1h"];
    increments_survive_kill_9(&flags, "wedge-kv-sync", Grouped::Seen);
}

/// Whether a kill test waits until commits were seen holding several writes.
#[derive(PartialEq)]
enum Grouped {
    Maybe,
    Seen,
}

/// Pages (WAL frames) the write-ahead log of app `app`'s file under `data` holds.
fn wal_frames(data: &std::path::Path, app: &str) -> u64 {
    let wal = data.join(format!("kv/{app}.sqlite3-wal"));
    let len = std::fs::metadata(wal).map_or(0, |meta| meta.len());
    // A 32-byte header, then a 4 KiB page and a 24-byte header a frame.
    len.saturating_sub(32) / (4096 + 24)
}

/// The names of the threads of process `pid`.
fn thread_names(pid: u32) -> Vec<String> {
    let tasks = std::fs::read_dir(format!("/proc/{pid}/task")).unwrap();
    tasks
        .filter_map(|task| std::fs::read_to_string(task.ok()?.path().join("comm")).ok())
        .map(|name| name.trim().to_string())
        .collect()
}

/// `kill -9` under increments, with `flags`; the store's file has a thread named
/// `thread` (the syncer of `os`, the writer of `disk`): the setting reached it.
/// `grouped`: each client sends [`AT_ONCE`] increments at once, and the kill waits
/// until commits were seen holding several.
fn increments_survive_kill_9(flags: &[&str], thread: &str, grouped: Grouped) {
    const CLIENTS: u64 = 4;
    const AT_ONCE: u64 = 16;
    let at_once = if grouped == Grouped::Seen { AT_ONCE } else { 1 };
    let data = temp_dir("kv-kill");
    let counter = example("counter");
    let args = [&["--no-tls"], flags].concat();
    let server = Server::start_in(&counter, &args, &data);
    assert_eq!(call(&server, "GET", "/hits", None), ok("0\n"));
    // A thread takes its name once it runs, maybe after the answer: polled.
    support::poll_until(thread, || {
        let names = thread_names(server.pid());
        names.iter().any(|name| name == thread).then_some(())
    });
    let url = format!("{}/hits", server.url);
    let acked = Arc::new(AtomicU64::new(0));
    let largest = Arc::new(AtomicU64::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let clients: Vec<_> = (0..CLIENTS)
        .map(|_| {
            let (url, acked, largest, stop) =
                (url.clone(), acked.clone(), largest.clone(), stop.clone());
            std::thread::spawn(move || {
                let parallel = at_once.to_string();
                let mut args = vec!["--parallel", "--parallel-immediate", "--parallel-max"];
                args.extend([parallel.as_str(), "--request", "POST"]);
                args.extend((0..at_once).map(|_| url.as_str()));
                // Bounded: 100 rounds each at most.
                for _ in 0..100 {
                    if stop.load(Ordering::SeqCst) {
                        return;
                    }
                    let out = curl(&args);
                    let text = String::from_utf8_lossy(&out.stdout);
                    let answered: Vec<u64> =
                        text.lines().filter_map(|n| n.trim().parse().ok()).collect();
                    if answered.is_empty() {
                        return; // the server is gone
                    }
                    for n in answered {
                        largest.fetch_max(n, Ordering::SeqCst);
                        acked.fetch_add(1, Ordering::SeqCst);
                    }
                }
            })
        })
        .collect();
    support::poll_until("40 acknowledged increments", || {
        (acked.load(Ordering::SeqCst) >= 40).then_some(())
    });
    if grouped == Grouped::Seen {
        // Each acknowledged increment was committed, so with a commit each the
        // log would hold a page for each at least.
        support::poll_until("commits holding several increments", || {
            let acknowledged = acked.load(Ordering::SeqCst);
            (wal_frames(&data, "counter") < acknowledged).then_some(())
        });
    }
    drop(server); // SIGKILL
    stop.store(true, Ordering::SeqCst);
    for client in clients {
        client.join().unwrap();
    }
    let largest = largest.load(Ordering::SeqCst);
    let server = Server::start_in(&counter, &args, &data);
    let (status, body) = call(&server, "GET", "/hits", None);
    let count: u64 = body.trim().parse().unwrap();
    assert_eq!(status, "200");
    assert!(
        (largest..=largest + CLIENTS * at_once).contains(&count),
        "count {count} after the kill; the largest acknowledged was {largest}"
    );
}

/// `[app.keyvalue]` with `backend` and `more` keys.
fn keyvalue(backend: &str, more: &str) -> String {
    format!("[app.keyvalue]\nbackend = \"{backend}\"\n{more}\n")
}

#[test]
fn two_apps_never_see_each_others_keys() {
    apps_apart("embedded");
}

#[test]
fn two_apps_on_one_redis_never_see_each_others_keys() {
    let redis = RedisServer::start();
    apps_apart(&redis.url());
}

fn apps_apart(backend: &str) {
    let store = keyvalue(backend, "");
    let path = config(&format!(
        "[[app]]\nname = \"alpha\"\ncomponent = \"{{probe}}\"\nroutes = [\"/alpha\"]\n{store}\n\
         [[app]]\nname = \"beta\"\ncomponent = \"{{probe}}\"\nroutes = [\"/beta\"]\n{store}"
    ));
    let server = Server::start_config(&path, &[]);
    let put = call(&server, "PUT", "/alpha/v2/default/secret", Some("alpha's"));
    assert_eq!(put.0, "204");
    assert_eq!(
        call(&server, "POST", "/alpha/v1/default/n/incr?by=5", None),
        ok("5\n")
    );
    // The same bucket name and key in beta: nothing there, by either version.
    assert_eq!(
        call(&server, "GET", "/beta/v2/default/secret", None).0,
        "404"
    );
    assert_eq!(
        call(&server, "GET", "/beta/v1/default/secret", None).0,
        "404"
    );
    assert_eq!(call(&server, "GET", "/beta/v2/default", None), ok(""));
    assert_eq!(call(&server, "GET", "/beta/v1/default", None), ok(""));
    assert_eq!(
        call(&server, "POST", "/beta/v2/default/n/incr", None),
        ok("1\n")
    );
    // Alpha's keys are alpha's.
    assert_eq!(
        call(&server, "GET", "/alpha/v2/default", None),
        ok("n\nsecret\n")
    );
    assert_eq!(
        call(&server, "GET", "/alpha/v2/default/secret", None),
        ok("alpha's")
    );
    assert_eq!(call(&server, "GET", "/alpha/v2/default/n", None), ok("5"));
}

/// A hostile guest of an app that may open any bucket (`buckets = ["*"]`) names
/// buckets that hold the separator of the Redis keys: bucket `x:LONG` key `z` and
/// bucket `x` key `LONG:z` were one Redis key, counted with names of different
/// lengths, so setting it through one and deleting it through the other drove the
/// app's byte total below zero, past `max_bytes` after. Bucket names a guest opens
/// are held to what the config allows in `buckets`.
#[test]
fn a_guest_cannot_alias_keys_or_escape_quotas_through_bucket_names() {
    let redis = RedisServer::start();
    let store = keyvalue(&redis.url(), "buckets = [\"*\"]\nmax_bytes = \"1KiB\"");
    let path = config(&format!(
        "[[app]]\nname = \"hostile\"\ncomponent = \"{{probe}}\"\nroutes = [\"/\"]\n{store}"
    ));
    let server = Server::start_config(&path, &[]);
    let long = "a".repeat(500);
    for _ in 0..3 {
        let set = call(&server, "PUT", &format!("/v2/x:{long}/z"), Some("v"));
        assert!(refused("no such bucket")(&set), "{set:?}");
        let set = call(&server, "PUT", &format!("/v1/x:{long}/z"), Some("v"));
        assert!(refused("no such store")(&set), "{set:?}");
        call(&server, "DELETE", &format!("/v2/x/{long}:z"), None);
    }
    assert_eq!(
        call(&server, "GET", &format!("/v2/x/{long}:z"), None).0,
        "404"
    );
    let big = "b".repeat(2000);
    let past_quota = call(&server, "PUT", "/v2/default/big", Some(&big));
    assert!(refused("(max_bytes)")(&past_quota), "{past_quota:?}");
    // Names the config would refuse are refused from a guest too.
    for bad in ["a%20b", "%C3%A9", &"x".repeat(65), "a%7Bb%7D"] {
        let get = call(&server, "GET", &format!("/v2/{bad}/k"), None);
        assert!(refused("no such bucket")(&get), "{bad}: {get:?}");
    }
    assert_eq!(call(&server, "PUT", "/v2/a.b-c_1/k", Some("v")).0, "204");
}

/// A batch get of one 64 KiB value a thousand times over would make the host read
/// 64 MiB for the guest: it is refused before anything is read once the values
/// come to more than the host memory the instance has left (`host_memory`, 16 MiB
/// by default), an error for the guest, and wedge keeps serving. (Before, the
/// embedded backend read it all and the instance trapped; Redis sent it all.)
#[test]
fn a_batch_get_is_bounded_by_the_instances_host_memory() {
    batch_bound(&["--no-tls"]);
}

#[test]
fn a_batch_get_on_redis_is_bounded_by_the_instances_host_memory() {
    let redis = RedisServer::start();
    batch_bound(&["--no-tls", "--kv", &redis.url()]);
}

fn batch_bound(args: &[&str]) {
    let server = Server::start(&example("kv_probe"), args);
    let value = "v".repeat(64 * 1024);
    assert_eq!(call(&server, "PUT", "/v2/default/k", Some(&value)).0, "204");
    assert_eq!(
        call(&server, "GET", "/v2/default/k/many?n=4", None),
        ok("262144\n")
    );
    let big = call(&server, "GET", "/v2/default/k/many?n=1000", None);
    assert!(refused("(host_memory)")(&big), "{big:?}");
    assert_eq!(call(&server, "GET", "/v2/default/k", None), ok(&value));
}

/// Compare-and-swap handles keep the value they read: a guest making hundreds on
/// one 100 KiB value made the host hold tens of MiB. On Redis the value came from
/// the connection's task, never charged to the instance, so nothing stopped it
/// short of the resource cap (10,000 handles on a 1 MiB value: 10 GiB). Each
/// handle's copy counts in the instance's `host_memory` (16 MiB), and a handle
/// whose copy would pass it is refused: an error for the guest (it trapped, a 500,
/// before), and wedge keeps serving.
#[test]
fn cas_handles_count_in_the_instances_host_memory() {
    cas_handles_bound(&["--no-tls"]);
}

#[test]
fn cas_handles_on_redis_count_in_the_instances_host_memory() {
    let redis = RedisServer::start();
    cas_handles_bound(&["--no-tls", "--kv", &redis.url()]);
}

fn cas_handles_bound(args: &[&str]) {
    let server = Server::start(&example("kv_probe"), args);
    let value = "v".repeat(100 * 1024);
    assert_eq!(call(&server, "PUT", "/v2/default/k", Some(&value)).0, "204");
    assert_eq!(
        call(&server, "POST", "/v2/default/k/hold?n=2", None),
        ok("2\n")
    );
    let held = call(&server, "POST", "/v2/default/k/hold?n=400", None);
    assert!(refused("(host_memory)")(&held), "{held:?}");
    assert_eq!(call(&server, "GET", "/v2/default/k", None), ok(&value));
}

/// Handles an instance may hold (`max_handles`: its open buckets and compare-and-
/// swap handles together) and keys a batch may name (`max_batch`): past either, an
/// error for the guest. (Before, handles on small values went on until the
/// instance's resource table was full, and a batch of a million keys held its
/// async thread while the host looked each up.)
#[test]
fn handles_and_batches_past_their_limits_are_errors_for_the_guest() {
    let args = ["--no-tls", "--kv-max-handles", "5", "--kv-max-batch", "10"];
    let server = Server::start(&example("kv_probe"), &args);
    assert_eq!(call(&server, "PUT", "/v2/default/k", Some("v")).0, "204");
    // One bucket and four compare-and-swap handles.
    assert_eq!(
        call(&server, "POST", "/v2/default/k/hold?n=4", None),
        ok("4\n")
    );
    let held = call(&server, "POST", "/v2/default/k/hold?n=5", None);
    assert!(
        refused("5 key-value handles already (max_handles)")(&held),
        "{held:?}"
    );
    assert_eq!(
        call(&server, "GET", "/v2/default/k/many?n=10", None),
        ok("10\n")
    );
    let batch = call(&server, "GET", "/v2/default/k/many?n=11", None);
    assert!(refused("at most 10 (max_batch)")(&batch), "{batch:?}");
    assert_eq!(call(&server, "GET", "/v2/default/k", None), ok("v"));
}

/// `wedge_sdk::kv` keeps the bucket an instance opened last open for its later
/// requests: opening it again costs no host call and no handle, so a guest that
/// opens the bucket in every handler (the examples do) holds one handle however
/// many it opens, and a reused instance opens it once. (Before, each open was a
/// handle and two host calls, an open and a drop, beside the operation's own: past
/// `max_handles` opens at once were refused.) A bucket the app may not open is not
/// kept.
#[test]
fn the_sdk_opens_a_bucket_once_an_instance() {
    let args = ["--no-tls", "--kv-max-handles", "2", "--instance-reuse", "8"];
    let server = Server::start(&example("kv_probe"), &args);
    assert_eq!(call(&server, "PUT", "/v2/default/k", Some("v")).0, "204");
    for _ in 0..3 {
        assert_eq!(
            call(&server, "GET", "/v2/default/k/reopen?n=5", None),
            ok("5\n")
        );
    }
    let other = call(&server, "GET", "/v2/other/k/reopen?n=1", None);
    assert!(refused("no such bucket")(&other), "{other:?}");
    assert_eq!(call(&server, "GET", "/v2/default/k", None), ok("v"));
}

/// Only the bucket an instance opened last is kept: a client naming one bucket
/// after another (any the app's `buckets` allow) cannot pile the instance's
/// handles up to `max_handles`, locking everyone the instance serves out of the
/// store, nor leave a compare-and-swap without the handle it needs. (The hostile
/// probe of a first version, which kept every bucket opened, found both: the third
/// name and every request after were refused.)
#[test]
fn a_reused_instance_keeps_one_bucket_whatever_names_clients_send() {
    let store = keyvalue("embedded", "buckets = [\"*\"]\nmax_handles = 2");
    let path = config(&format!(
        "[[app]]\nname = \"many\"\ncomponent = \"{{probe}}\"\nroutes = [\"/\"]\n{store}\
         [app.limits]\ninstance_reuse = 64\n"
    ));
    let server = Server::start_config(&path, &[]);
    for name in ["a", "b", "c", "d", "e"] {
        let absent = call(&server, "GET", &format!("/v2/{name}/k"), None);
        assert_eq!(absent.0, "404", "{name}: {absent:?}");
    }
    // A compare-and-swap holds the bucket's handle and one of its own.
    assert_eq!(
        call(&server, "POST", "/v2/f/k/cas", Some("v")),
        ok("swapped\n")
    );
    assert_eq!(call(&server, "GET", "/v2/f/k", None), ok("v"));
}

/// An app writes at most `max_write_rate` bytes of keys and values a second: one
/// write past a second's worth passes, the next is refused while the app owes.
#[test]
fn writes_past_the_write_rate_are_errors_for_the_guest() {
    let args = ["--no-tls", "--kv-max-write-rate", "4KiB"];
    let server = Server::start(&example("kv_probe"), &args);
    let value = "v".repeat(100 * 1024);
    assert_eq!(call(&server, "PUT", "/v2/default/k", Some(&value)).0, "204");
    // 100 KiB at 4 KiB a second: about 25 s owed.
    let next = call(&server, "PUT", "/v2/default/k2", Some("v"));
    assert!(
        refused("at most 4096 bytes of keys and values a second (max_write_rate)")(&next),
        "{next:?}"
    );
    assert_eq!(call(&server, "GET", "/v2/default/k", None), ok(&value));
}

#[test]
fn both_wasi_keyvalue_versions_read_and_write_one_store() {
    versions_share(&[]);
}

#[test]
fn both_wasi_keyvalue_versions_read_and_write_one_redis() {
    let redis = RedisServer::start();
    versions_share(&["--kv", &redis.url()]);
}

fn versions_share(args: &[&str]) {
    let mut args = args.to_vec();
    args.push("--no-tls");
    let server = Server::start(&example("kv_probe"), &args);
    assert_eq!(
        call(&server, "PUT", "/v1/default/a", Some("from v1")).0,
        "204"
    );
    assert_eq!(call(&server, "GET", "/v2/default/a", None), ok("from v1"));
    assert_eq!(
        call(&server, "PUT", "/v2/default/b", Some("from v2")).0,
        "204"
    );
    assert_eq!(call(&server, "GET", "/v1/default/b", None), ok("from v2"));
    assert_eq!(
        call(&server, "POST", "/v1/default/n/incr?by=2", None),
        ok("2\n")
    );
    assert_eq!(
        call(&server, "POST", "/v2/default/n/incr?by=3", None),
        ok("5\n")
    );
    assert_eq!(call(&server, "GET", "/v1/default", None), ok("a\nb\nn\n"));
    assert_eq!(call(&server, "DELETE", "/v2/default/a", None).0, "204");
    assert_eq!(call(&server, "GET", "/v1/default/a", None).0, "404");
    // Compare-and-swap: only from the value there now.
    let cas = |expect: &str, body| {
        call(
            &server,
            "POST",
            &format!("/v2/default/c/cas{expect}"),
            Some(body),
        )
    };
    assert_eq!(cas("", "one"), ok("swapped\n"));
    assert_eq!(cas("", "two"), ok("unchanged\n"));
    assert_eq!(cas("?expect=zero", "two"), ok("unchanged\n"));
    assert_eq!(cas("?expect=one", "two"), ok("swapped\n"));
    assert_eq!(call(&server, "GET", "/v2/default/c", None), ok("two"));
}

#[test]
fn every_quota_is_an_error_for_the_guest_and_wedge_keeps_serving() {
    quotas("embedded");
}

#[test]
fn every_quota_on_redis_is_an_error_for_the_guest() {
    let redis = RedisServer::start();
    quotas(&redis.url());
}

fn quotas(backend: &str) {
    let store = keyvalue(
        backend,
        "buckets = [\"default\", \"extra\"]\nmax_keys = 3\n\
         max_key_size = \"8B\"\nmax_value_size = \"16B\"\nmax_bytes = \"40B\"",
    );
    let path = config(&format!(
        "[[app]]\nname = \"small\"\ncomponent = \"{{probe}}\"\nroutes = [\"/\"]\n{store}"
    ));
    let server = Server::start_config(&path, &[]);
    let put =
        |key: &str, value: &str| call(&server, "PUT", &format!("/v2/default/{key}"), Some(value));
    assert!(refused("no such bucket")(&call(
        &server,
        "GET",
        "/v2/other/k",
        None
    )));
    assert!(refused("no such store")(&call(
        &server,
        "GET",
        "/v1/other/k",
        None
    )));
    assert!(refused("(max_key_size)")(&put("123456789", "v")));
    assert!(refused("(max_value_size)")(&put("k", "12345678901234567")));
    assert_eq!(put("k1", "1234567890").0, "204"); // 12 bytes
    assert_eq!(put("k2", "1234567890").0, "204"); // 24 bytes
    // 24 + 2 + 16 = 42 bytes: past max_bytes, in another bucket too.
    let extra = call(&server, "PUT", "/v2/extra/k3", Some("1234567890123456"));
    assert!(refused("(max_bytes)")(&extra), "{extra:?}");
    assert_eq!(put("k3", "1").0, "204"); // 27 bytes, 3 keys
    assert!(refused("(max_keys)")(&put("k4", "1")));
    assert!(refused("(max_keys)")(&call(
        &server,
        "POST",
        "/v2/extra/n/incr",
        None
    )));
    // A refused write changed nothing; replacing and deleting still work.
    assert_eq!(
        call(&server, "GET", "/v2/default", None),
        ok("k1\nk2\nk3\n")
    );
    assert_eq!(put("k3", "2").0, "204");
    assert_eq!(call(&server, "DELETE", "/v2/default/k1", None).0, "204");
    assert_eq!(put("k4", "1").0, "204");
    let log = server.log();
    assert!(!log.contains("trap"), "no guest trapped:\n{log}");
}

#[test]
fn an_app_without_a_store_is_refused_and_a_bad_backend_is_a_clear_error() {
    let server = Server::start(&example("kv_probe"), &["--no-tls", "--kv", "none"]);
    assert!(refused("no key-value store")(&call(
        &server,
        "GET",
        "/v2/default/k",
        None
    )));
    assert!(refused("access denied")(&call(
        &server,
        "GET",
        "/v1/default/k",
        None
    )));
    let out = wedge(
        &["serve", "x.wasm", "--kv", "sqlite://x"],
        &temp_dir("kv-bad"),
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("`sqlite://x` is not a key-value backend"),
        "{stderr}"
    );
    // `env:NAME` names a variable that must be set when the app loads.
    let probe = example("kv_probe");
    let serve = [
        "serve",
        probe.to_str().unwrap(),
        "--no-tls",
        "--listen",
        "127.0.0.1:0",
    ];
    let unset = [&serve[..], &["--kv", "env:WEDGE_TEST_KV_UNSET"]].concat();
    let out = wedge(&unset, &temp_dir("kv-env"));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    let why =
        "--kv: `env:WEDGE_TEST_KV_UNSET`: the environment variable WEDGE_TEST_KV_UNSET is not set";
    assert!(stderr.contains(why), "{stderr}");
}

/// Redis gone: an operation fails with an error (after its `timeout` when Redis is
/// frozen; at once when nothing listens), other routes and apps keep serving, one
/// operation held by a frozen Redis makes the next past `max_in_flight` fail at once,
/// and wedge reconnects by itself when Redis is back.
#[test]
fn redis_down_is_a_bounded_error_while_others_serve_and_wedge_reconnects() {
    let mut redis = RedisServer::start();
    let shared = keyvalue(&redis.url(), "timeout = \"1s\"");
    let held = keyvalue(&redis.url(), "timeout = \"60s\"\nmax_in_flight = 1");
    let path = config(&format!(
        "[[app]]\nname = \"shared\"\ncomponent = \"{{probe}}\"\nroutes = [\"/shared\"]\n{shared}\n\
         [[app]]\nname = \"held\"\ncomponent = \"{{probe}}\"\nroutes = [\"/held\"]\n{held}\n\
         [[app]]\nname = \"local\"\ncomponent = \"{{probe}}\"\nroutes = [\"/local\"]\n"
    ));
    let server = Server::start_config(&path, &[]);
    assert_eq!(
        call(&server, "POST", "/shared/v2/default/n/incr", None),
        ok("1\n")
    );

    // Frozen: the operation waits for its timeout, then fails.
    redis.pause();
    let frozen = call(&server, "POST", "/shared/v2/default/n/incr", None);
    assert!(
        refused("no answer within 1s (timeout)")(&frozen),
        "{frozen:?}"
    );
    // One operation held by the frozen server; the next of that app fails at once.
    let url = format!("{}/held/v2/default/first", server.url);
    let waiting = std::thread::spawn(move || curl(&["--write-out", "\n%{http_code}", &url]));
    server.wait_for_log("kv-probe: GET /held/v2/default/first");
    support::poll_until("an operation refused past max_in_flight", || {
        let second = call(&server, "GET", "/held/v2/default/k", None);
        refused("in flight already (max_in_flight)")(&second).then_some(())
    });
    assert_eq!(
        call(&server, "POST", "/local/v2/default/n/incr", None),
        ok("1\n")
    );
    redis.resume();
    let first = String::from_utf8_lossy(&waiting.join().unwrap().stdout).into_owned();
    assert!(
        first.ends_with("\n404"),
        "the held operation ends once Redis answers: {first:?}"
    );

    // Gone: an error, logged naming the backend; other apps serve.
    redis.stop();
    let down = call(&server, "POST", "/shared/v2/default/n/incr", None);
    assert!(refused("the key-value store failed")(&down), "{down:?}");
    assert_eq!(
        call(&server, "POST", "/local/v2/default/n/incr", None),
        ok("2\n")
    );
    assert_eq!(call(&server, "GET", "/shared/v1/other", None).0, "409");
    server.wait_for_log(&format!("app `shared`: key-value store ({})", redis.url()));

    // Back (empty: no persistence): wedge reconnects on its own.
    redis.restart();
    support::poll_until("an increment once Redis is back", || {
        let back = call(&server, "POST", "/shared/v2/default/n/incr", None);
        (back == ok("1\n")).then_some(())
    });
}

/// Two `wedge serve` processes sharing one Redis, a bounded concurrent load of
/// increments spread over both, one of them replaced half-way as a load balancer
/// does it (a new wedge takes its place in the rotation, the old one gets no new
/// requests, and once those it had are answered it is sent SIGTERM): every
/// increment sent is acknowledged, and the final count is exactly their number.
#[test]
fn two_wedges_on_one_redis_keep_an_exact_count_through_a_rolling_replace() {
    const CLIENTS: usize = 4;
    const EACH: usize = 50;
    let redis = RedisServer::start();
    let counter = example("counter");
    let args = ["--no-tls", "--kv", &redis.url()];
    let first = Server::start(&counter, &args);
    let second = Server::start(&counter, &args);
    // The rotation: each wedge's URL and its requests in flight, counted when one is
    // picked (under the rotation's lock) until it is answered.
    type Rotation = Vec<(String, Arc<AtomicU64>)>;
    let member = |server: &Server| (server.url.clone(), Arc::new(AtomicU64::new(0)));
    let rotation: Arc<Mutex<Rotation>> =
        Arc::new(Mutex::new(vec![member(&first), member(&second)]));
    let acked = Arc::new(AtomicU64::new(0));
    let clients: Vec<_> = (0..CLIENTS)
        .map(|client| {
            let (rotation, acked) = (rotation.clone(), acked.clone());
            std::thread::spawn(move || {
                for n in 0..EACH {
                    let (url, in_flight) = {
                        let rotation = rotation.lock().unwrap();
                        let (url, in_flight) = rotation[(client + n) % rotation.len()].clone();
                        in_flight.fetch_add(1, Ordering::SeqCst);
                        (url, in_flight)
                    };
                    let out = curl(&["--fail", "--request", "POST", &format!("{url}/total")]);
                    in_flight.fetch_sub(1, Ordering::SeqCst);
                    assert!(
                        out.status.success(),
                        "increment failed: {}",
                        String::from_utf8_lossy(&out.stderr)
                    );
                    acked.fetch_add(1, Ordering::SeqCst);
                }
            })
        })
        .collect();
    support::poll_until("a quarter of the increments", || {
        (acked.load(Ordering::SeqCst) >= (CLIENTS * EACH / 4) as u64).then_some(())
    });
    let third = Server::start(&counter, &args);
    let (_, leaving) = std::mem::replace(&mut rotation.lock().unwrap()[0], member(&third));
    // No new request reaches it; once those in flight are answered it drains and goes.
    support::poll_until("the leaving wedge's requests answered", || {
        (leaving.load(Ordering::SeqCst) == 0).then_some(())
    });
    support::sigterm(first.pid());
    let (status, _) = first.wait_exit(std::time::Duration::from_secs(60));
    assert!(status.success(), "{status}");
    for client in clients {
        client.join().unwrap();
    }
    let total = (CLIENTS * EACH).to_string();
    assert_eq!(acked.load(Ordering::SeqCst), (CLIENTS * EACH) as u64);
    assert_eq!(
        call(&second, "GET", "/total", None),
        ok(&format!("{total}\n"))
    );
    assert_eq!(
        call(&third, "GET", "/total", None),
        ok(&format!("{total}\n"))
    );
}

/// Removing a deployed app keeps its keys for a later deploy of the same name;
/// `wedge rm --purge` removes them. The metrics count operations by kind and outcome
/// and the keys and bytes the app keeps.
#[test]
fn removing_an_app_keeps_its_keys_unless_purged_and_the_metrics_count_them() {
    let admin = Admin::start("", &[], "info");
    let token = temp_dir("kv-token").join("token");
    std::fs::write(&token, TOKEN).unwrap();
    let probe = example("kv_probe");
    let admin_args = [
        "--admin",
        &admin.admin_url,
        "--token-file",
        token.to_str().unwrap(),
    ];
    let run = |args: &[&str]| {
        let out = wedge(&[args, &admin_args[..]].concat(), &admin.data_dir);
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        assert!(
            out.status.success(),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        stdout
    };
    let deploy = || {
        run(&[
            "deploy",
            "probe",
            probe.to_str().unwrap(),
            "--route",
            "/probe",
        ])
    };
    let server = &admin.server;
    deploy();
    assert_eq!(
        call(server, "PUT", "/probe/v2/default/k", Some("kept")).0,
        "204"
    );
    assert!(refused("(max_key_size)")(&call(
        server,
        "GET",
        &format!("/probe/v2/default/{}", "k".repeat(1025)),
        None
    )));
    let samples = admin.scrape();
    let ops = |operation, outcome| {
        let labels = [
            ("app", "probe"),
            ("operation", operation),
            ("outcome", outcome),
        ];
        samples.get("wedge_kv_operations_total", &labels)
    };
    assert_eq!(
        (ops("set", "ok"), ops("get", "refused"), ops("get", "ok")),
        (1.0, 1.0, 0.0)
    );
    assert_eq!(samples.get("wedge_kv_keys", &[("app", "probe")]), 1.0);
    assert_eq!(samples.get("wedge_kv_bytes", &[("app", "probe")]), 5.0);

    assert_eq!(run(&["rm", "probe"]), "removed `probe`\n");
    deploy();
    assert_eq!(call(server, "GET", "/probe/v2/default/k", None), ok("kept"));
    assert_eq!(
        run(&["rm", "probe", "--purge"]),
        "removed `probe` and its key-value data\n"
    );
    deploy();
    assert_eq!(call(server, "GET", "/probe/v2/default/k", None).0, "404");
}

#[test]
fn the_todo_api_keeps_its_todos_in_the_store() {
    todo_api(&[]);
}

#[test]
fn the_todo_api_keeps_its_todos_in_redis() {
    let redis = RedisServer::start();
    todo_api(&["--kv", &redis.url()]);
}

/// Creates, lists, replaces and deletes todos; each answer is the JSON the
/// example documents.
fn todo_api(args: &[&str]) {
    let args = [args, &["--no-tls"]].concat();
    let server = Server::start(&example("todo"), &args);
    let post = |body| call(&server, "POST", "/todos", Some(body));
    assert_eq!(
        post(r#"{"title": " milk "}"#),
        (
            "201".into(),
            r#"{"id":1,"title":"milk","done":false}"#.into()
        )
    );
    assert_eq!(post(r#"{"title": "bread", "done": true}"#).0, "201");
    assert_eq!(post(r#"{"title": ""}"#).0, "400");
    assert_eq!(
        call(
            &server,
            "PUT",
            "/todos/1",
            Some(r#"{"title": "oat milk", "done": true}"#)
        ),
        ok(r#"{"id":1,"title":"oat milk","done":true}"#)
    );
    assert_eq!(call(&server, "DELETE", "/todos/2", None).0, "204");
    assert_eq!(call(&server, "GET", "/todos/2", None).0, "404");
    assert_eq!(
        call(&server, "GET", "/todos", None),
        ok(r#"[{"id":1,"title":"oat milk","done":true}]"#)
    );
    assert_eq!(
        post(r#"{"title": "eggs"}"#),
        (
            "201".into(),
            r#"{"id":3,"title":"eggs","done":false}"#.into()
        )
    );
}

/// An embedded file that cannot be opened (here `<data-dir>/kv` is a file, not a
/// directory) fails each operation with an error while wedge serves, at once
/// after the first (opening is tried again after 1 s, 2 s… up to 30 s), with one
/// log line for the run of failures (before: one per operation, 6,671 in 5 s for a
/// guest in a loop); once the fault is gone a later operation opens the file, and
/// that is logged too.
#[test]
fn an_embedded_fault_is_an_error_and_a_log_line_and_wedge_keeps_serving() {
    let data = temp_dir("kv-fault");
    std::fs::write(data.join("kv"), "not a directory").unwrap();
    let server = Server::start_in(&example("counter"), &["--no-tls"], &data);
    for _ in 0..20 {
        let (status, body) = call(&server, "POST", "/hits", None);
        assert_eq!(status, "500");
        assert!(
            body.contains("the key-value store failed: cannot create $DATA_DIR/kv"),
            "{body}"
        );
        // The host's directories are not the tenant's to know; the log has them.
        assert!(!body.contains(data.to_str().unwrap()), "{body}");
    }
    server.wait_for_log("app `counter`: key-value store (embedded): cannot create");
    let logged = |log: &str| {
        log.matches("key-value store (embedded): cannot create")
            .count()
    };
    assert_eq!(logged(&server.log()), 1, "{}", server.log());
    std::fs::remove_file(data.join("kv")).unwrap();
    // Bounded: each failing request is answered at once; the file opens at the
    // next try, at most 2 s on.
    let opened = (0..2000)
        .map(|_| call(&server, "POST", "/hits", None))
        .find(|answer| answer.0 == "200")
        .expect("the store opened once the fault was gone");
    assert_eq!(opened, ok("1\n"));
    server.wait_for_log("app `counter`: key-value store (embedded): open again, after ");
    assert_eq!(logged(&server.log()), 1, "{}", server.log());
}

#[test]
fn a_spin_sdk_handler_runs_unchanged_on_the_apps_store() {
    spin_handler(&[], &temp_dir("kv-spin"));
}

#[test]
fn a_spin_sdk_handler_runs_unchanged_on_redis() {
    let redis = RedisServer::start();
    spin_handler(&["--kv", &redis.url()], &temp_dir("kv-spin-redis"));
}

/// The `spin-kv` fixture, a Spin SDK 7 handler on Spin's own key-value API
/// (`spin:key-value@3.0.0`: async functions, keys as a stream), served by wedge as
/// it is: Spin's stores are the app's buckets, under the app's settings (a store not
/// allowed is `no-such-store`, a value past `max_value_size` an `other` error); a
/// listing longer than a page streams every key; and wasi:keyvalue (the kv-probe
/// fixture served under the same app name afterwards) reads the same keys.
fn spin_handler(backend: &[&str], data: &std::path::Path) {
    let spin = example("spin_kv");
    let args = [
        backend,
        &[
            "--no-tls",
            "--kv-bucket",
            "default",
            "--kv-bucket",
            "carts",
            "--kv-max-value-size",
            "16B",
        ],
    ]
    .concat();
    let server = Server::start_in(&spin, &args, data);
    assert_eq!(
        call(&server, "PUT", "/default/greeting", Some("hello")),
        ok("stored\n")
    );
    assert_eq!(
        call(&server, "PUT", "/carts/alice", Some("2 apples")),
        ok("stored\n")
    );
    assert_eq!(call(&server, "GET", "/default/greeting", None), ok("hello"));
    assert_eq!(
        call(&server, "GET", "/default/greeting?exists", None),
        ok("true\n")
    );
    assert_eq!(
        call(&server, "GET", "/default/nobody?exists", None),
        ok("false\n")
    );
    assert_eq!(call(&server, "GET", "/default/nobody", None).0, "404");
    assert_eq!(call(&server, "GET", "/carts", None), ok("alice\n"));
    assert_eq!(
        call(&server, "GET", "/other/k", None),
        ("409".into(), "no-such-store\n".into())
    );
    let big = call(&server, "PUT", "/default/big", Some("12345678901234567"));
    assert!(refused("other: the value is 17 bytes")(&big), "{big:?}");
    assert!(big.1.contains("(max_value_size)"), "{big:?}");
    assert_eq!(
        call(&server, "DELETE", "/default/greeting", None),
        ok("deleted\n")
    );
    assert_eq!(call(&server, "GET", "/default", None), ok(""));

    // 1,001 keys (one curl, its URL globbing): more than one page of the listing.
    let url = format!("{}/default/k[0000-1000]", server.url);
    let out = curl(&[
        "--fail",
        "--silent",
        "--request",
        "PUT",
        "--data-binary",
        "v",
        &url,
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let listed: String = (0..=1000).map(|n| format!("k{n:04}\n")).collect();
    assert_eq!(call(&server, "GET", "/default", None), ok(&listed));
    let log = server.log();
    assert!(!log.contains("trap"), "no guest trapped:\n{log}");
    drop(server);

    // The same app's store through wasi:keyvalue: kv-probe under the Spin app's name.
    let probe = temp_dir("kv-spin-probe").join("spin_kv.wasm");
    std::fs::copy(example("kv_probe"), &probe).unwrap();
    let server = Server::start_in(&probe, &args, data);
    assert_eq!(
        call(&server, "GET", "/v2/carts/alice", None),
        ok("2 apples")
    );
    assert_eq!(call(&server, "GET", "/v1/default/k1000", None), ok("v"));
}

/// The embedded store on a full disk: `<data-dir>/kv` is a 2 MiB tmpfs (mounted in a
/// mount namespace of wedge's own, `unshare --map-root-user --mount`, so the test
/// needs no root and leaves no mount behind), partly taken by a filler file. Writes
/// past the space left fail with an error for the guest and one log line each;
/// reads and other requests keep being answered; once the filler is removed, writes
/// work again without a restart.
#[test]
fn a_full_disk_is_an_error_and_a_log_line_and_the_store_recovers_when_space_is_back() {
    let data = temp_dir("kv-full");
    let data_arg = data.to_str().unwrap();
    let mount = "mkdir -p \"$0/kv\" && mount -t tmpfs -o size=2m tmpfs \"$0/kv\" \
                 && head -c 1m /dev/zero > \"$0/kv/filler\" && exec \"$@\"";
    let prefix = [
        "unshare",
        "--map-root-user",
        "--mount",
        "sh",
        "-c",
        mount,
        data_arg,
    ];
    let server = Server::start_via(&prefix, &example("kv_probe"), &["--no-tls"], &data);
    let value = "v".repeat(128 * 1024);
    let file = temp_dir("kv-full-value").join("value");
    std::fs::write(&file, &value).unwrap();
    let body = format!("@{}", file.display()); // curl reads the body from the file
    let put = |n: usize| call(&server, "PUT", &format!("/v2/default/k{n}"), Some(&body));
    assert_eq!(put(0).0, "204");
    // Bounded: 1 MiB of room holds fewer than 8 such values.
    let full = (1..8)
        .map(put)
        .find(|answer| answer.0 != "204")
        .expect("a write failed once the disk was full");
    assert!(refused("the key-value store failed")(&full), "{full:?}");
    server.wait_for_log("app `kv_probe`: key-value store (embedded):");
    let logged = |log: &str| log.matches("key-value store (embedded):").count();
    assert_eq!(logged(&server.log()), 1, "{}", server.log());
    assert_eq!(call(&server, "GET", "/v2/default/k0", None), ok(&value));
    assert_eq!(call(&server, "GET", "/v2/default/absent", None).0, "404");

    let pid = server.pid().to_string();
    let filler = data.join("kv/filler");
    let freed = Command::new("nsenter")
        .args([
            "--target",
            &pid,
            "--user",
            "--mount",
            "--preserve-credentials",
            "rm",
        ])
        .arg(&filler)
        .output()
        .expect("running nsenter (util-linux)");
    assert!(
        freed.status.success(),
        "{}",
        String::from_utf8_lossy(&freed.stderr)
    );
    let again = put(100);
    assert_eq!(again.0, "204", "{again:?}\n{}", server.log());
    assert_eq!(call(&server, "GET", "/v2/default/k100", None), ok(&value));
}

/// `rediss://`: wedge speaks TLS to Redis and checks its certificate against the
/// well-known roots (webpki-roots): a server whose certificate a private CA signed
/// is refused, an error for the guest that names the certificate and a log line,
/// while the app's other work goes on.
#[test]
fn rediss_checks_the_servers_certificate() {
    let redis = RedisServer::start_tls();
    let server = Server::start(
        &example("kv_probe"),
        &["--no-tls", "--kv", &redis.tls_url()],
    );
    let refused_tls = call(&server, "POST", "/v2/default/n/incr", None);
    assert!(
        refused("the key-value store failed")(&refused_tls),
        "{refused_tls:?}"
    );
    assert!(refused_tls.1.contains("certificate"), "{refused_tls:?}");
    server.wait_for_log(&format!("key-value store ({}):", redis.tls_url()));
}

/// `--kv-ca` (`ca` in `[app.keyvalue]`): a `rediss://` server whose certificate
/// the app's private CA signed is trusted; reads and writes go through.
#[test]
fn rediss_trusts_the_apps_private_ca() {
    let redis = RedisServer::start_tls();
    let ca = redis.ca_file();
    let server = Server::start(
        &example("kv_probe"),
        &[
            "--no-tls",
            "--kv",
            &redis.tls_url(),
            "--kv-ca",
            ca.to_str().unwrap(),
        ],
    );
    assert_eq!(call(&server, "POST", "/v2/default/n/incr", None), ok("1\n"));
    assert_eq!(call(&server, "POST", "/v2/default/n/incr", None), ok("2\n"));
    assert_eq!(call(&server, "PUT", "/v2/default/k", Some("v")).0, "204");
    assert_eq!(call(&server, "GET", "/v2/default/k", None), ok("v"));
}

/// A `ca` that cannot be used stops wedge at start with the reason: a missing
/// file, one with no PEM certificate, a CA for a backend that is not `rediss://`;
/// in a wedge.toml, the app and key are named.
#[test]
fn an_unusable_redis_ca_is_a_clear_error_at_start() {
    let dir = temp_dir("kv-ca");
    let not_pem = dir.join("not.pem");
    std::fs::write(&not_pem, "not a certificate\n").unwrap();
    let redis = RedisServer::start_tls();
    let ca = redis.ca_file();
    let probe = example("kv_probe");
    let serve = |backend: &str, ca: &std::path::Path| {
        let args = [
            "serve",
            probe.to_str().unwrap(),
            "--no-tls",
            "--listen",
            "127.0.0.1:0",
            "--kv",
            backend,
            "--kv-ca",
            ca.to_str().unwrap(),
        ];
        let out = wedge(&args, &dir);
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        assert_eq!(out.status.code(), Some(2), "{stderr}");
        stderr
    };
    let missing = dir.join("absent.pem");
    let stderr = serve(&redis.tls_url(), &missing);
    let why = format!("--kv-ca: cannot read {}", missing.display());
    assert!(stderr.contains(&why), "{stderr}");
    let stderr = serve(&redis.tls_url(), &not_pem);
    let why = format!("--kv-ca: {} holds no PEM certificate", not_pem.display());
    assert!(stderr.contains(&why), "{stderr}");
    let stderr = serve(&redis.url(), &ca);
    assert!(
        stderr.contains("is for a `rediss://` backend, not `redis://"),
        "{stderr}"
    );

    let path = config(&format!(
        "[[app]]\nname = \"private\"\ncomponent = \"{{probe}}\"\nroutes = [\"/\"]\n\
         [app.keyvalue]\nbackend = \"{}\"\nca = \"{}\"\n",
        redis.tls_url(),
        not_pem.display()
    ));
    let out = wedge(&["serve", "--config", path.to_str().unwrap()], &dir);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_ne!(out.status.code(), Some(0), "{stderr}");
    let why = format!(
        "app `private`: keyvalue.ca: {} holds no PEM",
        not_pem.display()
    );
    assert!(stderr.contains(&why), "{stderr}");
}
