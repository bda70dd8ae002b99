//! OCI distribution against a real registry on loopback (Debian's `docker-registry`,
//! started by each test on a free port): `wedge push`, serving `oci://` references by
//! tag and by digest (command line, wedge.toml, admin API), digests checked on pull
//! and in the cache, and an app that keeps serving when its registry goes away.

use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::Duration;

use support::{Server, curl, example, poll_until, sha256, temp_dir, wedge};

/// Where Debian's `docker-registry` package installs the registry.
const REGISTRY_BIN: &str = "/usr/bin/docker-registry";
const HELLO: &str = "Hello, world!\n";
const RAW: &str = "Hello from a raw component!\n";
const TOKEN: &str = "oci-test-token-0123456789";

/// A `docker-registry` serving plain HTTP on 127.0.0.1, its storage in a temp dir;
/// killed on drop.
struct Registry {
    child: Option<Child>,
    /// `127.0.0.1:PORT`
    addr: String,
    storage: PathBuf,
}

impl Registry {
    fn start() -> Registry {
        assert!(
            Path::new(REGISTRY_BIN).is_file(),
            "{REGISTRY_BIN} is missing: install Debian's registry \
             (`apt-get install -y docker-registry`, as the README's test command does)"
        );
        // A port the kernel just handed out and took back: free unless another
        // process grabs it in between (the readiness poll would then fail loudly).
        let port = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let mut registry = Registry {
            child: None,
            addr: format!("127.0.0.1:{port}"),
            storage: temp_dir("registry"),
        };
        registry.restart();
        registry
    }

    /// Starts the registry (again) on its address and storage; returns once it
    /// answers.
    fn restart(&mut self) {
        assert!(self.child.is_none(), "the registry is running");
        let dir = self.storage.with_extension("run");
        std::fs::create_dir_all(&dir).unwrap();
        let config = dir.join("config.yml");
        std::fs::write(
            &config,
            format!(
                "version: 0.1\nlog:\n  level: error\nstorage:\n  filesystem:\n    \
                 rootdirectory: {}\nhttp:\n  addr: {}\n",
                self.storage.display(),
                self.addr
            ),
        )
        .unwrap();
        let child = Command::new(REGISTRY_BIN)
            .arg("serve")
            .arg(&config)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(dir.join("registry.log")).unwrap())
            .spawn()
            .expect("starting docker-registry");
        self.child = Some(child);
        let v2 = format!("http://{}/v2/", self.addr);
        poll_until("the registry answering /v2/", || {
            let out = curl(&["-o", "/dev/null", "-w", "%{http_code}", &v2]);
            (out.stdout == b"200").then_some(())
        });
    }

    /// `oci://127.0.0.1:PORT/REST`
    fn reference(&self, rest: &str) -> String {
        format!("oci://{}/{rest}", self.addr)
    }

    /// The registry's copy of blob `hex` (its filesystem storage layout).
    fn blob_file(&self, hex: &str) -> PathBuf {
        self.storage
            .join("docker/registry/v2/blobs/sha256")
            .join(&hex[..2])
            .join(hex)
            .join("data")
    }

    /// The manifest `reference` (tag or digest) of `repository`, as the registry
    /// serves it.
    fn manifest(&self, repository: &str, reference: &str) -> Vec<u8> {
        let url = format!("http://{}/v2/{repository}/manifests/{reference}", self.addr);
        let accept = "Accept: application/vnd.oci.image.manifest.v1+json";
        let out = curl(&["--fail", "-H", accept, &url]);
        assert!(out.status.success(), "GET {url}: {}", text(&out.stderr));
        out.stdout
    }

    /// Kills the registry and waits until its port refuses connections.
    fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
        let addr = self.addr.clone();
        poll_until("the registry's port closing", || {
            std::net::TcpStream::connect(&addr).is_err().then_some(())
        });
    }
}

