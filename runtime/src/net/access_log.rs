//! One line per request: method, path, status, time to the response head, protocol.
//! `wedge dev` turns it on (in colour on a terminal); `wedge serve` leaves it off.

use std::time::Duration;

use http::{Method, StatusCode, Version};

/// Whether and how requests are logged.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum AccessLog {
    #[default]
    Off,
    Plain,
    /// With ANSI colours: the status coloured by class.
    Colored,
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
        let status = entry.status.as_u16();
        let millis = entry.elapsed.as_secs_f64() * 1000.0;
        let protocol = protocol_name(entry.version);
        match self {
            AccessLog::Colored => {
                let colour = match status {
                    200..=299 => "32", // green
                    300..=399 => "36", // cyan
                    400..=499 => "33", // yellow
                    _ => "31",         // red
                };
                format!(
                    "\x1b[1m{} {}\x1b[0m \x1b[{colour}m{status}\x1b[0m {millis:.1} ms \x1b[2m{protocol}\x1b[0m",
                    entry.method, entry.path
                )
            }
            _ => format!(
                "{} {} {status} {millis:.1} ms {protocol}",
                entry.method, entry.path
            ),
        }
    }
}

/// What the log says of one request.
pub struct Entry<'a> {
    pub method: &'a Method,
    pub path: &'a str,
    pub status: StatusCode,
    pub elapsed: Duration,
    pub version: Version,
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

    fn entry(status: u16, version: Version) -> Entry<'static> {
        Entry {
            method: &Method::GET,
            path: "/hi?x=1",
            status: StatusCode::from_u16(status).unwrap(),
            elapsed: Duration::from_micros(1250),
            version,
        }
    }

    #[test]
    fn plain_line_names_method_path_status_time_and_protocol() {
        let line = AccessLog::Plain.line(&entry(200, Version::HTTP_2));
        assert_eq!(line, "GET /hi?x=1 200 1.2 ms h2");
    }

    #[test]
    fn colored_line_colours_the_status_by_class() {
        for (status, colour) in [(204, "32"), (304, "36"), (404, "33"), (502, "31")] {
            let line = AccessLog::Colored.line(&entry(status, Version::HTTP_3));
            assert!(
                line.contains(&format!("\x1b[{colour}m{status}\x1b[0m")),
                "{line:?}"
            );
            assert!(line.ends_with("h3\x1b[0m"), "{line:?}");
        }
    }
}
