//! `wedge dev` in a real browser: headless Chromium, in a network namespace with only
//! a loopback interface (nothing leaves it; Chromium's own background requests fail
//! at once), reaching the dev server by `https://localhost:PORT` as a user would.
//!
//! Needs `chromium` (Debian's package), `unshare` and `nsenter` (util-linux). Without
//! chromium the tests say so and pass, unless `WEDGE_REQUIRE_CHROMIUM=1` (CI), which
//! makes them fail.

use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use base64::Engine as _;
use rcgen::PublicKeyData as _;
use support::{Server, new_crate, repo, temp_dir};

/// How long one Chromium run may take (start, load, quit). A bound, not a wait.
const CHROMIUM_TIMEOUT: Duration = Duration::from_secs(120);

/// Whether chromium is installed; without it, `None` after saying so (or a panic
/// when `WEDGE_REQUIRE_CHROMIUM` is set).
fn chromium() -> Option<PathBuf> {
    let found = std::env::var_os("PATH").and_then(|path| {
        std::env::split_paths(&path)
            .map(|dir| dir.join("chromium"))
            .find(|candidate| candidate.is_file())
    });
    if found.is_none() {
        assert!(
            std::env::var_os("WEDGE_REQUIRE_CHROMIUM").is_none(),
            "WEDGE_REQUIRE_CHROMIUM is set but chromium is not installed (apt-get install chromium)"
        );
        eprintln!("skipped: chromium is not installed (apt-get install chromium)");
    }
    found
}

/// A network namespace holding only `lo` (up: 127.0.0.1 and ::1), alive while this
/// is. Its holder is `cat` reading a pipe: dropping the pipe ends it.
struct Netns {
    holder: Child,
}

impl Netns {
    fn new() -> Netns {
        // A user namespace too, so that this works without root as well.
        let mut holder = Command::new("unshare")
            .args(["--map-root-user", "--net", "--", "sh", "-c"])
            .arg("ip link set lo up && echo up && exec cat")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("running unshare (util-linux)");
        let mut line = String::new();
        let stdout = holder.stdout.take().unwrap();
        std::io::BufRead::read_line(&mut std::io::BufReader::new(stdout), &mut line).unwrap();
        assert_eq!(
            line.trim(),
            "up",
            "could not make a network namespace with `unshare --map-root-user --net` \
             (a container may forbid it)"
        );
        Netns { holder }
    }

    /// `nsenter` into the namespace, to put before a command.
    fn prefix(&self) -> Vec<String> {
        let pid = self.holder.id().to_string();
        [
            "nsenter",
            "--target",
            &pid,
            "--user",
            "--net",
            "--preserve-credentials",
            "--",
        ]
        .map(String::from)
        .to_vec()
    }

    fn command(&self, program: &Path) -> Command {
        let prefix = self.prefix();
        let mut command = Command::new(&prefix[0]);
        command.args(&prefix[1..]).arg(program);
        command
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        drop(self.holder.stdin.take());
        let _ = self.holder.wait();
    }
}

