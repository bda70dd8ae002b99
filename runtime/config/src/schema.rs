//! The typed `wedge.toml`: what `load` hands the server once every key checked out.

use std::collections::BTreeMap;
use std::fmt;
use std::net::SocketAddr;
use std::path::PathBuf;

use crate::admission::AdmissionLimits;
use crate::executor::Executor;
use crate::keyvalue::KeyValue;
use crate::limits::Limits;
use crate::oci::Reference;
use crate::outbound::Outbound;
use crate::routes::Route;

/// A whole `wedge.toml`. Paths in it are resolved against the file's directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    /// `listen`: cleartext HTTP/1.1 and h2c; off when absent.
    pub listen: Option<SocketAddr>,
    /// `tls_listen` (+ `tls_cert`/`tls_key`): TLS and HTTP/3; off when absent.
    pub tls: Option<TlsConfig>,
    /// `admin` (+ `admin_token_file`, `admin_tls_cert`/`admin_tls_key`): the
    /// admin API; off when absent.
    pub admin: Option<AdminConfig>,
    /// `[[app]]`, in file order. Names are unique and no route is claimed twice.
    pub apps: Vec<AppConfig>,
    /// `compile`: how components the precompiled cache does not hold are compiled;
    /// `None` leaves it to `--compile` (by default optimized).
    pub compile: Option<crate::compile::Compile>,
}

/// The TLS listener.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsConfig {
    /// TCP for HTTP/1.1 and HTTP/2 (ALPN), the same port over UDP for HTTP/3.
    pub listen: SocketAddr,
    /// The certificate chain and key; `None` → the development certificate.
    pub pem: Option<PemFiles>,
}

/// `tls_cert` and `tls_key` (or `admin_tls_cert` and `admin_tls_key`), always
/// given together.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PemFiles {
    pub cert: PathBuf,
    pub key: PathBuf,
}

/// The admin API listener.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AdminConfig {
    pub listen: SocketAddr,
    /// `admin_token_file`: holds the bearer token. `None` leaves the token to
    /// another source (e.g. the environment); the server must refuse to
    /// start the admin API without one.
    pub token_file: Option<PathBuf>,
    /// `admin_tls_cert` and `admin_tls_key`: serve it over HTTPS; `None` → cleartext.
    pub tls: Option<PemFiles>,
}

/// Where an app's component comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ComponentSource {
    /// A .wasm file on this machine.
    File(PathBuf),
    /// A component in an OCI registry, pulled (and cached) when the app is loaded.
    Oci(Reference),
}

impl fmt::Display for ComponentSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ComponentSource::File(path) => write!(f, "{}", path.display()),
            ComponentSource::Oci(reference) => write!(f, "{reference}"),
        }
    }
}

/// One `[[app]]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AppConfig {
    /// Unique, lowercase letters, digits, `-` and `_`, starting with a letter.
    pub name: String,
    /// The component: a .wasm file (resolved against the config file's
    /// directory) or an `oci://` reference.
    pub component: ComponentSource,
    /// Where its requests come from; may be empty (an app reachable by no route).
    pub routes: Vec<Route>,
    /// `executor`: how its requests run (`wasi-http`, or `wagi`).
    pub executor: Executor,
    /// `[app.limits]` memory, cpu_time, wall_time, max_body, host_memory,
    /// max_resources, log_rate, log_burst, max_cgi_head, cgi_output_buffer,
    /// instance_reuse, instance_concurrency, instance_idle.
    pub limits: Limits,
    /// `[app.limits]` max_concurrent, queue, queue_timeout.
    pub admission: AdmissionLimits,
    /// `outbound` (allow-list) and `[app.limits]` outbound_max_concurrent,
    /// outbound_connect_timeout.
    pub outbound: Outbound,
    /// `[app.env]`: environment variables the guest sees.
    pub env: BTreeMap<String, String>,
    /// `[app.config]`: values the guest reads through `wasi:config/store`.
    pub config: BTreeMap<String, String>,
    /// `[app.keyvalue]`: its `wasi:keyvalue` store and quotas.
    pub keyvalue: KeyValue,
}
