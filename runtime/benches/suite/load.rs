//! The load generators, pinned to CPU 0 and bounded in time: `h2load` for HTTP/2
//! (cleartext and TLS), `wrk` for HTTP/1.1, `oha` (built with its `http3` feature) for
//! HTTP/3. Each run's requests, rate and latency percentiles come from the tool's
//! own report.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result, bail};

/// Connections per run, and HTTP/2 / HTTP/3 streams per connection
/// (../shared/BENCHMARKING.md: `h2load -c 32 -m 16 -t 1`, `wrk -t 1 -c 32`).
const CONNECTIONS: u32 = 32;
const STREAMS: u32 = 16;
/// The echo's request body.
pub const ECHO_LEN: usize = 64 * 1024;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Proto {
    /// HTTP/1.1, cleartext.
    H1,
    /// HTTP/2 with prior knowledge, cleartext.
    H2c,
    /// HTTP/2 over TLS (ALPN).
    H2,
    H3,
}

impl Proto {
    pub fn name(self) -> &'static str {
        match self {
            Proto::H1 => "HTTP/1.1",
            Proto::H2c => "h2c",
            Proto::H2 => "h2 (TLS)",
            Proto::H3 => "h3",
        }
    }

    pub fn tls(self) -> bool {
        matches!(self, Proto::H2 | Proto::H3)
    }

    /// The tool that drives this protocol at its standard load.
    pub fn tool(self) -> &'static str {
        Load::standard(self).tool().name()
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Tool {
    Wrk,
    H2load,
    Oha,
}

impl Tool {
    pub fn name(self) -> &'static str {
        match self {
            Tool::Wrk => "wrk",
            Tool::H2load => "h2load",
            Tool::Oha => "oha",
        }
    }
}

/// Who drives a run, and how many requests it keeps in flight.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Client {
    /// The protocol's own tool at BENCHMARKING.md's load: `wrk -c 32` (32 requests in
    /// flight), `h2load -c 32 -m 16` and `oha -c 32 -p 16` (512).
    Standard,
    /// 32 requests in flight from one tool, whatever the protocol: 32 connections
    /// of one request for HTTP/1.1, 2 of 16 streams for HTTP/2 and HTTP/3. Two
    /// protocols compared this way differ in the protocol alone, not in the load
    /// generator (its headers, how often it sleeps and is woken) or the concurrency.
    ThirtyTwoInFlight(Tool),
}

/// A row's load: its protocol and its client.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Load {
    pub proto: Proto,
    pub client: Client,
}

impl Load {
    pub fn standard(proto: Proto) -> Load {
        Load {
            proto,
            client: Client::Standard,
        }
    }

    pub fn tool(self) -> Tool {
        match (self.client, self.proto) {
            (Client::ThirtyTwoInFlight(tool), _) => tool,
            (Client::Standard, Proto::H1) => Tool::Wrk,
            (Client::Standard, Proto::H2c | Proto::H2) => Tool::H2load,
            (Client::Standard, Proto::H3) => Tool::Oha,
        }
    }

    /// Connections, and requests in flight on each. `ThirtyTwoInFlight` keeps as many
    /// in flight as `wrk -c 32` does, on HTTP/2 and HTTP/3 as 16 streams a connection.
    fn shape(self) -> (u32, u32) {
        match (self.client, self.proto) {
            (_, Proto::H1) => (CONNECTIONS, 1),
            (Client::Standard, _) => (CONNECTIONS, STREAMS),
            (Client::ThirtyTwoInFlight(_), _) => (CONNECTIONS / STREAMS, STREAMS),
        }
    }

    /// Whether its tool speaks its protocol: wrk only HTTP/1.1, Debian's h2load no
    /// HTTP/3. Another pair would measure another protocol than its row says.
    pub fn check(self) -> Result<()> {
        let speaks = match self.tool() {
            Tool::Wrk => self.proto == Proto::H1,
            Tool::H2load => self.proto != Proto::H3,
            Tool::Oha => true,
        };
        if !speaks {
            bail!(
                "{} does not speak {}",
                self.tool().name(),
                self.proto.name()
            );
        }
        Ok(())
    }

