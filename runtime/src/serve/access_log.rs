//! One line per request once its response is done: app, method, path, status, body
//! bytes, duration, protocol, and how the body ended when it did not end cleanly.
//! `wedge dev` turns it on; `wedge serve --access-log` too. The line is styled (the
//! status coloured by class) where the log is a terminal: [`LogFields`] writes it.

use std::fmt;
use std::time::Duration;

use http::{Method, Version};
use tracing::field::{Field, Visit};
use tracing_subscriber::field::RecordFields;
use tracing_subscriber::fmt::FormatFields;
use tracing_subscriber::fmt::format::{DefaultFields, Writer};

use crate::log_text::{REQUEST_TARGET, printable, shown};

/// Whether requests are logged.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum AccessLog {
    #[default]
    Off,
    On,
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

/// The field of an access log event holding its line with ANSI styles; the message
/// is the same line without.
const STYLED: &str = "styled";

impl AccessLog {
    /// On, for a log on stderr (styled when stderr is a terminal).
    pub fn for_stderr() -> Self {
        AccessLog::On
    }

    pub fn is_on(self) -> bool {
        self != AccessLog::Off
    }

    /// Logs one request.
    pub fn record(self, entry: &Entry<'_>) {
        if self.is_on() {
            let styled = line(entry, true);
            tracing::info!(styled = styled.as_str(), "{}", line(entry, false));
        }
    }
}

/// The line for `entry`, with ANSI styles or without.
fn line(entry: &Entry<'_>, styled: bool) -> String {
    let status = entry.status;
    let millis = entry.elapsed.as_secs_f64() * 1000.0;
    let protocol = protocol_name(entry.version);
    let ending = match entry.ending {
        Ending::Complete => "",
        Ending::Aborted => " (body aborted)",
        Ending::Dropped => " (client gone)",
    };
    let app = entry
        .app
        .map(|app| format!("[{}] ", printable(app)))
        .unwrap_or_default();
    // The request target is the client's: cut and escaped as a guest's text is (the
    // styled line reaches the terminal as it is).
    let path = shown(format_args!("{}", entry.path), REQUEST_TARGET);
    let (method, bytes) = (entry.method, entry.bytes);
    if !styled {
        return format!(
            "{app}{method} {path} {status} {bytes} B {millis:.1} ms {protocol}{ending}"
        );
    }
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

/// The log's field formatter: tracing's default, which escapes control characters in
/// fields (a guest's output cannot drive the terminal), but for access log lines,
/// whose styles are wedge's own: written as they are when the log's writer takes
/// ANSI styles (a terminal), else without them.
pub struct LogFields;

impl<'writer> FormatFields<'writer> for LogFields {
    fn format_fields<R: RecordFields>(
        &self,
        mut writer: Writer<'writer>,
        fields: R,
    ) -> fmt::Result {
        let mut line = AccessLine::default();
        fields.record(&mut line);
        match line {
            AccessLine {
                styled: Some(styled),
                ..
            } if writer.has_ansi_escapes() => writer.write_str(&styled),
            AccessLine {
                styled: Some(_),
                plain,
            } => writer.write_str(&plain),
            _ => DefaultFields::new().format_fields(writer, fields),
        }
    }
}

/// An access log event's two lines, if the event is one.
#[derive(Default)]
struct AccessLine {
    styled: Option<String>,
    plain: String,
}

impl Visit for AccessLine {
    fn record_str(&mut self, field: &Field, value: &str) {
        if field.name() == STYLED {
            self.styled = Some(value.to_string());
        }
    }

    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        if field.name() == "message" {
            self.plain = format!("{value:?}");
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
        let plain = line(&entry(200, Version::HTTP_2, Ending::Complete), false);
        assert_eq!(plain, "[hello] GET /hi?x=1 200 13 B 1.2 ms h2");
        let plain = line(&entry(200, Version::HTTP_3, Ending::Dropped), false);
        assert!(plain.ends_with("h3 (client gone)"), "{plain}");
    }

    #[test]
    fn styled_line_colours_the_status_by_class() {
        for (status, colour) in [(204, "32"), (304, "36"), (404, "33"), (502, "31")] {
            let styled = line(&entry(status, Version::HTTP_3, Ending::Complete), true);
            assert!(
                styled.contains(&format!("\x1b[{colour}m{status}\x1b[0m")),
                "{styled:?}"
            );
            assert!(styled.ends_with("h3\x1b[0m"), "{styled:?}");
        }
    }

    #[test]
    fn control_characters_of_the_request_are_escaped() {
        let mut request = entry(200, Version::HTTP_11, Ending::Complete);
        request.path = "/\x1b[2J";
        let styled = line(&request, true);
        assert!(styled.contains("GET /\\u{1b}[2J"), "{styled:?}");
    }

    /// Hostile-client review (stop 40): the target was escaped for control characters
    /// only and never cut: a line separator or a bidi override reached the log, and a
    /// 65,000-octet target made a 65 KB line.
    #[test]
    fn a_request_target_is_cut_and_its_separators_and_overrides_escaped() {
        let target = format!("/x\u{2028}y\u{202e}z{}", "b".repeat(65_000));
        let mut request = entry(200, Version::HTTP_11, Ending::Complete);
        request.path = &target;
        let plain = line(&request, false);
        assert!(plain.contains("GET /x\\u{2028}y\\u{202e}z"), "{plain:?}");
        assert!(plain.len() < REQUEST_TARGET + 100, "{} octets", plain.len());
    }

    /// The log as a subscriber writing to a buffer, with ANSI styles or without.
    fn logged(ansi: bool, log: impl FnOnce()) -> String {
        let buffer = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let writer = buffer.clone();
        let subscriber = tracing_subscriber::fmt()
            .fmt_fields(LogFields)
            .with_ansi(ansi)
            .without_time()
            .with_level(false)
            .with_target(false)
            .with_writer(move || Buffer(writer.clone()))
            .finish();
        tracing::subscriber::with_default(subscriber, log);
        String::from_utf8(buffer.lock().unwrap().clone()).unwrap()
    }

    struct Buffer(std::sync::Arc<std::sync::Mutex<Vec<u8>>>);

    impl std::io::Write for Buffer {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().write(bytes)
        }

        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn the_log_writes_styles_on_a_terminal_and_none_elsewhere() {
        let request = entry(404, Version::HTTP_2, Ending::Complete);
        let styled = logged(true, || AccessLog::On.record(&request));
        assert_eq!(styled, format!("{}\n", line(&request, true)), "{styled:?}");
        let plain = logged(false, || AccessLog::On.record(&request));
        assert_eq!(plain, "[hello] GET /hi?x=1 404 13 B 1.2 ms h2\n");
        // Anything else is tracing's as before: escapes in it escaped.
        let other = logged(true, || tracing::info!(n = 1, "guest said \x1b[2J"));
        assert!(!other.contains("\x1b[2J"), "{other:?}");
        assert!(other.contains("guest said \\x1b[2J"), "{other:?}");
    }
}
