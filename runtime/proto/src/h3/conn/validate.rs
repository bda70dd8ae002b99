//! Request validation (RFC 9114 §4.1.2, §4.2, §4.3): fields are checked as QPACK delivers
//! them; a malformed request is an H3_MESSAGE_ERROR on its stream, never passed on.

use crate::h3::qpack::FieldSink;

use super::pool::{Pseudo, RequestHead};

/// Builds a request head from a field section, remembering whether it was malformed.
pub(super) struct HeadSink<'h> {
    head: &'h mut RequestHead,
    regular_seen: bool,
    /// Where `host` is in the field list.
    host: Option<usize>,
    malformed: bool,
}

impl<'h> HeadSink<'h> {
    pub(super) fn new(head: &'h mut RequestHead) -> Self {
        HeadSink {
            head,
            regular_seen: false,
            host: None,
            malformed: false,
        }
    }

    /// Whether the fields form a valid request (§4.3.1): `:method`, and `:scheme` and
    /// `:path` unless CONNECT, which needs `:authority` and neither of those (§4.4); an
    /// http or https request names its authority in `:authority` or `host`, and the two
    /// agree when both are sent.
    pub(super) fn finish(self) -> bool {
        let head = self.head;
        if self.malformed || !head.has(Pseudo::Method) {
            return false;
        }
        if head.method() == b"CONNECT" {
            return head.has(Pseudo::Authority)
                && !head.has(Pseudo::Scheme)
                && !head.has(Pseudo::Path);
        }
        if !head.has(Pseudo::Scheme) || !head.has(Pseudo::Path) {
            return false;
        }
        if matches!(head.scheme(), b"http" | b"https") {
            let host = self.host.and_then(|i| head.fields().nth(i)).map(|(_, v)| v);
            return match (head.authority(), host) {
                (None, None) => false,
                (Some(authority), Some(host)) => authority == host,
                _ => true,
            };
        }
        true
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
        if self.regular_seen || self.head.has(pseudo) || value.is_empty() || !valid_value(value) {
            return false;
        }
        self.head.set_pseudo(pseudo, value);
        true
    }

