//! Request header validation (RFC 9113 §8.2, §8.3). A malformed request is a stream
//! PROTOCOL_ERROR (§8.1.1); validation runs while HPACK delivers fields, so the block is
//! decoded to its end either way and the dynamic table stays in step.

use crate::h2::hpack::FieldSink;

use super::pool::{Pseudo, RequestHead};

/// Builds a request head from a field block, remembering whether it was malformed.
pub(super) struct HeadSink<'h> {
    head: &'h mut RequestHead,
    regular_seen: bool,
    malformed: bool,
}

impl<'h> HeadSink<'h> {
    pub(super) fn new(head: &'h mut RequestHead) -> Self {
        HeadSink {
            head,
            regular_seen: false,
            malformed: false,
        }
    }

    /// Whether the fields form a valid request (§8.3.1): `:method`, and `:scheme` and a
    /// non-empty `:path` unless CONNECT, which needs `:authority` and neither of those.
    pub(super) fn finish(self) -> bool {
        if self.malformed || !self.head.has(Pseudo::Method) {
            return false;
        }
        if self.head.method() == b"CONNECT" {
            return self.head.has(Pseudo::Authority)
                && !self.head.has(Pseudo::Scheme)
                && !self.head.has(Pseudo::Path);
        }
        self.head.has(Pseudo::Scheme) && self.head.has(Pseudo::Path)
    }

    fn pseudo(&mut self, name: &[u8], value: &[u8]) -> bool {
        let pseudo = match name {
            b":method" => Pseudo::Method,
            b":scheme" => Pseudo::Scheme,
            b":authority" => Pseudo::Authority,
            b":path" => Pseudo::Path,
            // :status is a response field; :protocol needs extended CONNECT, not offered.
            _ => return false,
        };
        // After a regular field, repeated, or empty (an empty :path is malformed too).
        if self.regular_seen || self.head.has(pseudo) || value.is_empty() {
            return false;
        }
        self.head.set_pseudo(pseudo, value);
        true
    }

    fn regular(&mut self, name: &[u8], value: &[u8]) -> bool {
        self.regular_seen = true;
        if !valid_name(name) || !valid_value(value) || is_connection_specific(name) {
            return false;
        }
        if name == b"te" && value != b"trailers" {
            return false;
        }
        if name == b"content-length" {
            let Some(len) = parse_content_length(value) else {
                return false;
            };
            // Repeats must agree (RFC 9110 §8.6).
            if self.head.content_length().is_some_and(|prev| prev != len) {
                return false;
            }
            self.head.set_content_length(len);
        }
        self.head.push_field(name, value);
        true
    }
}

impl FieldSink for HeadSink<'_> {
    fn field(&mut self, name: &[u8], value: &[u8]) {
        if self.malformed {
            return;
        }
        let ok = if name.first() == Some(&b':') {
            self.pseudo(name, value)
        } else {
            self.regular(name, value)
        };
        self.malformed = !ok;
    }
}

/// Validates trailers (§8.1): regular fields only, under the same rules; they are not
/// delivered.
#[derive(Default)]
pub(super) struct TrailerSink {
    malformed: bool,
}

impl TrailerSink {
    pub(super) fn finish(self) -> bool {
        !self.malformed
    }
}

impl FieldSink for TrailerSink {
    fn field(&mut self, name: &[u8], value: &[u8]) {
        self.malformed |= name.first() == Some(&b':')
            || !valid_name(name)
            || !valid_value(value)
            || is_connection_specific(name);
    }
}

/// Takes every field and keeps none: the block of a refused or reset stream must still be
/// decoded, since HPACK is connection state (DESIGN 4.5); the decoder bounds its scratch.
pub(super) struct Discard;

impl FieldSink for Discard {
    fn field(&mut self, _: &[u8], _: &[u8]) {}
}

/// A field name is a non-empty token with no uppercase letters (§8.2.1, RFC 9110 §5.1).
fn valid_name(name: &[u8]) -> bool {
    !name.is_empty()
        && name.iter().all(|&c| {
            c.is_ascii_lowercase() || c.is_ascii_digit() || b"!#$%&'*+-.^_`|~".contains(&c)
        })
}

