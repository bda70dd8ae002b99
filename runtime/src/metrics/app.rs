//! What is recorded per app: requests by protocol and status class, their duration,
//! body bytes both ways, instances running and created, guest faults by kind, admission
//! refusals, key-value operations by kind and outcome, their duration, and the keys
//! and bytes an app keeps (embedded backend).

use std::sync::Arc;
use std::time::Duration;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::{Registry, Unit};

use super::{Open, Protocol};

/// Upper bounds (seconds) of the request duration buckets: from a warm hello-world
/// (well under a millisecond) to the default wall-time limit and past it.
const DURATION_BUCKETS: [f64; 14] = [
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 10.0, 30.0,
];

/// Status classes as labelled; the last is a request whose client left before any
/// response head was sent.
const STATUS_CLASSES: [&str; 6] = ["1xx", "2xx", "3xx", "4xx", "5xx", "none"];

/// Why a guest call failed, as the faults counter labels it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FaultKind {
    Trap,
    CpuTimeout,
    WallTimeout,
    Memory,
    HostMemory,
    NoResponse,
    GuestError,
    /// A WAGI program's output was no CGI response.
    MalformedCgi,
    Internal,
}

impl FaultKind {
    const ALL: [FaultKind; 9] = [
        FaultKind::Trap,
        FaultKind::CpuTimeout,
        FaultKind::WallTimeout,
        FaultKind::Memory,
        FaultKind::HostMemory,
        FaultKind::NoResponse,
        FaultKind::GuestError,
        FaultKind::MalformedCgi,
        FaultKind::Internal,
    ];

    fn label(self) -> &'static str {
        match self {
            FaultKind::Trap => "trap",
            FaultKind::CpuTimeout => "cpu_timeout",
            FaultKind::WallTimeout => "wall_timeout",
            FaultKind::Memory => "memory",
            FaultKind::HostMemory => "host_memory",
            FaultKind::NoResponse => "no_response",
            FaultKind::GuestError => "guest_error",
            FaultKind::MalformedCgi => "malformed_cgi",
            FaultKind::Internal => "internal",
        }
    }
}

/// Upper bounds (seconds) of the key-value operation duration buckets: from an
/// embedded read (microseconds) through an fsync or a Redis round trip to the default
/// timeout.
const KV_DURATION_BUCKETS: [f64; 12] = [
    0.00001, 0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.05, 0.5, 5.0,
];

/// A key-value operation, as the operations counter labels it (batches count as
/// their single kind).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KvOperation {
    Get,
    Exists,
    ListKeys,
    Set,
    Delete,
    Increment,
    Swap,
}

/// How a key-value operation ended: done, refused by the app's settings or quotas (or
/// the value found), or failed in the backend (a fault, a timeout).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KvOutcome {
    Ok,
    Refused,
    Failed,
}

impl KvOperation {
    const ALL: [KvOperation; 7] = [
        KvOperation::Get,
        KvOperation::Exists,
        KvOperation::ListKeys,
        KvOperation::Set,
        KvOperation::Delete,
        KvOperation::Increment,
        KvOperation::Swap,
    ];

    fn label(self) -> &'static str {
        match self {
            KvOperation::Get => "get",
            KvOperation::Exists => "exists",
            KvOperation::ListKeys => "list_keys",
            KvOperation::Set => "set",
            KvOperation::Delete => "delete",
            KvOperation::Increment => "increment",
            KvOperation::Swap => "swap",
        }
    }
}

impl KvOutcome {
    const ALL: [KvOutcome; 3] = [KvOutcome::Ok, KvOutcome::Refused, KvOutcome::Failed];

