//! Where a fresh instance's time goes: the dispatch path's own steps, one after
//! the other, timed per request. Used by the `lifecycle` benchmark
//! (`cargo bench -p wedge --bench lifecycle`), never on the serving path.

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, anyhow};
use http::Request;
use http::uri::Scheme;
use http_body_util::{BodyExt, Empty};

use super::app::App;
use super::call::fresh::{GuestCall, call_handler, instantiate, prepare};

/// The steps of one request on a fresh instance, in order.
pub const PHASES: [&str; 5] = [
    "store create (WASI + HTTP contexts, request resources)",
    "instantiate",
    "call handler",
    "read response body",
    "store drop (instance back to the pool)",
];

/// Each phase's duration for every measured request.
pub struct Lifecycle {
    samples: [Vec<Duration>; PHASES.len()],
}

impl Lifecycle {
    /// Runs `warmup` then `requests` GET / requests through `app`, one after the
    /// other on the calling task, timing each phase.
    pub async fn measure(app: &Arc<App>, warmup: usize, requests: usize) -> Result<Lifecycle> {
        let mut lifecycle = Lifecycle {
            samples: std::array::from_fn(|_| Vec::with_capacity(requests)),
        };
        for round in 0..warmup + requests {
            let times = one_request(app).await?;
            if round >= warmup {
                for (samples, time) in lifecycle.samples.iter_mut().zip(times) {
                    samples.push(time);
                }
            }
        }
        Ok(lifecycle)
    }

    /// A markdown table: each phase's median and 99th percentile in µs, and
    /// the sum of the medians.
    pub fn table(&mut self) -> String {
        let mut out = String::from("| phase | median µs | p99 µs |\n| --- | --- | --- |\n");
        let mut total = 0.0;
        for (name, samples) in PHASES.iter().zip(&mut self.samples) {
            samples.sort_unstable();
            let median = micros(percentile(samples, 50));
            total += median;
            let p99 = micros(percentile(samples, 99));
            out.push_str(&format!("| {name} | {median:.1} | {p99:.1} |\n"));
        }
        out.push_str(&format!("| **sum of medians** | {total:.1} | |\n"));
        out
    }
}

/// An empty body cannot fail; the host's body type still names an error.
fn no_error(never: std::convert::Infallible) -> wasmtime_wasi_http::Error {
    match never {}
}

fn percentile(sorted: &[Duration], p: usize) -> Duration {
    sorted
        .get((sorted.len() * p / 100).min(sorted.len().saturating_sub(1)))
        .copied()
        .unwrap_or_default()
}

fn micros(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

async fn one_request(app: &Arc<App>) -> Result<[Duration; PHASES.len()]> {
    let request = Request::get("http://localhost/")
        .body(Empty::<bytes::Bytes>::new().map_err(no_error))
        .context("building the request")?;
    let deadline = tokio::time::Instant::now() + app.limits.wall_time;

    let start = Instant::now();
    let GuestCall {
        mut store,
        req,
        outparam,
        response_rx,
    } = prepare(app, request, Scheme::HTTP)?;
    let created = Instant::now();
    let proxy = instantiate(app, &mut store, deadline)
        .await
        .map_err(|fault| anyhow!("{fault}"))?;
    let instantiated = Instant::now();
    call_handler(app, &proxy, &mut store, req, outparam, deadline)
        .await
        .map_err(|fault| anyhow!("{fault}"))?;
    let called = Instant::now();
    let response = response_rx
        .await
        .context("the guest set no response")?
        .map_err(|code| anyhow!("the guest answered with an error: {code:?}"))?;
    response
        .into_body()
        .collect()
        .await
        .map_err(|err| anyhow!("reading the response body: {err:?}"))?;
    let read = Instant::now();
    drop(store);
    let dropped = Instant::now();
    Ok([
        created - start,
        instantiated - created,
        called - instantiated,
        read - called,
        dropped - read,
    ])
}