impl Drop for Registry {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// `wedge push WASM REFERENCE`, which must succeed; the digest it printed.
fn push(wasm: &Path, reference: &str) -> String {
    let out = wedge(
        &["push", &wasm.display().to_string(), reference],
        &temp_dir("push-data"),
    );
    assert!(
        out.status.success(),
        "wedge push failed: {}",
        text(&out.stderr)
    );
    let digest = text(&out.stdout).trim().to_string();
    assert!(
        digest.starts_with("sha256:") && digest.len() == 7 + 64,
        "wedge push printed {digest:?}"
    );
    digest
}

/// `wedge serve TARGET` (cleartext, a free port) expected to fail: its output. One
/// that serves instead fails the test as soon as it prints its start-up line.
fn serve_fails(target: &str, args: &[&str], data_dir: &Path) -> Output {
    let mut child = support::wedge_command()
        .args(["serve", target, "--listen", "127.0.0.1:0", "--no-tls"])
        .args(args)
        .env("WEDGE_DATA_DIR", data_dir)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("starting wedge");
    // A bound, not a synchronisation: a wedge stuck for this long is killed (its
    // stdout then ends) and the test fails below.
    let (done, watchdog) = std::sync::mpsc::channel::<()>();
    let pid = child.id().to_string();
    std::thread::spawn(move || {
        if watchdog.recv_timeout(Duration::from_secs(120)).is_err() {
            let _ = Command::new("kill").arg(&pid).status();
        }
    });
    // The first line on stdout is the start-up line; none (end of file) means it exited.
    let mut first = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut first)
        .unwrap();
    if !first.is_empty() {
        let _ = child.kill();
        let out = child.wait_with_output().unwrap();
        panic!(
            "wedge serve {target} served ({}) instead of refusing; log: {}",
            first.trim(),
            text(&out.stderr)
        );
    }
    let out = child.wait_with_output().unwrap();
    let _ = done.send(());
    assert_eq!(
        out.status.code(),
        Some(2),
        "wedge serve {target} should exit with 2; stderr: {}",
        text(&out.stderr)
    );
    out
}

fn body(server: &Server) -> String {
    let out = curl(&[&format!("{}/", server.url)]);
    assert!(out.status.success(), "curl: {}", text(&out.stderr));
    text(&out.stdout)
}

#[test]
fn push_writes_the_wasm_artifact_layout_and_serves_by_tag_and_by_digest() {
    let registry = Registry::start();
    let hello = example("hello");
    let digest = push(&hello, &format!("{}/apps/hello:v1", registry.addr));

    // The layout `wkg oci push` writes: an OCI manifest, the wasm config, one
    // application/wasm layer holding the component's very bytes.
    let manifest = registry.manifest("apps/hello", "v1");
    assert_eq!(format!("sha256:{}", sha256(&manifest)), digest);
    let manifest: serde_json::Value = serde_json::from_slice(&manifest).unwrap();
    assert_eq!(
        manifest["mediaType"],
        "application/vnd.oci.image.manifest.v1+json"
    );
    assert_eq!(
        manifest["config"]["mediaType"],
        "application/vnd.wasm.config.v0+json"
    );
    let layers = manifest["layers"].as_array().unwrap();
    assert_eq!(layers.len(), 1, "{manifest}");
    assert_eq!(layers[0]["mediaType"], "application/wasm");
    let wasm = std::fs::read(&hello).unwrap();
    assert_eq!(layers[0]["digest"], format!("sha256:{}", sha256(&wasm)));
    assert_eq!(layers[0]["size"], wasm.len());

    // By tag: resolved to the digest pushed, which is what runs.
    let by_tag = Server::start(
        Path::new(&registry.reference("apps/hello:v1")),
        &["--no-tls"],
    );
    assert_eq!(body(&by_tag), HELLO);
    by_tag.wait_for_log(&format!(
        "app `hello`: {} resolved to {digest}",
        registry.reference("apps/hello:v1")
    ));

    // By digest, with a data dir of its own (nothing cached).
    let pinned = registry.reference(&format!("apps/hello@{digest}"));
    let by_digest = Server::start(Path::new(&pinned), &["--no-tls"]);
    assert_eq!(body(&by_digest), HELLO);
    by_digest.wait_for_log(&format!("{pinned} resolved to {digest}"));
}

/// A `wasm32-wasip1` module that embeds the wasi:http world is pushed as it is
/// (`wedge push` checks it loads: made a component) and served by reference, made a
/// component as it is loaded (see tests/e2e/core_modules.rs).
#[test]
fn a_wasip1_module_is_pushed_and_served_by_reference() {
    let registry = Registry::start();
    let module = example("wasip1_handler");
    let digest = push(&module, &format!("{}/apps/module:v1", registry.addr));
    let manifest: serde_json::Value =
        serde_json::from_slice(&registry.manifest("apps/module", "v1")).unwrap();
    let wasm = std::fs::read(&module).unwrap();
    assert_eq!(
        manifest["layers"][0]["digest"],
        format!("sha256:{}", sha256(&wasm))
    );
    let server = Server::start(
        Path::new(&registry.reference("apps/module:v1")),
        &["--no-tls"],
    );
    assert_eq!(body(&server), "Hello from a wasm32-wasip1 module!\n");
    let log = server.wait_for_log(&format!("resolved to {digest}"));
    assert!(log.contains("(a wasm module, componentized"), "{log}");
}