    /// How the report names it: the protocol, and the client when it is not the
    /// protocol's standard one.
    pub fn name(self) -> String {
        match self.client {
            Client::Standard => self.proto.name().to_string(),
            Client::ThirtyTwoInFlight(tool) => {
                format!("{}, 32 in flight by {}", self.proto.name(), tool.name())
            }
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Work {
    /// `GET /` → `Hello, world!\n`.
    Hello,
    /// `GET /stream` → 8 × 1 KiB, flushed one by one.
    Stream,
    /// `POST /echo` with 64 KiB → the same 64 KiB streamed back.
    Echo,
    /// examples/counter `GET /hits`: one key-value `get`.
    KvGet,
    /// examples/counter `POST /hits`, no body: one key-value `increment`.
    KvIncrement,
    /// examples/counter `GET /control/hits`: routed as `KvGet`, no store.
    KvGetControl,
    /// examples/counter `POST /control/hits`: routed as `KvIncrement`, no store.
    KvIncrementControl,
}

impl Work {
    pub fn name(self) -> &'static str {
        match self {
            Work::Hello => "hello",
            Work::Stream => "streamed 8×1 KiB",
            Work::Echo => "64 KiB echo",
            Work::KvGet => "kv get",
            Work::KvIncrement => "kv increment",
            Work::KvGetControl => "kv get's control",
            Work::KvIncrementControl => "kv increment's control",
        }
    }

    /// A POST with no body.
    fn posts(self) -> bool {
        matches!(self, Work::KvIncrement | Work::KvIncrementControl)
    }

    fn path(self) -> &'static str {
        match self {
            Work::Hello => "/",
            Work::Stream => "/stream",
            Work::Echo => "/echo",
            Work::KvGet | Work::KvIncrement => "/hits",
            Work::KvGetControl | Work::KvIncrementControl => "/control/hits",
        }
    }
}

/// What one run of a load generator reports.
pub struct Outcome {
    /// Requests answered with a 2xx.
    pub succeeded: u64,
    pub req_per_s: f64,
    pub p50_ms: Option<f64>,
    pub p99_ms: Option<f64>,
}

/// Where the load generators' inputs and logs live for the suite's run, and the
/// `oha` it runs (the cache's, when it is not on `PATH`).
pub struct Scratch {
    dir: PathBuf,
    oha: PathBuf,
}

impl Scratch {
    /// Writes the echo body and wrk's POST scripts into `dir`.
    pub fn new(dir: &Path, oha: &Path) -> Result<Scratch> {
        std::fs::create_dir_all(dir)?;
        std::fs::write(dir.join("body64k"), vec![b'e'; ECHO_LEN])?;
        std::fs::write(
            dir.join("post64k.lua"),
            format!(
                "wrk.method = \"POST\"\nwrk.body = string.rep(\"e\", {ECHO_LEN})\n\
                 wrk.headers[\"Content-Type\"] = \"application/octet-stream\"\n"
            ),
        )?;
        std::fs::write(dir.join("empty"), b"")?;
        std::fs::write(dir.join("post.lua"), "wrk.method = \"POST\"\n")?;
        Ok(Scratch {
            dir: dir.to_path_buf(),
            oha: oha.to_path_buf(),
        })
    }

    fn path(&self, name: &str) -> String {
        self.dir.join(name).display().to_string()
    }

