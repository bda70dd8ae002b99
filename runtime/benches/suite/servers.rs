//! The server processes the suite measures: `wedge serve`, `wasmtime serve`, and this
//! binary's native servers, each started pinned to CPU 1 and read through `/proc`.

use std::fs::File;
use std::io::{BufRead, BufReader, Write};
use std::net::{SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};

use crate::load::Proto;
use crate::{P3_CONCURRENCY, REUSE};

pub enum Kind {
    /// `suite serve ENGINE`.
    Native(&'static str),
    /// `wedge serve examples/COMPONENT.wasm`, cleartext and TLS (h2, h3).
    Wedge {
        component: &'static str,
        reuse: bool,
        /// `--workers`: 1 but in the row that measures two (both pinned to CPU 1 too).
        workers: u32,
        /// `--wagi`: COMPONENT is a WAGI program (a `wasm32-wasip1` module).
        wagi: bool,
        /// `--kv redis://…`: a `redis-server` of its own, started with it (pinned
        /// to CPU 0, beside the load generator: it is not the server measured).
        redis: bool,
    },
    /// `wasmtime serve examples/COMPONENT.wasm` (HTTP/1.1 only; `-Sp3` for a WASI 0.3
    /// component).
    Wasmtime {
        component: &'static str,
        reuse: bool,
    },
}

pub struct ServerSpec {
    pub name: &'static str,
    pub kind: Kind,
}

/// What the servers are started from.
pub struct Paths {
    pub wedge: PathBuf,
    pub wasmtime: PathBuf,
    /// This binary (the native servers).
    pub me: PathBuf,
    /// The folder of the example components.
    pub components: PathBuf,
    /// The folder of the example modules (`wasm32-wasip1`).
    pub modules: PathBuf,
    pub scratch: PathBuf,
    /// Where each wedge keeps its data (its embedded key-value files): on disk, not
    /// in memory as `scratch` is, so that an fsync costs what it costs in service.
    pub data: PathBuf,
}

pub struct Running {
    pub spec: ServerSpec,
    /// As it reads in BENCHMARKS.md.
    pub command: String,
    child: Child,
    plain: u16,
    tls: Option<u16>,
    /// A native server's allocation counter, read through its stdin and stdout.
    probe: Option<(ChildStdin, BufReader<ChildStdout>)>,
    /// The `redis-server` a `redis` wedge uses.
    redis: Option<Child>,
}

impl Running {
    pub fn start(spec: ServerSpec, paths: &Paths) -> Result<Running> {
        let component = |name: &str| paths.components.join(format!("{name}.wasm"));
        let mut command = Command::new("taskset");
        command.args(["-c", "1"]);
        let mut redis = None;
        let (shown, plain, tls) = match spec.kind {
            Kind::Native(engine) => {
                command.arg(&paths.me).args(["serve", engine]);
                command.stdin(Stdio::piped()).stdout(Stdio::piped());
                (format!("suite serve {engine}"), 0, None)
            }
            Kind::Wedge {
                component: c,
                reuse,
                workers,
                wagi,
                redis: with_redis,
            } => {
                let (plain, tls) = (free_port()?, free_port()?);
                let dir = paths.scratch.join(spec.name);
                std::fs::create_dir_all(&dir)?;
                let redis_port = free_port()?;
                if with_redis {
                    redis = Some(start_redis(redis_port, &dir)?);
                }
                let wasm = match wagi {
                    false => component(c),
                    true => paths.modules.join(format!("{c}.wasm")),
                };
                let mut args = vec![
                    "serve".to_string(),
                    wasm.display().to_string(),
                    "--listen".into(),
                    format!("127.0.0.1:{plain}"),
                    "--tls-listen".into(),
                    format!("127.0.0.1:{tls}"),
                    "--workers".into(),
                    workers.to_string(),
                ];
                if reuse {
                    args.extend(["--instance-reuse".into(), REUSE.to_string()]);
                }
                if wagi {
                    args.push("--wagi".into());
                }
                if with_redis {
                    args.extend(["--kv".into(), format!("redis://127.0.0.1:{redis_port}")]);
                }
                if is_p3(c) {
                    args.extend(["--instance-concurrency".into(), P3_CONCURRENCY.to_string()]);
                }
                command
                    .arg(&paths.wedge)
                    .args(&args)
                    .env("WEDGE_DATA_DIR", paths.data.join(spec.name));
                command
                    .stdout(File::create(dir.join("out"))?)
                    .stderr(File::create(dir.join("err"))?);
                let shown = format!("wedge {}", args.join(" "))
                    .replace(
                        &paths.components.display().to_string(),
                        "examples/target/wasm32-wasip2/release",
                    )
                    .replace(
                        &paths.modules.display().to_string(),
                        "examples/target/wasm32-wasip1/release",
                    )
                    .replace(&format!(":{plain}"), ":PORT")
                    .replace(&format!(":{tls}"), ":TLS_PORT")
                    .replace(&format!(":{redis_port}"), ":REDIS_PORT");
                (shown, plain, Some(tls))
            }
            Kind::Wasmtime {
                component: c,
                reuse,
            } => {
                let plain = free_port()?;
                let dir = paths.scratch.join(spec.name);
                std::fs::create_dir_all(&dir)?;
                // `-Scli`: the guests import wasi:cli (environment, stdio).
                let mut args = vec![
                    "serve".to_string(),
                    "-Scli".into(),
                    "--addr".into(),
                    format!("127.0.0.1:{plain}"),
                ];
                if is_p3(c) {
                    args.extend([
                        "-Sp3".into(),
                        "--max-instance-concurrent-reuse-count".into(),
                        P3_CONCURRENCY.to_string(),
                    ]);
                }
                if reuse {
                    args.extend(["--max-instance-reuse-count".into(), REUSE.to_string()]);
                }
                args.push(component(c).display().to_string());
                command.arg(&paths.wasmtime).args(&args);
                command
                    .stdout(File::create(dir.join("out"))?)
                    .stderr(File::create(dir.join("err"))?);
                let shown = format!("wasmtime {}", args.join(" "))
                    .replace(
                        &paths.components.display().to_string(),
                        "examples/target/wasm32-wasip2/release",
                    )
                    .replace(&format!(":{plain}"), ":PORT");
                (shown, plain, None)
            }
        };
        let mut child = command.spawn().context("starting a server under taskset")?;
        let mut probe = None;
        let mut plain = plain;
        if let Kind::Native(_) = spec.kind {
            let mut stdout = BufReader::new(child.stdout.take().unwrap());
            let mut line = String::new();
            stdout.read_line(&mut line)?;
            plain = line
                .trim()
                .parse()
                .context("the native server prints its port")?;
            probe = Some((child.stdin.take().unwrap(), stdout));
        }
        let mut running = Running {
            command: format!("taskset -c 1 {shown}"),
            spec,
            child,
            plain,
            tls,
            probe,
            redis,
        };
        running.wait_ready(paths)?;
        Ok(running)
    }