/// A WAGI program (`wedge push --wagi` checks it as one) served by reference with
/// `--wagi` (tests/e2e/wagi.rs has the rest).
#[test]
fn a_wagi_program_is_pushed_and_served_by_reference() {
    let registry = Registry::start();
    let reference = format!("{}/apps/cgi:v1", registry.addr);
    let program = example("wagi").display().to_string();
    let refused = wedge(&["push", &program, &reference], &temp_dir("push-data"));
    assert!(!refused.status.success(), "pushed as a wasi:http handler");
    let out = wedge(
        &["push", &program, &reference, "--wagi"],
        &temp_dir("push-data"),
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    let server = Server::start(
        Path::new(&registry.reference("apps/cgi:v1")),
        &["--no-tls", "--wagi"],
    );
    assert_eq!(body(&server), "Hello from a WAGI program!\n");
}

#[test]
fn a_wrong_digest_or_a_tampered_layer_is_refused_naming_the_reference() {
    let registry = Registry::start();
    let hello = example("hello");
    push(&hello, &format!("{}/hello:v1", registry.addr));

    // A digest the registry has no manifest for.
    let wrong = registry.reference(&format!("hello@sha256:{}", "0".repeat(64)));
    let out = serve_fails(&wrong, &[], &temp_dir("wrong"));
    let stderr = text(&out.stderr);
    assert!(stderr.starts_with("error: "), "{stderr}");
    assert!(
        stderr.contains(&wrong),
        "the error names the reference: {stderr}"
    );
    assert!(stderr.contains("fetching the manifest failed"), "{stderr}");

    // The registry's copy of the component replaced by another component: its bytes
    // no longer hash to the digest the manifest names.
    let layer = sha256(&std::fs::read(&hello).unwrap());
    std::fs::copy(example("echo"), registry.blob_file(&layer)).unwrap();
    let tagged = registry.reference("hello:v1");
    let data = temp_dir("tampered");
    let out = serve_fails(&tagged, &[], &data);
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains(&tagged),
        "the error names the reference: {stderr}"
    );
    assert!(stderr.contains(&format!("sha256:{layer}")), "{stderr}");
    // Nothing unverified was cached.
    assert!(!data.join("oci/sha256").join(&layer).exists());
}

#[test]
fn a_registry_that_goes_away_after_the_pull_does_not_stop_serving() {
    let mut registry = Registry::start();
    let digest = push(&example("hello"), &format!("{}/hello:v1", registry.addr));
    let tagged = registry.reference("hello:v1");
    let dir = temp_dir("gone");
    let config = dir.join("wedge.toml");
    let toml = format!(
        "listen = \"127.0.0.1:0\"\n[[app]]\nname = \"hello\"\ncomponent = \"{tagged}\"\nroutes = [\"/\"]\n"
    );
    std::fs::write(&config, &toml).unwrap();
    let server = Server::start_config(&config, &[]);
    assert_eq!(body(&server), HELLO);

    registry.stop();
    assert_eq!(body(&server), HELLO);
    // A reload resolves the tag again: refused while the registry is away, and the
    // version loaded keeps serving.
    std::fs::write(&config, format!("{toml}\n")).unwrap();
    let log = server.wait_for_log("config reload refused");
    let refusal = log
        .lines()
        .find(|l| l.contains("config reload refused"))
        .unwrap();
    assert!(refusal.contains(&tagged), "{refusal}");
    assert!(
        refusal.contains("fetching the manifest failed"),
        "{refusal}"
    );
    assert_eq!(body(&server), HELLO);

    // A new wedge with the same data dir serves the digest from its cache, without
    // the registry; a tag needs the registry and says so.
    let data = temp_dir("gone-data");
    let pinned = registry.reference(&format!("hello@{digest}"));
    {
        // Fill the cache while the registry is up.
        registry.restart();
        let first = Server::start_in(Path::new(&pinned), &["--no-tls"], &data);
        assert_eq!(body(&first), HELLO);
        registry.stop();
    }
    let cached = Server::start_in(Path::new(&pinned), &["--no-tls"], &data);
    assert_eq!(body(&cached), HELLO);
    cached.wait_for_log(&format!("{pinned} resolved to {digest} (component sha256:"));
    cached.wait_for_log(", from the cache)");
    drop(cached);
    let out = serve_fails(&tagged, &[], &data);
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains(&tagged) && stderr.contains("fetching the manifest failed"),
        "{stderr}"
    );
}

