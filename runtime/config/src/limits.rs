//! Per-app resource limits and their defaults.

use std::time::Duration;

/// Default memory per instance: 128 MiB.
pub const DEFAULT_MEMORY: u64 = 128 * 1024 * 1024;
/// Default CPU time per request (time spent running guest code).
pub const DEFAULT_CPU_TIME: Duration = Duration::from_secs(1);
/// Default wall-clock time per request.
pub const DEFAULT_WALL_TIME: Duration = Duration::from_secs(60);
/// Default maximum request body: 100 MiB.
pub const DEFAULT_MAX_BODY: u64 = 100 * 1024 * 1024;
/// Default requests one p3 instance serves before it is replaced (p2: 1, a fresh
/// instance per request, unless the app asks for reuse).
pub const DEFAULT_P3_INSTANCE_REUSE: u32 = 128;
/// Default requests one p3 instance serves at once.
pub const DEFAULT_INSTANCE_CONCURRENCY: u32 = 16;
/// Default time a reused instance waits for its next request before it is dropped.
pub const DEFAULT_INSTANCE_IDLE: Duration = Duration::from_secs(1);
/// Default host memory an instance may make wedge hold for it: 16 MiB. The
/// examples' instances stay under 1 MiB of it (a WASI 0.3 instance serving 16
/// requests at once included); fields are capped at 128 KiB each.
pub const DEFAULT_HOST_MEMORY: u64 = 16 * 1024 * 1024;
/// Default live resources (handles) an instance may hold in the host: far below
/// wasmtime's own default of a million, far above what a handler needs (tens).
pub const DEFAULT_MAX_RESOURCES: u32 = 10_000;
/// Default rate of guest stdout/stderr bytes forwarded to the log, per second and
/// app: a debug print per request at thousands of requests a second, while an app
/// printing in a loop writes at most ~5.5 GB a day instead of ~100 MB a second.
pub const DEFAULT_LOG_RATE: u64 = 64 * 1024;
/// Default guest output an app may write at once before `log_rate` applies: room
/// for a large dump (a request body, a stack of traces) while debugging.
pub const DEFAULT_LOG_BURST: u64 = 1024 * 1024;

/// Default longest CGI response head a WAGI program may write before its empty line:
/// a head is a few hundred bytes; past this the output is not a CGI response.
pub const DEFAULT_MAX_CGI_HEAD: u64 = 64 * 1024;
/// Default body bytes of a WAGI program's output wedge holds while the client has not
/// taken them; past it the program waits (its stdout is not writable).
pub const DEFAULT_CGI_OUTPUT_BUFFER: u64 = 64 * 1024;

/// What one request of an app may use.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Limits {
    /// Linear memory an instance may grow to, in bytes.
    pub memory: u64,
    /// Time spent running guest code for one request; waiting on I/O does not count.
    pub cpu_time: Duration,
    /// Time from dispatch until the guest call returns.
    pub wall_time: Duration,
    /// Largest request body accepted, in bytes.
    pub max_body: u64,
    /// Bytes the host may hold on one instance's behalf (resources, the fields
    /// and buffers they own, copies of guest data), outside its linear memory.
    pub host_memory: u64,
    /// Resources (handles) one instance may hold in the host at once.
    pub max_resources: u32,
    /// Guest stdout/stderr bytes a second the log takes from the app's instances,
    /// all together; past it (and `log_burst`) lines are dropped and counted.
    pub log_rate: u64,
    /// Guest output the app may write at once before `log_rate` applies.
    pub log_burst: u64,
    /// Longest CGI response head a WAGI program may write (`max_cgi_head`).
    pub max_cgi_head: u64,
    /// Body bytes of a WAGI program's output held for a client that has not taken
    /// them, before the program waits (`cgi_output_buffer`).
    pub cgi_output_buffer: u64,
    /// Whether and how instances serve more than one request.
    pub reuse: Reuse,
}

/// How an app's instances are reused (`instance_reuse`, `instance_concurrency`,
/// `instance_idle`). Reuse trades isolation for cost: an instance's memory (globals,
/// caches) carries over between the requests of one app that it serves, never to
/// another app's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reuse {
    /// Requests one instance serves before it is replaced; `None` takes the world's
    /// default: 1 for p2 (a fresh instance per request), 128 for p3.
    pub requests: Option<u32>,
    /// Requests one p3 instance serves at once (a p2 instance serves one at a time).
    pub concurrency: u32,
    /// How long an instance waits idle for its next request before it is dropped.
    pub idle: Duration,
}

impl Default for Reuse {
    fn default() -> Self {
        Reuse {
            requests: None,
            concurrency: DEFAULT_INSTANCE_CONCURRENCY,
            idle: DEFAULT_INSTANCE_IDLE,
        }
    }
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            memory: DEFAULT_MEMORY,
            cpu_time: DEFAULT_CPU_TIME,
            wall_time: DEFAULT_WALL_TIME,
            max_body: DEFAULT_MAX_BODY,
            host_memory: DEFAULT_HOST_MEMORY,
            max_resources: DEFAULT_MAX_RESOURCES,
            log_rate: DEFAULT_LOG_RATE,
            log_burst: DEFAULT_LOG_BURST,
            max_cgi_head: DEFAULT_MAX_CGI_HEAD,
            cgi_output_buffer: DEFAULT_CGI_OUTPUT_BUFFER,
            reuse: Reuse::default(),
        }
    }
}

/// A size written with its unit, like `128MiB`, `1GB` or `4096B`, in bytes. A bare
/// number is refused (but `0`, the same in every unit): `--memory 12` meaning 12
/// bytes is never what was meant. (In wedge.toml a TOML integer is a number of
/// bytes: it is typed as one, unlike text.)
pub fn parse_size(text: &str) -> Result<u64, String> {
    let number = text.trim();
    if !number.is_empty() && number.chars().all(|c| c.is_ascii_digit() || c == '.') {
        return match number.parse::<f64>() {
            Ok(0.0) => Ok(0),
            _ => Err(format!(
                "`{text}` needs a unit, e.g. {number}MiB (or {number}B for bytes)"
            )),
        };
    }
    text.parse::<bytesize::ByteSize>()
        .map(|size| size.as_u64())
        .map_err(|err| format!("`{text}` is not a size like 128MiB: {err}"))
}

/// A duration written like `1s`, `500ms` or `2m 30s`.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    humantime::parse_duration(text)
        .map_err(|err| format!("`{text}` is not a duration like 1s or 500ms: {err}"))
}
