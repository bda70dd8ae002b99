//! Why a guest call failed, and the status each failure answers with.

use std::fmt;
use std::time::Duration;

use http::StatusCode;

use super::limits::Size;
use super::store::GuestState;
use crate::log_text::bounded;
use crate::metrics::FaultKind;

/// Output that is not a CGI response: the program's fault, answered `502`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct MalformedCgi(pub String);

impl fmt::Display for MalformedCgi {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for MalformedCgi {}

/// A guest call that did not produce a clean response.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Fault {
    /// The guest trapped (panic, unreachable, out-of-bounds access, ...).
    Trap(String),
    /// Guest code ran longer than the CPU-time limit.
    CpuTime(Duration),
    /// The request took longer than the wall-clock limit; `started` says
    /// whether the guest's handler had been entered.
    WallTime { limit: Duration, started: bool },
    /// The guest tried to grow its memory past the limit and then trapped.
    Memory(u64),
    /// The host held more memory on the instance's behalf than its budget.
    HostMemory(u64),
    /// The instance held more resources (handles) in the host than it may: the
    /// host-memory limit, counted in resources.
    Resources(u32),
    /// The handler returned without ever setting a response.
    NoResponse,
    /// The guest set an error instead of a response.
    GuestError(String),
    /// A WAGI program exited with a status other than 0 (which one, WASI 0.2's
    /// `exit` does not say: preview 1's `proc_exit(3)` reaches it as a failure).
    Exited,
    /// A WAGI program's output was not a CGI response (RFC 3875 §6).
    MalformedCgi(String),
    /// Every instance of the host's pool was in use (`--max-instances`).
    PoolExhausted,
    /// The host could not run the request.
    Internal(String),
}

/// The most a fault keeps of what the guest chose to say (an error code's message).
const MAX_GUEST_TEXT: usize = 1024;

impl Fault {
    /// The guest answered with `code`, an error instead of a response: its debug form,
    /// cut at `MAX_GUEST_TEXT` octets as it is formatted.
    pub fn guest_error(code: &dyn fmt::Debug) -> Fault {
        Fault::GuestError(bounded(format_args!("{code:?}"), MAX_GUEST_TEXT))
    }