#[test]
fn a_cached_component_changed_on_disk_is_not_served() {
    let mut registry = Registry::start();
    let hello = example("hello");
    let digest = push(&hello, &format!("{}/hello:v1", registry.addr));
    let pinned = registry.reference(&format!("hello@{digest}"));
    let data = temp_dir("cache-tamper");
    let first = Server::start_in(Path::new(&pinned), &["--no-tls"], &data);
    assert_eq!(body(&first), HELLO);
    drop(first);

    // Another component in the cache under hello's digest; the registry away, so
    // only the cache could serve it.
    let layer = sha256(&std::fs::read(&hello).unwrap());
    let cached = data.join("oci/sha256").join(&layer);
    assert!(cached.is_file(), "the component is cached by its digest");
    std::fs::copy(example("echo"), &cached).unwrap();
    registry.stop();
    let out = serve_fails(&pinned, &[], &data);
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains(&format!(
            "hashes to sha256:{}",
            sha256(&std::fs::read(example("echo")).unwrap())
        )),
        "{stderr}"
    );
    assert!(
        stderr.contains(&pinned) && stderr.contains("fetching the manifest failed"),
        "{stderr}"
    );
    assert!(!cached.exists(), "the changed blob is dropped");

    // With the registry back, it is pulled again and served.
    registry.restart();
    let again = Server::start_in(Path::new(&pinned), &["--no-tls"], &data);
    assert_eq!(body(&again), HELLO);
    assert_eq!(sha256(&std::fs::read(&cached).unwrap()), layer);
}

#[test]
fn the_admin_api_deploys_an_oci_reference_and_restores_it() {
    let registry = Registry::start();
    let digest = push(&example("hello"), &format!("{}/hello:v1", registry.addr));
    let dir = temp_dir("admin");
    std::fs::write(dir.join("token"), TOKEN).unwrap();
    let config = dir.join("wedge.toml");
    std::fs::write(
        &config,
        "listen = \"127.0.0.1:0\"\nadmin = \"127.0.0.1:0\"\nadmin_token_file = \"token\"\n",
    )
    .unwrap();
    let data = temp_dir("admin-data");
    let data_arg = data.display().to_string();
    let start = || Server::start_config(&config, &["--data-dir", &data_arg]);
    let server = start();
    let admin = server.admin_url();
    let token_file = dir.join("token").display().to_string();
    let tagged = registry.reference("hello:v1");
    let deploy = |reference: &str| {
        wedge(
            &[
                "deploy",
                "hello",
                reference,
                "--admin",
                &admin,
                "--token-file",
                &token_file,
                "--route",
                "/",
            ],
            &data,
        )
    };
    let out = deploy(&tagged);
    assert!(out.status.success(), "wedge deploy: {}", text(&out.stderr));
    assert!(
        text(&out.stdout).starts_with("deployed `hello`"),
        "{}",
        text(&out.stdout)
    );
    assert_eq!(body(&server), HELLO);
    server.wait_for_log(&format!("app `hello`: {tagged} resolved to {digest}"));

    // A deploy naming a digest the registry does not have is refused with the
    // reference named; the version deployed keeps serving.
    let wrong = registry.reference(&format!("hello@sha256:{}", "1".repeat(64)));
    let out = deploy(&wrong);
    assert_eq!(out.status.code(), Some(2));
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains("(400 Bad Request)") && stderr.contains(&wrong),
        "{stderr}"
    );
    assert_eq!(body(&server), HELLO);

    // The same tag deployed again is resolved again: it picks up what was pushed.
    let moved = push(&example("raw"), &format!("{}/hello:v1", registry.addr));
    let out = deploy(&tagged);
    assert!(out.status.success(), "wedge deploy: {}", text(&out.stderr));
    assert_eq!(body(&server), RAW);
    server.wait_for_log(&format!("app `hello`: {tagged} resolved to {moved}"));

    // The tag moves on. A config reload leaves deployed apps as they were deployed:
    // it does not resolve their tags again.
    push(&example("hello"), &format!("{}/hello:v1", registry.addr));
    support::sighup(server.pid());
    server.wait_for_log("config reloaded: 0 configured app(s) serving");
    assert_eq!(body(&server), RAW);

    // The deploy is kept in the data dir, pinned to the digest it resolved to: a
    // restart serves that too.
    drop(server);
    let restarted = start();
    assert_eq!(body(&restarted), RAW);
    restarted.wait_for_log(&format!("@{moved} resolved to {moved}"));
}