    fn label(self) -> &'static str {
        match self {
            KvOutcome::Ok => "ok",
            KvOutcome::Refused => "refused",
            KvOutcome::Failed => "failed",
        }
    }
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct KvLabels {
    app: String,
    operation: &'static str,
    outcome: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct AppLabels {
    app: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RequestLabels {
    app: String,
    protocol: &'static str,
    status: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct FaultLabels {
    app: String,
    kind: &'static str,
}

type Histograms = Family<AppLabels, Histogram, fn() -> Histogram>;

/// The per-app metric families of a registry.
pub(super) struct Families {
    requests: Family<RequestLabels, Counter>,
    duration: Histograms,
    response_bytes: Family<AppLabels, Counter>,
    request_bytes: Family<AppLabels, Counter>,
    instances: Family<AppLabels, Gauge>,
    instances_created: Family<AppLabels, Counter>,
    faults: Family<FaultLabels, Counter>,
    refused: Family<AppLabels, Counter>,
    output_dropped: Family<AppLabels, Counter>,
    kv_operations: Family<KvLabels, Counter>,
    kv_duration: Histograms,
    kv_keys: Family<AppLabels, Gauge>,
    kv_bytes: Family<AppLabels, Gauge>,
}

impl Families {
    fn new() -> Families {
        Families {
            requests: Family::default(),
            duration: Family::new_with_constructor(|| Histogram::new(DURATION_BUCKETS)),
            response_bytes: Family::default(),
            request_bytes: Family::default(),
            instances: Family::default(),
            instances_created: Family::default(),
            faults: Family::default(),
            refused: Family::default(),
            output_dropped: Family::default(),
            kv_operations: Family::default(),
            kv_duration: Family::new_with_constructor(|| Histogram::new(KV_DURATION_BUCKETS)),
            kv_keys: Family::default(),
            kv_bytes: Family::default(),
        }
    }

    /// The families, registered in `registry`.
    pub(super) fn register(registry: &mut Registry) -> Families {
        let families = Families::new();
        registry.register(
            "requests",
            "Requests answered, by app, protocol and status class (`none`: the client left before the response head)",
            families.requests.clone(),
        );
        registry.register_with_unit(
            "request_duration",
            "Time from the request head to the end of the response body, by app",
            Unit::Seconds,
            families.duration.clone(),
        );
        registry.register_with_unit(
            "response_body",
            "Response body bytes sent, by app",
            Unit::Bytes,
            families.response_bytes.clone(),
        );
        registry.register_with_unit(
            "request_body",
            "Request body bytes the guest read, by app",
            Unit::Bytes,
            families.request_bytes.clone(),
        );
        registry.register(
            "instances_running",
            "Guest instances running now, by app",
            families.instances.clone(),
        );
        registry.register(
            "instances_created",
            "Guest instances created, by app: one per request, or fewer when instances are reused",
            families.instances_created.clone(),
        );
        registry.register(
            "guest_faults",
            "Guest calls that failed, by app and kind",
            families.faults.clone(),
        );
        registry.register(
            "admission_refused",
            "Requests refused with 503 because all of the app's instances were busy and its queue full or too slow, by app",
            families.refused.clone(),
        );
        registry.register_with_unit(
            "guest_output_dropped",
            "Guest stdout/stderr bytes, and bytes of wedge's lines about the app, not written to the log because the app was over its log budget (log_rate, log_burst), by app",
            Unit::Bytes,
            families.output_dropped.clone(),
        );
        registry.register(
            "kv_operations",
            "Key-value operations, by app, operation and outcome (`refused`: by the app's settings or quotas, or the value found; `failed`: by the backend or its timeout)",
            families.kv_operations.clone(),
        );
        registry.register_with_unit(
            "kv_operation_duration",
            "Time one key-value operation took, by app",
            Unit::Seconds,
            families.kv_duration.clone(),
        );
        registry.register(
            "kv_keys",
            "Keys the app keeps in its key-value store (embedded backend), by app",
            families.kv_keys.clone(),
        );
        registry.register_with_unit(
            "kv",
            "Bytes of keys and values the app keeps in its key-value store (embedded backend), by app",
            Unit::Bytes,
            families.kv_bytes.clone(),
        );
        families
    }

    /// Every series of app `name`, created now so recording never looks one up.
    pub(super) fn app(&self, name: &str) -> Arc<AppMetrics> {
        let app = AppLabels { app: name.into() };
        let requests = Protocol::ALL.map(|protocol| {
            STATUS_CLASSES.map(|status| {
                self.requests.get_or_create_owned(&RequestLabels {
                    app: name.into(),
                    protocol: protocol.label(),
                    status,
                })
            })
        });
        let faults = FaultKind::ALL.map(|kind| {
            self.faults.get_or_create_owned(&FaultLabels {
                app: name.into(),
                kind: kind.label(),
            })
        });
        let kv_operations = KvOperation::ALL.map(|operation| {
            KvOutcome::ALL.map(|outcome| {
                self.kv_operations.get_or_create_owned(&KvLabels {
                    app: name.into(),
                    operation: operation.label(),
                    outcome: outcome.label(),
                })
            })
        });
        Arc::new(AppMetrics {
            requests,
            kv_operations,
            kv_duration: self.kv_duration.get_or_create_owned(&app),
            kv_keys: self.kv_keys.get_or_create_owned(&app),
            kv_bytes: self.kv_bytes.get_or_create_owned(&app),
            duration: self.duration.get_or_create_owned(&app),
            response_bytes: self.response_bytes.get_or_create_owned(&app),
            request_bytes: self.request_bytes.get_or_create_owned(&app),
            instances: self.instances.get_or_create_owned(&app),
            instances_created: self.instances_created.get_or_create_owned(&app),
            faults,
            refused: self.refused.get_or_create_owned(&app),
            output_dropped: self.output_dropped.get_or_create_owned(&app),
        })
    }
}

/// One app's series. Apps built without a registry get detached ones: recorded into,
/// never read, so the host's code paths are the same with and without metrics.
#[derive(Debug)]
pub struct AppMetrics {
    /// By protocol, then status class.
    requests: [[Counter; STATUS_CLASSES.len()]; Protocol::ALL.len()],
    duration: Histogram,
    response_bytes: Counter,
    request_bytes: Counter,
    instances: Gauge,
    instances_created: Counter,
    faults: [Counter; FaultKind::ALL.len()],
    refused: Counter,
    output_dropped: Counter,
    /// By operation, then outcome.
    kv_operations: [[Counter; KvOutcome::ALL.len()]; KvOperation::ALL.len()],
    kv_duration: Histogram,
    kv_keys: Gauge,
    kv_bytes: Gauge,
}

impl AppMetrics {
    /// Series in no registry.
    pub fn detached() -> Arc<AppMetrics> {
        Families::new().app("")
    }

    /// A request whose response (head `status`, 0 if none was sent, then `bytes`
    /// of body) ended `elapsed` after its head arrived.
    pub fn request_done(&self, protocol: Protocol, status: u16, bytes: u64, elapsed: Duration) {
        let class = match status {
            0 => STATUS_CLASSES.len() - 1,
            // http's StatusCode allows 100..=999; past 5xx counts as 5xx.
            status => (usize::from(status / 100)).clamp(1, 5) - 1,
        };
        self.requests[protocol as usize][class].inc();
        self.response_bytes.inc_by(bytes);
        self.duration.observe(elapsed.as_secs_f64());
    }

    /// The guest read `bytes` of a request body.
    pub fn request_body_read(&self, bytes: u64) {
        self.request_bytes.inc_by(bytes);
    }

    /// An instance, created now, runs until the guard is dropped.
    pub fn instance(&self) -> Open {
        self.instances_created.inc();
        Open::new(&self.instances)
    }

    pub fn fault(&self, kind: FaultKind) {
        self.faults[kind as usize].inc();
    }

    /// A request refused by admission (503).
    pub fn refused(&self) {
        self.refused.inc();
    }

    /// The app's guest output budget dropped `bytes` of stdout/stderr.
    pub fn guest_output_dropped(&self, bytes: u64) {
        self.output_dropped.inc_by(bytes);
    }

    /// A key-value operation ended with `outcome` after `elapsed`.
    pub fn kv_operation(&self, operation: KvOperation, outcome: KvOutcome, elapsed: Duration) {
        self.kv_operations[operation as usize][outcome as usize].inc();
        self.kv_duration.observe(elapsed.as_secs_f64());
    }

    /// The app keeps `keys` keys and `bytes` bytes in its key-value store now.
    pub fn kv_totals(&self, keys: u64, bytes: u64) {
        self.kv_keys.set(i64::try_from(keys).unwrap_or(i64::MAX));
        self.kv_bytes.set(i64::try_from(bytes).unwrap_or(i64::MAX));
    }
}
