//! One line per request once its response is done: app, method, path, status, body
//! bytes, duration, protocol, and how the body ended when it did not end cleanly.
//! `wedge dev` turns it on (in colour on a terminal); `wedge serve --access-log` too.

use std::time::Duration;

use http::{Method, Version};

/// Whether and how requests are logged.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum AccessLog {
    #[default]
    Off,
    Plain,
    /// With ANSI colours: the status coloured by class.
    Colored,
}

/// How a response body ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ending {
    /// Sent to its end.
    Complete,
    /// The handler failed after the head: the body was cut off.
    Aborted,
    /// The connection let go of it first (client gone, stream reset).
    Dropped,
}

impl AccessLog {
    /// On, in colour when stderr (where the log goes) is a terminal.
    pub fn for_stderr() -> Self {
        if std::io::IsTerminal::is_terminal(&std::io::stderr()) {
            AccessLog::Colored
        } else {
            AccessLog::Plain
        }
    }

    pub fn is_on(self) -> bool {
        self != AccessLog::Off
    }

    /// Logs one request.
    pub fn record(self, entry: &Entry<'_>) {
        if self.is_on() {
            tracing::info!("{}", self.line(entry));
        }
    }

    fn line(self, entry: &Entry<'_>) -> String {
        let status = entry.status;
        let millis = entry.elapsed.as_secs_f64() * 1000.0;
        let protocol = protocol_name(entry.version);
        let ending = match entry.ending {
            Ending::Complete => "",
            Ending::Aborted => " (body aborted)",
            Ending::Dropped => " (client gone)",
        };
        let app = entry.app.map(|app| format!("[{app}] ")).unwrap_or_default();
        let (method, path, bytes) = (entry.method, entry.path, entry.bytes);
        match self {
            AccessLog::Colored => {
                let colour = match status {
                    200..=299 => "32", // green
                    300..=399 => "36", // cyan
                    400..=499 => "33", // yellow
                    _ => "31",         // red
                };
                format!(
                    "{app}\x1b[1m{method} {path}\x1b[0m \x1b[{colour}m{status}\x1b[0m {bytes} B {millis:.1} ms \x1b[2m{protocol}\x1b[0m{ending}"
                )
            }
            _ => {
                format!("{app}{method} {path} {status} {bytes} B {millis:.1} ms {protocol}{ending}")
            }
        }
    }
}

/// What the log says of one request.
pub struct Entry<'a> {
    /// The app it was routed to; `None` when no route matched.
    pub app: Option<&'a str>,
    pub method: &'a Method,
    pub path: &'a str,
    pub status: u16,
    /// Response body bytes sent.
    pub bytes: u64,
    pub elapsed: Duration,
    pub version: Version,
    pub ending: Ending,
}

fn protocol_name(version: Version) -> &'static str {
    match version {
        Version::HTTP_09 => "HTTP/0.9",
        Version::HTTP_10 => "HTTP/1.0",
        Version::HTTP_11 => "HTTP/1.1",
        Version::HTTP_2 => "h2",
        Version::HTTP_3 => "h3",
        _ => "HTTP/?",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(status: u16, version: Version, ending: Ending) -> Entry<'static> {
        Entry {
            app: Some("hello"),
            method: &Method::GET,
            path: "/hi?x=1",
            status,
            bytes: 13,
            elapsed: Duration::from_micros(1250),
            version,
            ending,
        }
    }

    #[test]
    fn plain_line_names_app_method_path_status_bytes_time_and_protocol() {
        let line = AccessLog::Plain.line(&entry(200, Version::HTTP_2, Ending::Complete));
        assert_eq!(line, "[hello] GET /hi?x=1 200 13 B 1.2 ms h2");
        let line = AccessLog::Plain.line(&entry(200, Version::HTTP_3, Ending::Dropped));
        assert!(line.ends_with("h3 (client gone)"), "{line}");
    }

    #[test]
    fn colored_line_colours_the_status_by_class() {
        for (status, colour) in [(204, "32"), (304, "36"), (404, "33"), (502, "31")] {
            let line = AccessLog::Colored.line(&entry(status, Version::HTTP_3, Ending::Complete));
            assert!(
                line.contains(&format!("\x1b[{colour}m{status}\x1b[0m")),
                "{line:?}"
            );
            assert!(line.ends_with("h3\x1b[0m"), "{line:?}");
        }
    }
}