#[test]
fn a_registry_that_trickles_is_cut_off_at_registry_deadline() {
    // Answers every request with a manifest that never ends: a byte every 100 ms,
    // each well within --registry-timeout.
    let trickle = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = trickle.local_addr().unwrap();
    std::thread::spawn(move || {
        for stream in trickle.incoming().take(8) {
            let Ok(mut stream) = stream else { return };
            std::thread::spawn(move || {
                let mut request = BufReader::new(stream.try_clone().unwrap());
                let mut line = String::new();
                while request.read_line(&mut line).is_ok_and(|n| n > 2) {
                    line.clear();
                }
                let head = "HTTP/1.1 200 OK\r\ncontent-type: application/vnd.oci.image.manifest.v1+json\r\n\
                            transfer-encoding: chunked\r\n\r\n";
                if stream.write_all(head.as_bytes()).is_err() {
                    return;
                }
                // Bounded: 2 minutes at most, or until wedge hangs up.
                for _ in 0..1200 {
                    if stream.write_all(b"1\r\n \r\n").is_err() {
                        return;
                    }
                    std::thread::sleep(Duration::from_millis(100));
                }
            });
        }
    });
    let reference = format!("oci://{addr}/hello:v1");
    let out = serve_fails(
        &reference,
        &["--registry-timeout", "10s", "--registry-deadline", "1s"],
        &temp_dir("trickle"),
    );
    let stderr = text(&out.stderr);
    assert!(stderr.contains(&reference), "{stderr}");
    assert!(
        stderr.contains("the pull took longer than --registry-deadline (1s)"),
        "{stderr}"
    );
}

#[test]
fn a_component_larger_than_registry_max_size_is_refused() {
    let registry = Registry::start();
    push(&example("hello"), &format!("{}/hello:v1", registry.addr));
    let tagged = registry.reference("hello:v1");
    let out = serve_fails(&tagged, &["--registry-max-size", "1KiB"], &temp_dir("max"));
    let stderr = text(&out.stderr);
    assert!(stderr.contains(&tagged), "{stderr}");
    assert!(
        stderr.contains("more than --registry-max-size (1024 bytes)"),
        "{stderr}"
    );
}

#[test]
fn an_unreachable_or_silent_registry_is_a_clear_error() {
    // Nothing listens on a port just handed out and closed.
    let closed = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let reference = format!("oci://{closed}/hello:v1");
    let out = serve_fails(&reference, &[], &temp_dir("unreachable"));
    let stderr = text(&out.stderr);
    assert!(stderr.contains(&reference), "{stderr}");
    assert!(
        stderr.contains("fetching the manifest failed") && stderr.contains("onnection refused"),
        "{stderr}"
    );

    // One that accepts and never answers: bounded by --registry-timeout.
    let silent = TcpListener::bind("127.0.0.1:0").unwrap();
    let reference = format!("oci://{}/hello:v1", silent.local_addr().unwrap());
    let out = serve_fails(
        &reference,
        &["--registry-timeout", "1s"],
        &temp_dir("silent"),
    );
    let stderr = text(&out.stderr);
    assert!(stderr.contains(&reference), "{stderr}");
    assert!(stderr.contains("timed out"), "{stderr}");
    drop(silent);
}

#[test]
fn push_refuses_what_wedge_could_not_serve() {
    let dir = temp_dir("push-bad");
    let bad = dir.join("not.wasm");
    std::fs::write(&bad, b"not wasm at all").unwrap();
    // No registry needed: the check comes first.
    let out = wedge(
        &["push", &bad.display().to_string(), "127.0.0.1:1/x:v1"],
        &dir,
    );
    assert_eq!(out.status.code(), Some(2));
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains("not.wasm") && stderr.contains("not a WebAssembly file"),
        "{stderr}"
    );
    let out = wedge(
        &[
            "push",
            &example("hello").display().to_string(),
            "127.0.0.1:1/x",
        ],
        &dir,
    );
    assert!(
        text(&out.stderr).contains("give a tag"),
        "{}",
        text(&out.stderr)
    );
}