/// No NUL, CR or LF anywhere; no leading or trailing space or tab (§8.2.1).
fn valid_value(value: &[u8]) -> bool {
    let edge = |c: Option<&u8>| matches!(c, Some(b' ' | b'\t'));
    !value.iter().any(|&c| matches!(c, 0 | b'\r' | b'\n'))
        && !edge(value.first())
        && !edge(value.last())
}

/// Fields that only mean something to one HTTP/1.1 connection (§8.2.2).
fn is_connection_specific(name: &[u8]) -> bool {
    matches!(
        name,
        b"connection" | b"keep-alive" | b"proxy-connection" | b"transfer-encoding" | b"upgrade"
    )
}

fn parse_content_length(value: &[u8]) -> Option<u64> {
    if value.is_empty() || !value.iter().all(u8::is_ascii_digit) {
        return None;
    }
    std::str::from_utf8(value).ok()?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(fields: &[(&str, &str)]) -> bool {
        let mut head = RequestHead::default();
        let mut sink = HeadSink::new(&mut head);
        for (n, v) in fields {
            sink.field(n.as_bytes(), v.as_bytes());
        }
        sink.finish()
    }

    const GET: [(&str, &str); 3] = [(":method", "GET"), (":scheme", "https"), (":path", "/")];

    fn with(extra: (&str, &str)) -> bool {
        let mut fields = GET.to_vec();
        fields.push(extra);
        check(&fields)
    }

    #[test]
    fn a_plain_get_is_valid() {
        assert!(check(&GET));
        assert!(with(("te", "trailers")));
        assert!(with(("content-length", "12")));
        assert!(with(("x-ok", "a b")));
    }

    #[test]
    fn missing_repeated_or_unknown_pseudo_headers_are_malformed() {
        assert!(!check(&GET[..2]));
        assert!(!check(&GET[1..]));
        assert!(!check(&[GET[0], GET[1], (":path", "")]));
        assert!(!with((":path", "/again")));
        assert!(!with((":status", "200")));
        assert!(!with((":protocol", "websocket")));
        assert!(!check(&[GET[0], ("x", "y"), GET[1], GET[2]]));
    }

    #[test]
    fn connect_needs_authority_and_nothing_else() {
        assert!(check(&[(":method", "CONNECT"), (":authority", "a:443")]));
        assert!(!check(&[(":method", "CONNECT")]));
        assert!(!check(&[
            (":method", "CONNECT"),
            (":authority", "a:443"),
            (":path", "/")
        ]));
    }

    #[test]
    fn bad_names_and_values_are_malformed() {
        assert!(!with(("X-Upper", "v")));
        assert!(!with(("", "v")));
        assert!(!with(("a b", "v")));
        assert!(!with(("x", "a\r\nb")));
        assert!(!with(("x", "nul\0")));
        assert!(!with(("x", " lead")));
        assert!(!with(("x", "trail\t")));
    }

    #[test]
    fn connection_specific_fields_and_te_are_malformed() {
        for name in [
            "connection",
            "keep-alive",
            "proxy-connection",
            "transfer-encoding",
            "upgrade",
        ] {
            assert!(!with((name, "x")), "{name}");
        }
        assert!(!with(("te", "gzip")));
    }

    #[test]
    fn content_length_must_be_digits_and_agree() {
        assert!(!with(("content-length", "-1")));
        assert!(!with(("content-length", "1x")));
        let mut fields = GET.to_vec();
        fields.extend([("content-length", "3"), ("content-length", "4")]);
        assert!(!check(&fields));
    }

    #[test]
    fn trailers_carry_no_pseudo_headers() {
        let mut ok = TrailerSink::default();
        ok.field(b"x-sum", b"1");
        assert!(ok.finish());
        let mut bad = TrailerSink::default();
        bad.field(b":path", b"/");
        assert!(!bad.finish());
    }
}