    /// The status sent when the fault happens before the response head.
    pub fn status(&self) -> StatusCode {
        match self {
            Fault::CpuTime(_) | Fault::WallTime { started: true, .. } => {
                StatusCode::GATEWAY_TIMEOUT
            }
            Fault::WallTime { started: false, .. } | Fault::PoolExhausted => {
                StatusCode::SERVICE_UNAVAILABLE
            }
            Fault::MalformedCgi(_) => StatusCode::BAD_GATEWAY,
            Fault::Trap(_)
            | Fault::Memory(_)
            | Fault::HostMemory(_)
            | Fault::Resources(_)
            | Fault::NoResponse
            | Fault::GuestError(_)
            | Fault::Exited
            | Fault::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    /// What the metrics count it as.
    pub(crate) fn kind(&self) -> FaultKind {
        match self {
            Fault::Trap(_) => FaultKind::Trap,
            Fault::CpuTime(_) => FaultKind::CpuTimeout,
            Fault::WallTime { .. } => FaultKind::WallTimeout,
            Fault::Memory(_) => FaultKind::Memory,
            Fault::HostMemory(_) | Fault::Resources(_) => FaultKind::HostMemory,
            Fault::NoResponse => FaultKind::NoResponse,
            Fault::GuestError(_) | Fault::Exited => FaultKind::GuestError,
            Fault::MalformedCgi(_) => FaultKind::MalformedCgi,
            Fault::PoolExhausted | Fault::Internal(_) => FaultKind::Internal,
        }
    }

    /// Classifies the error a guest call returned, using what the store saw.
    pub(crate) fn from_call_error(err: wasmtime::Error, state: &GuestState) -> Fault {
        if state.cpu.exceeded {
            return Fault::CpuTime(state.cpu.limit());
        }
        if state.limiter.denied {
            return Fault::Memory(state.limiter.limit());
        }
        if state.host_memory.exceeded {
            return Fault::HostMemory(state.host_memory.limit());
        }
        // A WAGI program's output trapped it in the write that made it malformed.
        if let Some(bad) = err.chain().find_map(|c| c.downcast_ref::<MalformedCgi>()) {
            return Fault::MalformedCgi(bad.0.clone());
        }
        if is_resource_limit(&err) {
            return Fault::Resources(state.host_memory.max_resources());
        }
        if err
            .downcast_ref::<wasmtime::PoolConcurrencyLimitError>()
            .is_some()
        {
            return Fault::PoolExhausted;
        }
        match err.downcast_ref::<wasmtime::Trap>() {
            Some(trap) => Fault::Trap(trap.to_string()),
            // A host call that failed (a stale handle, fields past their limit): the
            // cause is the innermost error; the outer ones are the wasm backtrace.
            None => Fault::Trap(one_line(&err.root_cause().to_string())),
        }
    }
}

impl fmt::Display for Fault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Fault::Trap(msg) => write!(f, "guest trapped: {msg}"),
            Fault::CpuTime(limit) => write!(f, "CPU time limit of {limit:?} exceeded"),
            Fault::WallTime { limit, started } => {
                write!(f, "wall-clock limit of {limit:?} exceeded")?;
                if !*started {
                    write!(f, " before the handler started")?;
                }
                Ok(())
            }
            Fault::Memory(limit) => {
                write!(f, "memory limit of {} MiB exceeded", limit / (1024 * 1024))
            }
            Fault::HostMemory(limit) => write!(
                f,
                "host memory limit of {} exceeded (what the host held for the instance)",
                Size(*limit)
            ),
            Fault::Resources(limit) => write!(
                f,
                "host memory limit exceeded: more than {limit} resources held (max_resources)"
            ),
            Fault::NoResponse => write!(f, "the handler returned without setting a response"),
            Fault::GuestError(msg) => write!(f, "the handler answered with an error: {msg}"),
            Fault::Exited => write!(f, "the program exited with a failure status"),
            Fault::MalformedCgi(why) => write!(f, "malformed CGI response: {why}"),
            Fault::PoolExhausted => write!(f, "no instance free in the host's pool"),
            Fault::Internal(msg) => write!(f, "internal error: {msg}"),
        }
    }
}

/// Whether a call failed for holding more resources than the store allows: the
/// host's resource table is full, or the component's handle limit was reached.
fn is_resource_limit(err: &wasmtime::Error) -> bool {
    err.chain().any(|cause| {
        matches!(
            cause.downcast_ref::<wasmtime::component::ResourceTableError>(),
            Some(wasmtime::component::ResourceTableError::Full)
        ) || cause.to_string().contains("store handle limit exceeded")
    })
}

/// A byte count as the config writes it: `16MiB`, `512KiB`, or bytes.
/// Keeps log lines to one line: wasmtime errors carry multi-line backtraces.
fn one_line(text: &str) -> String {
    let first = text.lines().next().unwrap_or_default();
    first.chars().take(300).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_fault_answers_its_documented_status() {
        let second = Duration::from_secs(1);
        let cases = [
            (Fault::Trap("unreachable".into()), 500),
            (Fault::CpuTime(second), 504),
            (
                Fault::WallTime {
                    limit: second,
                    started: true,
                },
                504,
            ),
            (
                Fault::WallTime {
                    limit: second,
                    started: false,
                },
                503,
            ),
            (Fault::Memory(1 << 20), 500),
            (Fault::HostMemory(1 << 20), 500),
            (Fault::Resources(1000), 500),
            (Fault::NoResponse, 500),
            (Fault::GuestError("oops".into()), 500),
            (Fault::Exited, 500),
            (Fault::MalformedCgi("no head".into()), 502),
            (Fault::PoolExhausted, 503),
            (Fault::Internal("oops".into()), 500),
        ];
        for (fault, status) in cases {
            assert_eq!(fault.status().as_u16(), status, "{fault}");
        }
    }

    #[test]
    fn log_causes_are_one_line() {
        assert_eq!(
            one_line("wasm trap: unreachable\nwasm backtrace:\n  0: f"),
            "wasm trap: unreachable"
        );
    }
}