    /// Waits (bounded) until every port accepts connections.
    fn wait_ready(&mut self, paths: &Paths) -> Result<()> {
        let deadline = Instant::now() + Duration::from_secs(120);
        for port in [Some(self.plain), self.tls].into_iter().flatten() {
            let addr: SocketAddr = ([127, 0, 0, 1], port).into();
            while TcpStream::connect(addr).is_err() {
                if let Some(status) = self.child.try_wait()? {
                    let err =
                        std::fs::read_to_string(paths.scratch.join(self.spec.name).join("err"));
                    bail!(
                        "{} exited ({status}): {}",
                        self.spec.name,
                        err.unwrap_or_default()
                    );
                }
                if Instant::now() > deadline {
                    bail!("{} did not listen on {port} within 120 s", self.spec.name);
                }
                std::thread::sleep(Duration::from_millis(20));
            }
        }
        Ok(())
    }

    /// The port that serves `proto`.
    pub fn port(&self, proto: Proto) -> u16 {
        if proto.tls() {
            self.tls.expect("a TLS row on a server without TLS")
        } else {
            self.plain
        }
    }

    /// utime + stime of the server (all threads), in clock ticks.
    pub fn cpu_ticks(&self) -> Result<u64> {
        let stat = std::fs::read_to_string(format!("/proc/{}/stat", self.child.id()))
            .with_context(|| format!("{} is gone", self.spec.name))?;
        // After the command name: utime and stime are fields 14 and 15 (1-based).
        let fields: Vec<&str> = stat
            .rsplit(')')
            .next()
            .unwrap_or("")
            .split_whitespace()
            .collect();
        Ok(fields[11].parse::<u64>()? + fields[12].parse::<u64>()?)
    }