    /// `argv` as it reads in BENCHMARKS.md: scratch files and tools by name, the port
    /// as `PORT`.
    pub fn display(&self, argv: &[String], port: u16) -> String {
        argv.join(" ")
            .replace(&format!("{}/", self.dir.display()), "")
            .replace(&self.oha.display().to_string(), "oha")
            .replace(&format!(":{port}/"), ":PORT/")
    }
}

/// The load generator's command line (without the pinning and time bound).
pub fn command(load: Load, work: Work, port: u16, seconds: u64, scratch: &Scratch) -> Vec<String> {
    let scheme = if load.proto.tls() { "https" } else { "http" };
    let url = format!("{scheme}://127.0.0.1:{port}{}", work.path());
    let (connections, streams) = load.shape();
    let (connections, streams) = (&connections.to_string(), &streams.to_string());
    let mut argv: Vec<String> = Vec::new();
    let mut push = |args: &[&str]| argv.extend(args.iter().map(|a| a.to_string()));
    match load.tool() {
        Tool::Wrk => {
            push(&[
                "wrk",
                "-t",
                "1",
                "-c",
                connections,
                "-d",
                &format!("{seconds}s"),
            ]);
            push(&["--latency"]);
            if work == Work::Echo {
                push(&["-s", &scratch.path("post64k.lua")]);
            }
            if work.posts() {
                push(&["-s", &scratch.path("post.lua")]);
            }
        }
        Tool::H2load => {
            push(&["h2load", "-c", connections]);
            if load.proto == Proto::H1 {
                push(&["--h1"]);
            } else {
                push(&["-m", streams]);
            }
            push(&[
                "-t",
                "1",
                "-D",
                &seconds.to_string(),
                "--log-file",
                &scratch.path("h2load.log"),
            ]);
            if work == Work::Echo {
                push(&["-d", &scratch.path("body64k")]);
            }
            if work.posts() {
                push(&["-d", &scratch.path("empty")]);
            }
        }
        Tool::Oha => {
            let version = match load.proto {
                Proto::H1 => "1.1",
                Proto::H2c | Proto::H2 => "2",
                Proto::H3 => "3",
            };
            push(&[
                &scratch.oha.display().to_string(),
                "--no-tui",
                "--output-format",
                "json",
                "--http-version",
                version,
            ]);
            push(&["--insecure", "--worker-threads", "1", "-c", connections]);
            if load.proto != Proto::H1 {
                push(&["-p", streams]);
            }
            push(&["-z", &format!("{seconds}s")]);
            if work == Work::Echo {
                push(&["-m", "POST", "-D", &scratch.path("body64k")]);
            }
            if work.posts() {
                push(&["-m", "POST"]);
            }
        }
    }
    argv.push(url);
    argv
}

/// Runs `argv` pinned to CPU 0, killed if it overruns its duration by a minute.
pub fn run(load: Load, argv: &[String], seconds: u64, scratch: &Scratch) -> Result<Outcome> {
    let out = Command::new("timeout")
        .args(["-k", "5", &(seconds + 60).to_string(), "taskset", "-c", "0"])
        .args(argv)
        .output()
        .with_context(|| format!("running {}", argv[0]))?;
    let text = String::from_utf8_lossy(&out.stdout);
    if !out.status.success() {
        bail!(
            "{} failed ({}): {}{}",
            argv[0],
            out.status,
            text,
            String::from_utf8_lossy(&out.stderr)
        );
    }
    match load.tool() {
        Tool::Wrk => parse_wrk(&text),
        Tool::H2load => parse_h2load(&text, Path::new(&scratch.path("h2load.log"))),
        Tool::Oha => parse_oha(&text),
    }
}

/// The number just before `word` in `text`: `number_before(line, " succeeded")`.
fn number_before(text: &str, word: &str) -> Option<f64> {
    let at = text.find(word)?;
    text[..at]
        .split_whitespace()
        .last()?
        .trim_end_matches(',')
        .parse()
        .ok()
}

fn parse_h2load(text: &str, log: &Path) -> Result<Outcome> {
    let requests = text
        .lines()
        .find(|l| l.starts_with("requests:"))
        .context("h2load printed no `requests:` line")?;
    let succeeded = number_before(requests, " succeeded").context("h2load: succeeded")? as u64;
    let finished = text
        .lines()
        .find(|l| l.starts_with("finished in"))
        .context("h2load printed no `finished in` line")?;
    let req_per_s = number_before(finished, " req/s").context("h2load: req/s")?;
    // The log: start (µs since the epoch), status, µs until the end of the response.
    let log_text = std::fs::read_to_string(log).unwrap_or_default();
    let mut micros: Vec<u64> = log_text
        .lines()
        .filter_map(|l| {
            let mut cols = l.split('\t').skip(1);
            let status: i32 = cols.next()?.parse().ok()?;
            let us: u64 = cols.next()?.trim().parse().ok()?;
            (200..300).contains(&status).then_some(us)
        })
        .collect();
    let _ = std::fs::remove_file(log);
    let p50_ms = percentile(&mut micros, 0.50).map(|us| us as f64 / 1000.0);
    let p99_ms = percentile(&mut micros, 0.99).map(|us| us as f64 / 1000.0);
    Ok(Outcome {
        succeeded,
        req_per_s,
        p50_ms,
        p99_ms,
    })
}

fn percentile(v: &mut [u64], q: f64) -> Option<u64> {
    if v.is_empty() {
        return None;
    }
    let k = ((v.len() - 1) as f64 * q).round() as usize;
    Some(*v.select_nth_unstable(k).1)
}

fn parse_wrk(text: &str) -> Result<Outcome> {
    let done = text
        .lines()
        .find(|l| l.contains(" requests in "))
        .and_then(|l| number_before(l, " requests in "))
        .context("wrk printed no `requests in` line")?;
    let failed = text
        .lines()
        .find(|l| l.contains("Non-2xx or 3xx responses:"))
        .and_then(|l| l.rsplit(':').next()?.trim().parse::<f64>().ok())
        .unwrap_or(0.0);
    let req_per_s = text
        .lines()
        .find(|l| l.starts_with("Requests/sec:"))
        .and_then(|l| l.rsplit(':').next()?.trim().parse().ok())
        .context("wrk printed no `Requests/sec:` line")?;
    let latency = |pct: &str| {
        text.lines()
            .map(str::trim)
            .find_map(|l| l.strip_prefix(pct))
            .and_then(|v| wrk_duration_ms(v.trim()))
    };
    Ok(Outcome {
        succeeded: (done - failed).max(0.0) as u64,
        req_per_s,
        p50_ms: latency("50%"),
        p99_ms: latency("99%"),
    })
}

/// `621.00us`, `2.05ms`, `1.10s`, `2.00m` → milliseconds.
fn wrk_duration_ms(v: &str) -> Option<f64> {
    let split = v.find(|c: char| c.is_ascii_alphabetic())?;
    let n: f64 = v[..split].parse().ok()?;
    let scale = match &v[split..] {
        "us" => 0.001,
        "ms" => 1.0,
        "s" => 1000.0,
        "m" => 60_000.0,
        _ => return None,
    };
    Some(n * scale)
}

fn parse_oha(text: &str) -> Result<Outcome> {
    let json: serde_json::Value = serde_json::from_str(text).context("oha's JSON report")?;
    let succeeded = json["statusCodeDistribution"]
        .as_object()
        .map(|codes| {
            codes
                .iter()
                .filter(|(code, _)| code.starts_with('2'))
                .filter_map(|(_, n)| n.as_u64())
                .sum()
        })
        .unwrap_or(0);
    let seconds_to_ms = |v: &serde_json::Value| v.as_f64().map(|s| s * 1000.0);
    Ok(Outcome {
        succeeded,
        req_per_s: json["summary"]["requestsPerSec"].as_f64().unwrap_or(0.0),
        p50_ms: seconds_to_ms(&json["latencyPercentiles"]["p50"]),
        p99_ms: seconds_to_ms(&json["latencyPercentiles"]["p99"]),
    })
}