/// A guest crate of its own (its dependencies fetched: the namespace has no network),
/// answering `/` with `page` and anything else with text.
fn html_crate(tag: &str, page: &str) -> PathBuf {
    let dir = new_crate(&temp_dir(tag), tag);
    std::fs::write(dir.join("src/lib.rs"), html_handler(page)).unwrap();
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let out = Command::new(cargo)
        .arg("fetch")
        .arg("--manifest-path")
        .arg(dir.join("Cargo.toml"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "cargo fetch: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    dir
}

fn html_handler(page: &str) -> String {
    format!(
        r#"use wedge_sdk::{{Request, Response}};

async fn handle(req: Request) -> Response {{
    match req.path() {{
        "/" => Response::html({page:?}),
        path => Response::text(format!("text at {{path}}\n")),
    }}
}}

wedge_sdk::export_handler!(handle);
"#
    )
}

/// `wedge dev DIR` inside `netns`, offline (the crate's dependencies are fetched).
fn dev_in(netns: &Netns, dir: &Path, data_dir: &Path) -> Server {
    let prefix = netns.prefix();
    let mut prefix: Vec<&str> = prefix.iter().map(String::as_str).collect();
    prefix.splice(0..0, ["env", "CARGO_NET_OFFLINE=true"]);
    Server::dev_via(&prefix, dir, &[], data_dir)
}

/// What Chromium needs to trust a dev certificate: the base64 SHA-256 of its public
/// key (SubjectPublicKeyInfo), for `--ignore-certificate-errors-spki-list`.
fn spki_hash(data_dir: &Path) -> String {
    let key = std::fs::read_to_string(data_dir.join("tls/dev-key.pem")).unwrap();
    let spki = rcgen::KeyPair::from_pem(&key)
        .unwrap()
        .subject_public_key_info();
    use sha2::Digest;
    base64::engine::general_purpose::STANDARD.encode(sha2::Sha256::digest(spki))
}

/// Headless Chromium in `netns` with its own profile, trusting the dev certificate
/// of `data_dir`, with `args`; in a process group of its own, to be ended whole.
fn chromium_command(chromium: &Path, netns: &Netns, data_dir: &Path, args: &[&str]) -> Command {
    let profile = temp_dir("chromium-profile");
    let mut command = netns.command(chromium);
    command
        .args([
            "--headless",
            "--no-sandbox",
            "--no-first-run",
            "--disable-gpu",
        ])
        .arg(format!("--user-data-dir={}", profile.display()))
        .arg(format!(
            "--ignore-certificate-errors-spki-list={}",
            spki_hash(data_dir)
        ))
        // Chromium speaks QUIC only to certificates of public roots, or to hosts named
        // here (chromium's hostnames_to_allow_unknown_roots). Naming localhost on a port
        // nothing serves trusts the dev certificate for QUIC without forcing QUIC on
        // the server's origin: it is reached by Alt-Svc, as without the flag.
        .arg("--origin-to-force-quic-on=localhost:1")
        .arg("--enable-quic")
        .args(args)
        .process_group(0)
        .stdin(Stdio::null());
    command
}

/// A Chromium left running (on a page), ended with its process group when dropped.
struct Open(Child);

impl Drop for Open {
    fn drop(&mut self) {
        let _ = Command::new("kill")
            .args(["-KILL", "--", &format!("-{}", self.0.id())])
            .status();
        let _ = self.0.wait();
    }
}

/// Chromium opening `url` and staying on it (it does until killed).
fn open_chromium(chromium: &Path, netns: &Netns, data_dir: &Path, url: &str) -> Open {
    let child = chromium_command(chromium, netns, data_dir, &[url])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("running chromium");
    Open(child)
}

/// Chromium run with `args` to its end (bounded).
fn run_chromium(chromium: &Path, netns: &Netns, data_dir: &Path, args: &[&str]) -> Output {
    let mut child = chromium_command(chromium, netns, data_dir, args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("running chromium");
    let stdout = child.stdout.take().unwrap();
    let stderr = child.stderr.take().unwrap();
    let read = |mut pipe: Box<dyn std::io::Read + Send>| {
        std::thread::spawn(move || {
            let mut bytes = Vec::new();
            let _ = pipe.read_to_end(&mut bytes);
            bytes
        })
    };
    let (stdout, stderr) = (read(Box::new(stdout)), read(Box::new(stderr)));
    let mut child = Open(child);
    let deadline = Instant::now() + CHROMIUM_TIMEOUT;
    let status = loop {
        if let Some(status) = child.0.try_wait().unwrap() {
            break status;
        }
        assert!(
            Instant::now() < deadline,
            "chromium {args:?} did not finish within {CHROMIUM_TIMEOUT:?}"
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    drop(child);
    Output {
        status,
        stdout: stdout.join().unwrap(),
        stderr: stderr.join().unwrap(),
    }
}

/// A page that fetches `/ping?N` (synchronously, so the page loads only once they are
/// done) until one comes over HTTP/3, at most 50 times, and writes each one's
/// protocol (Resource Timing's nextHopProtocol) into `#out`, after the page's own.
const PROTOCOL_PROBE: &str = r#"<!DOCTYPE html>
<html><head><title>probe</title></head><body><p id="out">running</p>
<script>
const seen = [];
for (let i = 0; i < 50 && seen.at(-1) !== 'h3'; i++) {
  const url = new URL('/ping?' + i, location).href;
  const xhr = new XMLHttpRequest();
  xhr.open('GET', url, false);
  xhr.send();
  const [entry] = performance.getEntriesByName(url);
  performance.clearResourceTimings();
  seen.push(entry ? entry.nextHopProtocol : 'unknown');
}
const page = performance.getEntriesByType('navigation')[0].nextHopProtocol;
document.getElementById('out').textContent = 'page:' + page + ' pings:' + seen.join(',');
</script></body></html>
"#;

#[test]
fn chromium_reaches_the_dev_server_over_h2_then_h3_by_alt_svc() {
    let Some(chromium) = chromium() else { return };
    let dir = html_crate("browserh3", PROTOCOL_PROBE);
    let netns = Netns::new();
    let data_dir = temp_dir("browser-data");
    let server = dev_in(&netns, &dir, &data_dir);
    let url = server.tls_url.clone().expect("a TLS URL");
    assert!(url.starts_with("https://localhost:"), "{url}");

    let out = run_chromium(
        &chromium,
        &netns,
        &data_dir,
        &["--dump-dom", &format!("{url}/")],
    );
    let dom = String::from_utf8_lossy(&out.stdout);
    let result = dom
        .split_once("<p id=\"out\">")
        .and_then(|(_, rest)| rest.split_once('<'))
        .map(|(text, _)| text)
        .unwrap_or_else(|| {
            panic!(
                "no result in chromium's DOM ({}):\n{dom}\n{}",
                out.status,
                String::from_utf8_lossy(&out.stderr)
            )
        });
    // The first request learns of HTTP/3 from Alt-Svc over h2; a later one uses it.
    assert!(result.starts_with("page:h2 pings:"), "{result}");
    assert!(
        result.ends_with(",h3") || result.ends_with(":h3"),
        "{result}"
    );
    // The server saw both: its access log names each request's protocol.
    let log = server.log();
    let protocols = |path: &str| -> Vec<&str> {
        log.lines()
            .filter(|line| line.contains(&format!("GET {path} ")))
            .filter_map(|line| line.split_whitespace().last())
            .collect()
    };
    assert_eq!(protocols("/"), ["h2"], "{log}");
    assert!(protocols("/ping").contains(&"h3"), "{log}");
}

/// A page of the app, with an end of body for the banner.
const PAGE: &str = "<!DOCTYPE html><html><head><title>greeter</title></head>\
<body style=\"font-family:sans-serif\"><h1>Hello from the app</h1>\
<p>The last version that built.</p></body></html>";

/// How often `needle` is in `log` after its first line containing `after`.
fn count_after(log: &str, after: &str, needle: &str) -> usize {
    log.lines()
        .skip_while(|line| !line.contains(after))
        .filter(|line| line.contains(needle))
        .count()
}

#[test]
fn a_broken_build_shows_in_chromium_and_its_pages_reload_once_it_is_fixed() {
    let Some(chromium) = chromium() else { return };
    let dir = html_crate("browserbroken", PAGE);
    let netns = Netns::new();
    let data_dir = temp_dir("browser-data");
    let server = dev_in(&netns, &dir, &data_dir);
    let url = server.tls_url.clone().expect("a TLS URL");

    // An unknown name and a format argument too many: two errors, one help.
    let broken = html_handler(PAGE).replace(
        "format!(\"text at {path}\\n\")",
        "format!(\"text at {path}\\n\", missing)",
    );
    assert_ne!(broken, html_handler(PAGE));
    std::fs::write(dir.join("src/lib.rs"), &broken).unwrap();
    server.wait_for_log("still serving the last version that built");

    // The error page and the app's page with its banner, as a browser draws them.
    let shots = repo().join("target/browser");
    std::fs::create_dir_all(&shots).unwrap();
    for (path, file, size) in [
        ("/_wedge/build", "dev-overlay.png", "1200,800"),
        ("/", "dev-banner.png", "1200,400"),
    ] {
        let png = shots.join(file);
        let _ = std::fs::remove_file(&png);
        let screenshot = format!("--screenshot={}", png.display());
        let window = format!("--window-size={size}");
        let page = format!("{url}{path}");
        let out = run_chromium(
            &chromium,
            &netns,
            &data_dir,
            &["--hide-scrollbars", &screenshot, &window, &page],
        );
        let bytes = std::fs::read(&png).unwrap_or_else(|err| {
            panic!(
                "no screenshot of {path} ({err}): {}",
                String::from_utf8_lossy(&out.stderr)
            )
        });
        assert!(bytes.starts_with(b"\x89PNG"), "{}", png.display());
        eprintln!("screenshot of {path}: {}", png.display());
    }
    // What they showed, in the DOM.
    let dom = |path: &str| {
        let out = run_chromium(
            &chromium,
            &netns,
            &data_dir,
            &["--dump-dom", &format!("{url}{path}")],
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let page = dom("/_wedge/build");
    assert!(
        page.contains("<h1>browserbroken failed to build</h1>"),
        "{page}"
    );
    assert!(
        page.contains("cannot find value `missing` in this scope"),
        "{page}"
    );
    assert!(page.contains("<span class=\"loc\">src/lib.rs:"), "{page}");
    let app = dom("/");
    assert!(app.contains("<h1>Hello from the app</h1>"), "{app}");
    assert!(app.contains("id=\"wedge-build-failed\""), "{app}");
    assert!(app.contains("browserbroken failed to build"), "{app}");

    // Two tabs left open on them; once both loaded, the fix.
    let loads = |path: &str| {
        let needle = format!("GET {path} 200");
        server
            .log()
            .lines()
            .filter(|line| line.contains(&needle))
            .count()
    };
    let (build_before, app_before) = (loads("/_wedge/build"), loads("/"));
    let _build_tab = open_chromium(&chromium, &netns, &data_dir, &format!("{url}/_wedge/build"));
    let _app_tab = open_chromium(&chromium, &netns, &data_dir, &format!("{url}/"));
    support::poll_until("both tabs loaded", || {
        (loads("/_wedge/build") > build_before && loads("/") > app_before).then_some(())
    });
    let fixed = PAGE.replace("The last version that built.", "Fixed.");
    std::fs::write(dir.join("src/lib.rs"), html_handler(&fixed)).unwrap();
    server.wait_for_log("reloaded `browserbroken`");
    // Told by the event stream, each tab loads its page again, unasked.
    support::poll_until("both tabs reloaded", || {
        let log = server.log();
        let after = "reloaded `browserbroken`";
        (count_after(&log, after, "GET /_wedge/build 200") >= 1
            && count_after(&log, after, "GET / 200") >= 1)
            .then_some(())
    });
    let app = dom("/");
    assert!(app.contains("<p>Fixed.</p>"), "{app}");
    assert!(!app.contains("wedge-build-failed"), "{app}");
}
