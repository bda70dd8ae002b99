//! What wedge's tests share (the end-to-end tests in tests/e2e and the in-process
//! ones in runtime/tests): the example components (built once per run), a running
//! `wedge` process on 127.0.0.1, and curl here; a module per concern below. A crate
//! of its own, which the tests use as `support`: built once for every test binary.

use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Output, Stdio};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

pub mod admin;
pub mod dev;
pub mod engine;
pub mod faults;
pub mod h2;
pub mod h3;
pub mod js;
pub mod metered;
mod never_reading;
pub mod protocols;
pub mod redis;

pub use never_reading::{Connection, assert_reset, never_reading};

/// The repository root (this crate is its tests/support).
pub fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .ancestors()
        .nth(2)
        .unwrap()
        .to_path_buf()
}

/// The `wedge` binary under test: cargo's build, or `$WEDGE_TEST_BIN` (to run
/// the tests against another build, e.g. one without a fix). Cargo names the binary
/// to its own package's tests only (`CARGO_BIN_EXE_wedge`), so this crate finds it as
/// they would: the test runs from `target/<profile>/deps`, the binary is built (for
/// every integration test of its package) in `target/<profile>`.
pub fn wedge_bin() -> PathBuf {
    std::env::var_os("WEDGE_TEST_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            let test = std::env::current_exe().expect("the test's own path");
            let profile = test
                .parent()
                .and_then(Path::parent)
                .expect("target/<profile>/deps");
            profile.join(format!("wedge{}", std::env::consts::EXE_SUFFIX))
        })
}

/// A command running the wedge under test. Guest crates it builds (`serve DIR`,
/// `dev`) go to one target dir of their own, so dependencies build once per run
/// and `examples/target`, which [`example`] reads, is never written under a running
/// test: a crate built alone unifies its dependencies' features differently from
/// the examples' workspace build, so a rebuild there changes the artifacts' bytes.
pub fn wedge_command() -> Command {
    let mut command = Command::new(wedge_bin());
    command.env("CARGO_TARGET_DIR", guest_target_dir());
    command
}

fn guest_target_dir() -> PathBuf {
    repo().join("target/guest-tests")
}

/// The examples built for `wasm32-wasip1` (core modules, which wedge componentizes
/// on load), by package name; the others are built for `wasm32-wasip2`.
const WASIP1_EXAMPLES: &[&str] = &["wasip1-handler", "wagi"];

/// Path of an example component (or, for the `wasm32-wasip1` ones, module), building
/// all examples the first time any test asks. `name` is the `.wasm` file's (a
/// library's `-` as `_`). The build runs once per `cargo test` run: later calls (and
/// other test binaries, serialised by a file lock) find cargo's output up to date.
pub fn example(name: &str) -> PathBuf {
    static BUILT: OnceLock<PathBuf> = OnceLock::new();
    let target_dir = BUILT.get_or_init(build_examples);
    let wasip1 = WASIP1_EXAMPLES
        .iter()
        .any(|package| package.replace('-', "_") == name.replace('-', "_"));
    let target = if wasip1 {
        "wasm32-wasip1"
    } else {
        "wasm32-wasip2"
    };
    let path = target_dir.join(format!("{target}/release/{name}.wasm"));
    assert!(
        path.is_file(),
        "example {name} was not built: {}",
        path.display()
    );
    path
}

/// Builds the examples into `examples/target` (returned): most for `wasm32-wasip2`,
/// [`WASIP1_EXAMPLES`] for `wasm32-wasip1`.
fn build_examples() -> PathBuf {
    let repo = repo();
    let target_dir = repo.join("examples/target");
    std::fs::create_dir_all(&target_dir).unwrap();
    let lock = std::fs::File::create(target_dir.join(".wedge-tests.lock")).unwrap();
    lock.lock().unwrap();
    let wasip2: Vec<&str> = ["--workspace"]
        .into_iter()
        .chain(WASIP1_EXAMPLES.iter().flat_map(|p| ["--exclude", p]))
        .collect();
    let wasip1: Vec<&str> = WASIP1_EXAMPLES.iter().flat_map(|p| ["-p", p]).collect();
    for (target, packages) in [("wasm32-wasip2", wasip2), ("wasm32-wasip1", wasip1)] {
        build_examples_for(target, &packages, &target_dir);
    }
    target_dir
}

