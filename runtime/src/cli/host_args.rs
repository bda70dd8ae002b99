//! The flags `wedge serve` and `wedge dev` share: per-request limits, TLS material,
//! draining, the data dir, connection timeouts, the HTTP/2 and HTTP/3 engines' settings,
//! outbound HTTP and the key-value store.

use std::path::PathBuf;
use std::time::Duration;

use clap::Args;
use clap::builder::TypedValueParser;

use super::conn_args::ConnArgs;
use super::h2_args::H2Args;
use super::h3_args::H3Args;
use super::kv_args::KvArgs;
use super::outbound_args::OutboundArgs;
use super::value_parsers::{parse_positive_duration, parse_positive_size};
use super::vars_args::VarsArgs;
use crate::host::admission::{self, AdmissionLimits};
use crate::host::limits::{self, Reuse, parse_size};
use crate::host::{Executor, Limits};

/// `--help`'s headings for the flags of `serve` and `dev` that are not in groups of
/// their own (HTTP/2, outbound HTTP, …).
pub const LISTENERS: &str = "Listeners and TLS";
pub const LIMITS: &str = "Limits per instance and request";
pub const INSTANCES: &str = "Instances and queueing";
pub const PROCESS: &str = "Process and logs";

#[derive(Args)]
pub struct HostArgs {
    /// PEM certificate chain for TLS; without it wedge uses a self-signed
    /// development certificate for localhost kept in the data dir.
    #[arg(long, help_heading = LISTENERS, value_name = "FILE", requires = "tls_key")]
    pub tls_cert: Option<PathBuf>,

    /// PEM private key for --tls-cert.
    #[arg(long, help_heading = LISTENERS, value_name = "FILE", requires = "tls_cert")]
    pub tls_key: Option<PathBuf>,

    /// Linear memory per instance (e.g. 128MiB).
    #[arg(long, help_heading = LIMITS, value_name = "SIZE",
          default_value = "128MiB", value_parser = parse_positive_size)]
    memory: u64,

    /// CPU time per request: time spent running guest code, not waiting.
    #[arg(long, help_heading = LIMITS, value_name = "DURATION",
          default_value = "1s", value_parser = parse_positive_duration::<Duration>)]
    cpu_time: Duration,

    /// Wall-clock time per request.
    #[arg(long, help_heading = LIMITS, value_name = "DURATION",
          default_value = "60s", value_parser = parse_positive_duration::<Duration>)]
    wall_time: Duration,

    /// Largest request body accepted (e.g. 100MiB).
    #[arg(long, help_heading = LIMITS, value_name = "SIZE",
          default_value = "100MiB", value_parser = parse_size)]
    max_body: u64,

    /// Memory wedge may hold on one instance's behalf outside its linear memory
    /// (resources, their fields and buffers, copies of guest data, e.g. 16MiB).
    #[arg(long, help_heading = LIMITS, value_name = "SIZE",
          default_value = "16MiB", value_parser = parse_positive_size)]
    host_memory: u64,

    /// Resources (handles) one instance may hold in the host at once.
    #[arg(long, help_heading = LIMITS, value_name = "N",
          default_value_t = limits::DEFAULT_MAX_RESOURCES,
          value_parser = clap::value_parser!(u32).range(1..))]
    max_resources: u32,

    /// Guest stdout/stderr bytes a second wedge writes to its log for the app, all
    /// its instances together (e.g. 64KiB); past it and --log-burst, lines are
    /// dropped, reported once a second and counted in /metrics.
    #[arg(long, help_heading = LIMITS, value_name = "SIZE",
          default_value = "64KiB", value_parser = parse_size)]
    log_rate: u64,

    /// Guest output the app may write at once before --log-rate applies.
    #[arg(long, help_heading = LIMITS, value_name = "SIZE",
          default_value = "1MiB", value_parser = parse_size)]
    log_burst: u64,

    /// Longest CGI response head a WAGI program may write before its empty line;
    /// past it the output is no CGI response (502).
    #[arg(long, help_heading = LIMITS, value_name = "SIZE",
          default_value = "64KiB", value_parser = parse_positive_size)]
    max_cgi_head: u64,

    /// Body bytes of a WAGI program's output held while the client has not taken
    /// them; past it the program waits until the client reads.
    #[arg(long, help_heading = LIMITS, value_name = "SIZE",
          default_value = "64KiB", value_parser = parse_positive_size)]
    cgi_output_buffer: u64,

    /// Run the app as a WAGI program: a WASI preview 1 command module (or a
    /// `wasi:cli/command` component) run once per request, the request as CGI
    /// variables and stdin, its stdout the CGI response (RFC 3875).
    #[arg(long, help_heading = INSTANCES)]
    wagi: bool,

    /// Instances of the app running at once; more requests wait in a queue.
    #[arg(long, help_heading = INSTANCES, value_name = "N",
          default_value_t = admission::DEFAULT_MAX_CONCURRENT,
          value_parser = clap::value_parser!(u32).range(1..).map(|n| n as usize))]
    max_concurrent: usize,

    /// Requests that may wait for an instance; more get 503 with Retry-After.
    #[arg(long, help_heading = INSTANCES, value_name = "N",
          default_value_t = admission::DEFAULT_QUEUE)]
    queue: usize,

    /// How long a request may wait for an instance before it gets 503.
    #[arg(long, help_heading = INSTANCES, value_name = "DURATION",
          default_value = "5s", value_parser = humantime::parse_duration)]
    queue_timeout: Duration,

    /// Requests of one client connection that the client abandoned (reset) while
    /// their guest code still runs on a reused instance; past it, the connection's
    /// next requests to the app get 503 until they are done.
    #[arg(long, help_heading = INSTANCES, value_name = "N",
          default_value_t = admission::DEFAULT_MAX_ABANDONED_PER_CONNECTION,
          value_parser = clap::value_parser!(u32).range(1..).map(|n| n as usize))]
    max_abandoned_per_connection: usize,

    /// Requests one instance serves before it is replaced [default: 1 for a p2
    /// component (a fresh instance per request), 128 for p3]. Above 1, an
    /// instance's memory carries over between requests of the app.
    #[arg(long, help_heading = INSTANCES, value_name = "N",
          value_parser = clap::value_parser!(u32).range(1..))]
    instance_reuse: Option<u32>,

    /// Requests one p3 instance serves at once (p2 instances serve one at a time).
    #[arg(long, help_heading = INSTANCES, value_name = "N",
          default_value_t = limits::DEFAULT_INSTANCE_CONCURRENCY,
          value_parser = clap::value_parser!(u32).range(1..))]
    instance_concurrency: u32,

    /// How long a reused instance waits idle for its next request before it is dropped.
    #[arg(long, help_heading = INSTANCES, value_name = "DURATION",
          default_value = "1s", value_parser = parse_positive_duration::<Duration>)]
    instance_idle: Duration,

    /// Instances alive at once across all apps, per instance pool (its size: WASI 0.2
    /// apps served fresh instances have a pool of their own, and with --compile tiered
    /// apps on Winch's code two more); a request finding its pool full gets 503 with
    /// Retry-After.
    #[arg(long, help_heading = INSTANCES, value_name = "N",
          default_value_t = crate::host::PoolConfig::default().max_instances,
          value_parser = clap::value_parser!(u32).range(1..))]
    max_instances: u32,

    /// Linear memory each instance pool slot keeps resident between instances
    /// (only the pages an instance dirtied are reset; needs Linux 6.7+, else
    /// ignored). 0 gives every page back to the kernel after each instance.
    #[arg(long, help_heading = INSTANCES, value_name = "SIZE",
          default_value = "16MiB", value_parser = parse_size)]
    pool_keep_resident: u64,

    /// Worker threads serving connections, each with its own listeners on the same
    /// addresses (SO_REUSEPORT) [default: one per core].
    #[arg(long, help_heading = PROCESS, value_name = "N",
          value_parser = clap::value_parser!(u32).range(1..))]
    workers: Option<u32>,

    /// On Ctrl-C/SIGTERM, how long requests in flight may take to finish.
    #[arg(long, help_heading = PROCESS, value_name = "DURATION",
          default_value = "30s", value_parser = humantime::parse_duration)]
    pub drain_timeout: Duration,

    /// How a component the precompiled cache does not hold is compiled: `tiered`
    /// serves it at once with code from Winch (wasmtime's baseline compiler), then,
    /// after its first request, compiles it with Cranelift in the background (one
    /// compile at a time, at low priority) and switches new requests to that code,
    /// which goes into the cache; `optimized` compiles it with Cranelift before
    /// serving it. With --config, this flag wins over the file's `compile`
    /// [default: optimized; `wedge dev`: tiered on x86_64].
    #[arg(long, help_heading = PROCESS, value_name = "MODE")]
    pub compile: Option<crate::host::Compile>,

    /// Where wedge keeps its data (precompiled components, certificates).
    #[arg(long, help_heading = PROCESS, value_name = "DIR", env = "WEDGE_DATA_DIR")]
    data_dir: Option<PathBuf>,

    #[command(flatten)]
    pub conn: ConnArgs,

    #[command(flatten)]
    pub h2: H2Args,

    #[command(flatten)]
    pub h3: H3Args,

    #[command(flatten)]
    pub outbound: OutboundArgs,

    #[command(flatten)]
    pub vars: VarsArgs,

    #[command(flatten)]
    pub kv: KvArgs,
}