    /// Octets and calls the native server has allocated so far.
    pub fn allocations(&mut self) -> Result<Option<(u64, u64)>> {
        let Some((stdin, stdout)) = &mut self.probe else {
            return Ok(None);
        };
        stdin.write_all(b"?\n")?;
        stdin.flush()?;
        let mut line = String::new();
        stdout.read_line(&mut line)?;
        let mut it = line.split_whitespace().map(str::parse::<u64>);
        match (it.next(), it.next()) {
            (Some(Ok(bytes)), Some(Ok(calls))) => Ok(Some((bytes, calls))),
            _ => bail!("{}: unreadable allocation report {line:?}", self.spec.name),
        }
    }

    /// `VmHWM`: the most resident memory the server ever had.
    pub fn peak_rss_kib(&self) -> Option<u64> {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id())).ok()?;
        let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
        line.split_whitespace().nth(1)?.parse().ok()
    }

    pub fn stop(&mut self) {
        for child in [Some(&mut self.child), self.redis.as_mut()]
            .into_iter()
            .flatten()
        {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// A `redis-server` on `port` (no persistence, Debian's `redis-server`), pinned to
/// CPU 0; waits (bounded) until it accepts connections.
fn start_redis(port: u16, dir: &Path) -> Result<Child> {
    let mut child = Command::new("taskset")
        .args(["-c", "0", "redis-server", "--bind", "127.0.0.1", "--port"])
        .arg(port.to_string())
        .args(["--save", "", "--appendonly", "no", "--dir"])
        .arg(dir)
        .stdout(File::create(dir.join("redis-out"))?)
        .stderr(File::create(dir.join("redis-err"))?)
        .spawn()
        .context("starting redis-server (apt-get install redis-server)")?;
    let deadline = Instant::now() + Duration::from_secs(30);
    while TcpStream::connect(("127.0.0.1", port)).is_err() {
        if let Some(status) = child.try_wait()? {
            bail!("redis-server exited ({status})");
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            bail!("redis-server did not listen on {port} within 30 s");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    Ok(child)
}

/// A loopback port free for TCP and UDP both (wedge serves h3 on its TLS port).
fn free_port() -> Result<u16> {
    for _ in 0..50 {
        let tcp = TcpListener::bind("127.0.0.1:0")?;
        let port = tcp.local_addr()?.port();
        if UdpSocket::bind(("127.0.0.1", port)).is_ok() {
            return Ok(port);
        }
    }
    bail!("no free loopback port for TCP and UDP")
}

/// Whether the example component is a WASI 0.3 one (`examples/*-p3`): both hosts
/// reuse its instances, several requests at once.
fn is_p3(component: &str) -> bool {
    component.ends_with("_p3")
}

/// Whether `wedge serve --help` lists `flag`.
pub fn wedge_accepts(wedge: &Path, flag: &str) -> Result<bool> {
    let out = Command::new(wedge).args(["serve", "--help"]).output()?;
    Ok(String::from_utf8_lossy(&out.stdout).contains(flag))
}