fn build_examples_for(target: &str, packages: &[&str], target_dir: &Path) {
    let rustup = Command::new("rustup")
        .args(["target", "add", target])
        .output();
    if let Ok(out) = rustup {
        assert!(
            out.status.success(),
            "rustup target add {target} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let out = Command::new(cargo)
        .args(["build", "--release", "--target", target])
        .args(packages)
        .arg("--manifest-path")
        .arg(repo().join("examples/Cargo.toml"))
        // Where `example` looks, whatever CARGO_TARGET_DIR the tests run with.
        .arg("--target-dir")
        .arg(target_dir)
        .output()
        .expect("running cargo to build the examples");
    assert!(
        out.status.success(),
        "building the examples for {target} failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The body of the `stream` examples (`stream`, `p3-probe`'s `…/stream`): 8 × 1 KiB,
/// of `a` to `h`.
pub fn streamed() -> Vec<u8> {
    (0..8u8).flat_map(|i| [b'a' + i; 1024]).collect()
}

/// A fresh, empty data directory for one wedge process.
pub fn temp_dir(tag: &str) -> PathBuf {
    static COUNTER: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let n = COUNTER.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let dir = std::env::temp_dir().join(format!("wedge-test-{}-{tag}-{n}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// The wedge binary, run through `prefix` if any (`PROGRAM ARGS... wedge`).
fn prefixed(prefix: &[&str]) -> Command {
    match prefix.split_first() {
        Some((program, rest)) => {
            let mut command = Command::new(program);
            command
                .args(rest)
                .arg(wedge_bin())
                .env("CARGO_TARGET_DIR", guest_target_dir());
            command
        }
        None => wedge_command(),
    }
}

/// A running `wedge serve`, killed on drop.
pub struct Server {
    child: Child,
    /// `http://127.0.0.1:PORT`
    pub url: String,
    /// `https://127.0.0.1:PORT`, unless started with `--no-tls`.
    pub tls_url: Option<String>,
    log: Arc<Mutex<String>>,
    log_reader: Option<std::thread::JoinHandle<()>>,
}

/// How long a server may take to print its URL (compiling a component in a
/// debug build of the tests included). A bound, not a synchronisation.
const START_TIMEOUT: Duration = Duration::from_secs(120);

impl Server {
    /// Starts `wedge serve TARGET --listen 127.0.0.1:0 ARGS...` with its own data dir.
    pub fn start(target: &Path, args: &[&str]) -> Server {
        Self::start_in(target, args, &temp_dir("data"))
    }

    /// Like `start`, with a given data directory (to test what persists).
    pub fn start_in(target: &Path, args: &[&str], data_dir: &Path) -> Server {
        Self::start_via(&[], target, args, data_dir)
    }

    /// Like `start_in`, run through `prefix` (a command that runs the rest
    /// elsewhere, e.g. `unshare ... --` into a mount namespace).
    pub fn start_via(prefix: &[&str], target: &Path, args: &[&str], data_dir: &Path) -> Server {
        let tls_port: &[&str] = if args.contains(&"--no-tls") || args.contains(&"--tls-listen") {
            &[]
        } else {
            &["--tls-listen", "127.0.0.1:0"]
        };
        let mut command = prefixed(prefix);
        command
            .arg("serve")
            .arg(target)
            .args(["--listen", "127.0.0.1:0"])
            .args(tls_port)
            .args(args);
        Self::launch(command, data_dir)
    }

    /// Starts `wedge serve --config FILE ARGS...` (the file names its listeners).
    pub fn start_config(config: &Path, args: &[&str]) -> Server {
        let mut command = wedge_command();
        command.arg("serve").arg("--config").arg(config).args(args);
        Self::launch(command, &temp_dir("data"))
    }

    /// Like `start_config`, logging what the tracing filter `log` lets through
    /// (`WEDGE_LOG`; the others log at `info`).
    pub fn start_config_logging(config: &Path, args: &[&str], log: &str) -> Server {
        let mut command = wedge_command();
        command.arg("serve").arg("--config").arg(config).args(args);
        command.env("WEDGE_LOG", log);
        Self::launch(command, &temp_dir("data"))
    }

    /// Starts `wedge dev DIR --port 0 --tls-port 0 ARGS...`. Guest crates of all
    /// tests build into one target dir (see [`wedge_command`]; give each test's
    /// crate its own name: the component's file is named after it).
    pub fn dev(dir: &Path, args: &[&str]) -> Server {
        Self::dev_via(&[], dir, args, &temp_dir("dev-data"))
    }

    /// Like `dev`, with a given data directory, run through `prefix` (a command that
    /// runs the rest elsewhere, e.g. `nsenter ... --` into a network namespace).
    pub fn dev_via(prefix: &[&str], dir: &Path, args: &[&str], data_dir: &Path) -> Server {
        let mut command = prefixed(prefix);
        command
            .arg("dev")
            .arg(dir)
            .args(["--port", "0", "--tls-port", "0"])
            .args(args);
        Self::launch(command, data_dir)
    }

    /// Runs `wedge serve TARGET --listen 127.0.0.1:0 --no-tls ARGS...` until it
    /// either prints its URL (`Ok`: it serves) or exits (`Err`: its status and log).
    pub fn start_or_exit(target: &Path, args: &[&str]) -> Result<Server, (ExitStatus, String)> {
        let mut command = wedge_command();
        command
            .arg("serve")
            .arg(target)
            .args(["--listen", "127.0.0.1:0", "--no-tls"])
            .args(args);
        Self::try_launch(command, &temp_dir("data"))
    }

    fn launch(command: Command, data_dir: &Path) -> Server {
        match Self::try_launch(command, data_dir) {
            Ok(server) => server,
            Err((status, log)) => panic!("wedge exited ({status}) before serving; log:\n{log}"),
        }
    }

    fn try_launch(mut command: Command, data_dir: &Path) -> Result<Server, (ExitStatus, String)> {
        if !command.get_envs().any(|(key, _)| key == "WEDGE_LOG") {
            command.env("WEDGE_LOG", "info");
        }
        let mut child = command
            .env("WEDGE_DATA_DIR", data_dir)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("starting wedge");
        let log = Arc::new(Mutex::new(String::new()));
        let stderr = child.stderr.take().unwrap();
        let log_reader = {
            let log = log.clone();
            std::thread::spawn(move || {
                for line in BufReader::new(stderr).lines() {
                    let Ok(line) = line else { break };
                    let mut log = log.lock().unwrap();
                    log.push_str(&line);
                    log.push('\n');
                }
            })
        };
        let stdout = child.stdout.take().unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut lines = BufReader::new(stdout).lines();
            while let Some(Ok(line)) = lines.next() {
                let url = |scheme: &str| {
                    line.split_whitespace()
                        .find(|word| word.starts_with(scheme))
                        .map(|word| word.trim_end_matches('/').to_string())
                };
                if let Some(plain) = url("http://") {
                    let _ = tx.send((plain, url("https://")));
                }
            }
        });
        let deadline = std::time::Instant::now() + START_TIMEOUT;
        let (url, tls_url) = loop {
            if std::time::Instant::now() > deadline {
                let _ = child.kill();
                let _ = child.wait();
                panic!("wedge did not print its URL; log:\n{}", log.lock().unwrap());
            }
            // Its stdout closes (the sender goes) when it exits: wait for the exit.
            match rx.recv_timeout(Duration::from_millis(20)) {
                Ok(urls) => break urls,
                Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => {
                    std::thread::sleep(Duration::from_millis(20));
                }
                Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {}
            }
            if let Some(status) = child.try_wait().unwrap() {
                let _ = log_reader.join();
                let log = log.lock().unwrap().clone();
                return Err((status, log));
            }
        };
        Ok(Server {
            child,
            url,
            tls_url,
            log,
            log_reader: Some(log_reader),
        })
    }

    /// What the server logged so far.
    pub fn log(&self) -> String {
        self.log.lock().unwrap().clone()
    }

    /// Waits (bounded) until the log contains `needle`; returns the log.
    pub fn wait_for_log(&self, needle: &str) -> String {
        let deadline = std::time::Instant::now() + Duration::from_secs(60);
        loop {
            let log = self.log();
            if log.contains(needle) {
                return log;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "log never contained {needle:?}:\n{log}"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// The admin API's `http://127.0.0.1:PORT` (`https://` with TLS), once the
    /// server has logged it.
    pub fn admin_url(&self) -> String {
        let log = self.wait_for_log("admin API on http");
        let (_, after) = log.split_once("admin API on ").unwrap();
        let url = after.split_whitespace().next().unwrap();
        url.trim_end_matches('/').to_string()
    }

    /// The process id (to send signals).
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Waits (bounded) for the process to exit; returns its status and full log.
    pub fn wait_exit(mut self, within: Duration) -> (ExitStatus, String) {
        let deadline = std::time::Instant::now() + within;
        let status = loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                break status;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "wedge did not exit within {within:?}"
            );
            std::thread::sleep(Duration::from_millis(20));
        };
        if let Some(reader) = self.log_reader.take() {
            let _ = reader.join();
        }
        (status, self.log())
    }

    /// `host:port`
    pub fn authority(&self) -> &str {
        self.url.trim_start_matches("http://")
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Sends SIGHUP to a process.
pub fn sighup(pid: u32) {
    kill(pid, "-HUP");
}

/// Sends SIGTERM to a process.
pub fn sigterm(pid: u32) {
    kill(pid, "-TERM");
}

/// Sends SIGINT (what Ctrl-C sends) to a process.
pub fn sigint(pid: u32) {
    kill(pid, "-INT");
}

fn kill(pid: u32, signal: &str) {
    let status = Command::new("kill")
        .args([signal, &pid.to_string()])
        .status()
        .unwrap();
    assert!(status.success());
}

/// Runs curl with a bounded total time; returns its output.
pub fn curl(args: &[&str]) -> Output {
    Command::new("curl")
        .args(["--silent", "--show-error", "--max-time", "120"])
        .args(args)
        .output()
        .expect("running curl (install it: apt-get install curl)")
}

/// curl with `args`, the first being its `--write-out` format: what that wrote.
pub fn curl_write_out(args: &[&str]) -> String {
    let out = curl(&[&["-o", "/dev/null", "-w"], args].concat());
    String::from_utf8(out.stdout).unwrap()
}

/// Runs `wedge ARGS` to completion (bounded) and returns its output.
pub fn wedge(args: &[&str], data_dir: &Path) -> Output {
    run_to_exit(wedge_command().args(args), data_dir)
}

/// Like `wedge`, logging what the tracing filter `log` lets through (`WEDGE_LOG`).
pub fn wedge_logging(args: &[&str], data_dir: &Path, log: &str) -> Output {
    run_to_exit(wedge_command().args(args).env("WEDGE_LOG", log), data_dir)
}

fn run_to_exit(command: &mut Command, data_dir: &Path) -> Output {
    let mut child = command
        .env("WEDGE_DATA_DIR", data_dir)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Bounded: every case here exits on its own within seconds.
    let deadline = std::time::Instant::now() + Duration::from_secs(120);
    loop {
        if child.try_wait().unwrap().is_some() {
            break;
        }
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            panic!("{command:?} did not exit");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let mut stdout = Vec::new();
    let mut stderr = Vec::new();
    child
        .stdout
        .take()
        .unwrap()
        .read_to_end(&mut stdout)
        .unwrap();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_end(&mut stderr)
        .unwrap();
    Output {
        status: child.wait().unwrap(),
        stdout,
        stderr,
    }
}

/// Deterministic pseudo-random bytes (xorshift), so failures reproduce.
pub fn pattern(len: usize, seed: u64) -> Vec<u8> {
    let mut x = seed | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

/// Hex SHA-256 of bytes.
pub fn sha256(bytes: &[u8]) -> String {
    use sha2::Digest;
    sha2::Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// Runs `wedge new NAME` in `dir` and returns the crate's directory.
pub fn new_crate(dir: &Path, name: &str) -> PathBuf {
    let out = wedge_command()
        .args(["new", name])
        .current_dir(dir)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "wedge new {name}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    dir.join(name)
}

/// A tool a test needs is missing (`what` says which, and how to install it): says
/// so, and the test passes as skipped; unless the environment variable `require` is
/// set (CI sets it), which makes it fail.
pub fn missing_tool(what: &str, require: &str) {
    assert!(
        std::env::var_os(require).is_none(),
        "{require} is set but {what}"
    );
    eprintln!("skipped: {what}");
}

/// Polls `probe` until it returns `Some` (bounded: a build may be in between).
pub fn poll_until<T>(what: &str, mut probe: impl FnMut() -> Option<T>) -> T {
    let deadline = std::time::Instant::now() + Duration::from_secs(300);
    loop {
        if let Some(found) = probe() {
            return found;
        }
        assert!(std::time::Instant::now() < deadline, "never saw {what}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// A chunked POST to `path` whose body stays open, so an echoing handler keeps its
/// instance until `finish`. `open` returns once the response head arrived, i.e.
/// once the request holds an instance.
pub struct Parked(std::net::TcpStream);

impl Parked {
    pub fn open(server: &Server, path: &str) -> Parked {
        let mut stream = std::net::TcpStream::connect(server.authority()).unwrap();
        write!(
            stream,
            "POST {path} HTTP/1.1\r\nhost: x\r\nconnection: close\r\ntransfer-encoding: chunked\r\n\r\n2\r\nhi\r\n"
        )
        .unwrap();
        let mut status = String::new();
        BufReader::new(stream.try_clone().unwrap())
            .read_line(&mut status)
            .unwrap();
        assert!(status.starts_with("HTTP/1.1 200"), "{status}");
        Parked(stream)
    }

    pub fn finish(mut self) {
        self.0.write_all(b"0\r\n\r\n").unwrap();
    }

    /// Sends `last` as the body's last chunk, ends the body and reads the rest of
    /// the response (the connection closes after it), as sent on the wire.
    pub fn finish_with(mut self, last: &str) -> String {
        write!(self.0, "{:x}\r\n{last}\r\n0\r\n\r\n", last.len()).unwrap();
        self.0
            .set_read_timeout(Some(Duration::from_secs(60)))
            .unwrap();
        let mut rest = String::new();
        self.0.read_to_string(&mut rest).unwrap();
        rest
    }
}