    fn regular(&mut self, name: &[u8], value: &[u8]) -> bool {
        self.regular_seen = true;
        if !valid_regular(name, value) {
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
        if name == b"host" {
            if self.host.is_some() {
                return false;
            }
            self.host = Some(self.head.fields().len());
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

/// Builds the trailers' field list (§4.1): regular fields only, under the same rules.
pub(super) struct TrailerSink<'h> {
    head: &'h mut RequestHead,
    malformed: bool,
}

impl<'h> TrailerSink<'h> {
    pub(super) fn new(head: &'h mut RequestHead) -> Self {
        TrailerSink {
            head,
            malformed: false,
        }
    }

    pub(super) fn finish(self) -> bool {
        !self.malformed
    }
}

impl FieldSink for TrailerSink<'_> {
    fn field(&mut self, name: &[u8], value: &[u8]) {
        if self.malformed || !valid_regular(name, value) {
            self.malformed = true;
            return;
        }
        self.head.push_field(name, value);
    }
}

/// A regular field a request may carry: a valid lowercase name, a valid value, not
/// connection-specific (§4.2), `te` only as "trailers".
fn valid_regular(name: &[u8], value: &[u8]) -> bool {
    valid_name(name)
        && valid_value(value)
        && !matches!(
            name,
            b"connection" | b"keep-alive" | b"proxy-connection" | b"transfer-encoding" | b"upgrade"
        )
        && (name != b"te" || value == b"trailers")
}

/// A token (RFC 9110 §5.6.2) without uppercase letters (§4.2). Pseudo-header names never
/// get here: a leading ':' is not a token character.
fn valid_name(name: &[u8]) -> bool {
    !name.is_empty()
        && name.iter().all(|&c| {
            c.is_ascii_lowercase() || c.is_ascii_digit() || b"!#$%&'*+-.^_`|~".contains(&c)
        })
}

/// No NUL, CR or LF, and no leading or trailing whitespace (RFC 9110 §5.5, RFC 9114 §10.3).
fn valid_value(value: &[u8]) -> bool {
    let edge_ws = |c: Option<&u8>| matches!(c, Some(b' ' | b'\t'));
    !value.iter().any(|&c| matches!(c, 0 | b'\r' | b'\n'))
        && !edge_ws(value.first())
        && !edge_ws(value.last())
}

/// A content-length value: digits only, at least one, fitting in u64.
fn parse_content_length(value: &[u8]) -> Option<u64> {
    if value.is_empty() || !value.iter().all(u8::is_ascii_digit) {
        return None;
    }
    value.iter().try_fold(0u64, |n, &d| {
        n.checked_mul(10)?.checked_add(u64::from(d - b'0'))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(fields: &[(&str, &str)]) -> bool {
        let mut head = RequestHead::default();
        let mut sink = HeadSink::new(&mut head);
        for (n, v) in fields {
            sink.field(n.as_bytes(), v.as_bytes());
        }
        sink.finish()
    }

    const GET: [(&str, &str); 4] = [
        (":method", "GET"),
        (":scheme", "https"),
        (":authority", "example.com"),
        (":path", "/"),
    ];

    fn get_with(extra: &[(&str, &str)]) -> bool {
        let mut fields = GET.to_vec();
        fields.extend_from_slice(extra);
        request(&fields)
    }

    #[test]
    fn a_plain_get_is_valid() {
        assert!(request(&GET));
        assert!(get_with(&[("te", "trailers"), ("content-length", "0")]));
    }

    #[test]
    fn pseudo_header_rules() {
        let mut late = GET.to_vec();
        late.insert(2, ("accept", "*/*"));
        assert!(!request(&late), "pseudo-header after a regular field");
        assert!(!get_with(&[(":path", "/again")]), "duplicated");
        assert!(!get_with(&[(":status", "200")]), "response pseudo-header");
        assert!(
            !get_with(&[(":protocol", "websocket")]),
            "extended CONNECT not offered"
        );
        assert!(!get_with(&[(":foo", "bar")]), "unknown");
        for missing in [":method", ":scheme", ":path"] {
            let fields: Vec<_> = GET.iter().copied().filter(|f| f.0 != missing).collect();
            assert!(!request(&fields), "missing {missing}");
        }
        let mut empty_path = GET.to_vec();
        empty_path[3].1 = "";
        assert!(!request(&empty_path), "empty :path");
    }

    #[test]
    fn authority_or_host() {
        let no_authority: Vec<_> = GET
            .iter()
            .copied()
            .filter(|f| f.0 != ":authority")
            .collect();
        assert!(!request(&no_authority), "https needs an authority");
        let mut with_host = no_authority.clone();
        with_host.push(("host", "example.com"));
        assert!(request(&with_host));
        assert!(get_with(&[("host", "example.com")]), "both, agreeing");
        assert!(!get_with(&[("host", "other.example")]), "both, disagreeing");
        with_host.push(("host", "example.com"));
        assert!(!request(&with_host), "two hosts");
    }

    #[test]
    fn connect() {
        assert!(request(&[
            (":method", "CONNECT"),
            (":authority", "example.com:443")
        ]));
        assert!(!request(&[(":method", "CONNECT")]), "no authority");
        assert!(!request(&[
            (":method", "CONNECT"),
            (":authority", "example.com:443"),
            (":path", "/")
        ]));
    }

    #[test]
    fn field_name_and_value_rules() {
        assert!(!get_with(&[("Accept", "*/*")]), "uppercase name");
        assert!(!get_with(&[("bad name", "x")]));
        assert!(!get_with(&[("", "x")]));
        for value in ["a\0b", "a\rb", "a\nb", " a", "a\t"] {
            assert!(!get_with(&[("x-v", value)]), "{value:?}");
        }
        assert!(get_with(&[("x-v", "a b\tc")]), "inner whitespace is fine");
    }

    #[test]
    fn connection_specific_fields() {
        for name in [
            "connection",
            "keep-alive",
            "proxy-connection",
            "transfer-encoding",
            "upgrade",
        ] {
            assert!(!get_with(&[(name, "x")]), "{name}");
        }
        assert!(!get_with(&[("te", "gzip")]));
    }

    #[test]
    fn content_length() {
        let mut head = RequestHead::default();
        let mut sink = HeadSink::new(&mut head);
        for (n, v) in GET
            .iter()
            .chain(&[("content-length", "42"), ("content-length", "42")])
        {
            sink.field(n.as_bytes(), v.as_bytes());
        }
        assert!(sink.finish());
        assert_eq!(head.content_length(), Some(42));
        assert!(!get_with(&[
            ("content-length", "1"),
            ("content-length", "2")
        ]));
        for bad in ["", "-1", "1,1", "0x10", "99999999999999999999"] {
            assert!(!get_with(&[("content-length", bad)]), "{bad:?}");
        }
    }

    #[test]
    fn trailers_take_no_pseudo_headers() {
        let mut head = RequestHead::default();
        let mut sink = TrailerSink::new(&mut head);
        sink.field(b"x-checksum", b"abc");
        assert!(sink.finish());
        assert_eq!(head.fields().len(), 1);
        let mut sink = TrailerSink::new(&mut head);
        sink.field(b":path", b"/");
        assert!(!sink.finish());
    }
}