impl HostArgs {
    pub fn limits(&self) -> Limits {
        Limits {
            memory: self.memory,
            cpu_time: self.cpu_time,
            wall_time: self.wall_time,
            max_body: self.max_body,
            host_memory: self.host_memory,
            max_resources: self.max_resources,
            log_rate: self.log_rate,
            log_burst: self.log_burst,
            max_cgi_head: self.max_cgi_head,
            cgi_output_buffer: self.cgi_output_buffer,
            reuse: Reuse {
                requests: self.instance_reuse,
                concurrency: self.instance_concurrency,
                idle: self.instance_idle,
            },
        }
    }

    /// How the app runs: `--wagi`, else as a wasi:http handler.
    pub fn executor(&self) -> Executor {
        if self.wagi {
            Executor::Wagi
        } else {
            Executor::WasiHttp
        }
    }

    pub fn admission(&self) -> AdmissionLimits {
        AdmissionLimits {
            max_concurrent: self.max_concurrent,
            queue: self.queue,
            queue_timeout: self.queue_timeout,
            max_abandoned_per_connection: self.max_abandoned_per_connection,
        }
    }

    /// `--tls-cert` and `--tls-key`, given together or not at all.
    pub fn pem(&self) -> Option<(PathBuf, PathBuf)> {
        self.tls_cert.clone().zip(self.tls_key.clone())
    }

    pub fn max_instances(&self) -> u32 {
        self.max_instances
    }

    pub fn pool_keep_resident(&self) -> u64 {
        self.pool_keep_resident
    }

    /// `--workers`, else one per core this process may run on.
    pub fn workers(&self) -> usize {
        match self.workers {
            Some(n) => n as usize,
            None => std::thread::available_parallelism().map_or(1, |n| n.get()),
        }
    }

    pub fn data_dir(&self) -> PathBuf {
        self.data_dir
            .clone()
            .unwrap_or_else(super::default_data_dir)
    }
}
