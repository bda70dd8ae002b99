//! Request field validation shared by the HTTP/2 and HTTP/3 cores (RFC 9113 §8.2–§8.3,
//! RFC 9114 §4.1.2–§4.3). Fields are checked as HPACK or QPACK delivers them, so a field
//! block is decoded to its end either way and the compression state stays in step. The
//! sinks only answer "malformed or not"; each core maps malformed to its own error (HTTP/2:
//! a stream PROTOCOL_ERROR, RFC 9113 §8.1.1; HTTP/3: H3_MESSAGE_ERROR, RFC 9114 §4.1.2).

use crate::field_coding::FieldSink;

use super::{Pseudo, RequestHead};

/// Where the two protocols' request rules differ.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Rules {
    /// An `http` or `https` request must name its authority in `:authority` or `host`.
    /// RFC 9114 §4.3.1 requires it of HTTP/3; RFC 9113 §8.3.1 does not make its absence
    /// malformed on HTTP/2.
    pub(crate) authority_required: bool,
}

impl Rules {
    /// HTTP/2 (RFC 9113 §8.3.1).
    pub(crate) const H2: Rules = Rules {
        authority_required: false,
    };
    /// HTTP/3 (RFC 9114 §4.3.1).
    pub(crate) const H3: Rules = Rules {
        authority_required: true,
    };
}

/// Builds a request head from a field section, remembering whether it was malformed.
pub(crate) struct HeadSink<'h> {
    head: &'h mut RequestHead,
    rules: Rules,
    regular_seen: bool,
    /// Where `host` is in the field list.
    host: Option<usize>,
    malformed: bool,
}

impl<'h> HeadSink<'h> {
    pub(crate) fn new(head: &'h mut RequestHead, rules: Rules) -> Self {
        HeadSink {
            head,
            rules,
            regular_seen: false,
            host: None,
            malformed: false,
        }
    }

    /// Whether the fields form a valid request: `:method`, and `:scheme` and a non-empty
    /// `:path` unless CONNECT, which needs `:authority` and neither of those (RFC 9113
    /// §8.3.1, §8.5; RFC 9114 §4.3.1, §4.4). A `host` that disagrees with `:authority` is
    /// malformed on both; whether an http(s) request may name no authority at all is
    /// [`Rules::authority_required`].
    pub(crate) fn finish(self) -> bool {
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
        let host = self.host.and_then(|i| head.fields().nth(i)).map(|(_, v)| v);
        match (head.authority(), host) {
            (Some(authority), Some(host)) => authority == host,
            (None, None) => {
                !(self.rules.authority_required && matches!(head.scheme(), b"http" | b"https"))
            }
            _ => true,
        }
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
        // After a regular field, repeated, or empty (an empty :path is malformed too); no
        // NUL, CR or LF in any field value, pseudo-headers included (RFC 9113 §8.2.1).
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
            // One Host at most (RFC 9110 §7.2).
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

/// Checks trailers (RFC 9113 §8.1, RFC 9114 §4.1) and collects them into a head's field
/// list: regular fields only, under the same rules as a head's, and values without
/// control characters (RFC 9110 §5.5). A head with such a value is refused before its
/// handler runs; trailers reach a handler that already runs, so only fields it can take
/// pass.
pub(crate) struct TrailerSink<'h> {
    head: &'h mut RequestHead,
    malformed: bool,
}

impl<'h> TrailerSink<'h> {
    pub(crate) fn new(head: &'h mut RequestHead) -> Self {
        TrailerSink {
            head,
            malformed: false,
        }
    }

    pub(crate) fn finish(self) -> bool {
        !self.malformed
    }
}

impl FieldSink for TrailerSink<'_> {
    fn field(&mut self, name: &[u8], value: &[u8]) {
        if self.malformed || !is_valid_trailer(name, value) {
            self.malformed = true;
            return;
        }
        self.head.push_field(name, value);
    }
}

/// A field request trailers may carry: a regular field under a head's rules (RFC 9113
/// §8.1, RFC 9114 §4.1: no pseudo-headers, nothing connection-specific) whose value has
/// no control character (RFC 9110 §5.5). HTTP/1.1's driver applies it to the trailer
/// section hyper parsed, so all three protocols take the same trailers.
pub fn is_valid_trailer(name: &[u8], value: &[u8]) -> bool {
    valid_regular(name, value) && !has_control(value)
}

/// Takes every field and keeps none: the block of a refused or reset stream must still be
/// decoded, since HPACK is connection state (DESIGN 4.5); the decoder bounds its scratch.
pub(crate) struct Discard;

impl FieldSink for Discard {
    fn field(&mut self, _: &[u8], _: &[u8]) {}
}

/// A regular field a request may carry: a valid lowercase name, a valid value, not
/// connection-specific (RFC 9113 §8.2.2, RFC 9114 §4.2), `te` only as "trailers".
/// Pseudo-header names never pass: a leading ':' is not a token character.
fn valid_regular(name: &[u8], value: &[u8]) -> bool {
    valid_name(name)
        && valid_value(value)
        && !is_connection_specific(name)
        && (name != b"te" || value == b"trailers")
}

/// A token (RFC 9110 §5.6.2) without uppercase letters (RFC 9113 §8.2.1, RFC 9114 §4.2).
fn valid_name(name: &[u8]) -> bool {
    !name.is_empty()
        && name.iter().all(|&c| {
            c.is_ascii_lowercase() || c.is_ascii_digit() || b"!#$%&'*+-.^_`|~".contains(&c)
        })
}

/// No NUL, CR or LF anywhere; no leading or trailing space or tab (RFC 9113 §8.2.1,
/// RFC 9114 §10.3, RFC 9110 §5.5).
fn valid_value(value: &[u8]) -> bool {
    let edge_ws = |c: Option<&u8>| matches!(c, Some(b' ' | b'\t'));
    !value.iter().any(|&c| matches!(c, 0 | b'\r' | b'\n'))
        && !edge_ws(value.first())
        && !edge_ws(value.last())
}

/// A control character other than HTAB (RFC 9110 §5.5: not in a field value).
fn has_control(value: &[u8]) -> bool {
    value.iter().any(|&c| (c < 0x20 && c != b'\t') || c == 0x7f)
}

/// Fields that only mean something to one HTTP/1.1 connection.
fn is_connection_specific(name: &[u8]) -> bool {
    matches!(
        name,
        b"connection" | b"keep-alive" | b"proxy-connection" | b"transfer-encoding" | b"upgrade"
    )
}

/// A content-length value: digits only, at least one, fitting in u64 (never overflows).
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

    const BOTH: [(Rules, &str); 2] = [(Rules::H2, "h2"), (Rules::H3, "h3")];

    fn request(rules: Rules, fields: &[(&str, &str)]) -> bool {
        let mut head = RequestHead::default();
        let mut sink = HeadSink::new(&mut head, rules);
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

    fn get_with(rules: Rules, extra: &[(&str, &str)]) -> bool {
        let mut fields = GET.to_vec();
        fields.extend_from_slice(extra);
        request(rules, &fields)
    }

    fn without(name: &str) -> Vec<(&'static str, &'static str)> {
        GET.iter().copied().filter(|f| f.0 != name).collect()
    }

    #[test]
    fn a_plain_get_is_valid() {
        for (rules, p) in BOTH {
            assert!(request(rules, &GET), "{p}");
            assert!(
                get_with(rules, &[("te", "trailers"), ("content-length", "0")]),
                "{p}"
            );
            assert!(get_with(rules, &[("x-ok", "a b")]), "{p}");
        }
    }

    #[test]
    fn pseudo_header_rules() {
        for (rules, p) in BOTH {
            let mut late = GET.to_vec();
            late.insert(2, ("accept", "*/*"));
            assert!(
                !request(rules, &late),
                "{p}: pseudo-header after a regular field"
            );
            assert!(!get_with(rules, &[(":path", "/again")]), "{p}: duplicated");
            assert!(
                !get_with(rules, &[(":status", "200")]),
                "{p}: response pseudo-header"
            );
            assert!(
                !get_with(rules, &[(":protocol", "websocket")]),
                "{p}: extended CONNECT not offered"
            );
            assert!(!get_with(rules, &[(":foo", "bar")]), "{p}: unknown");
            for missing in [":method", ":scheme", ":path"] {
                assert!(!request(rules, &without(missing)), "{p}: missing {missing}");
            }
            let mut empty_path = GET.to_vec();
            empty_path[3].1 = "";
            assert!(!request(rules, &empty_path), "{p}: empty :path");
        }
    }

    /// RFC 9113 §8.2.1: NUL, CR and LF are forbidden in every field value, pseudo-header
    /// values included. (The HTTP/2 core used to let them through in pseudo-headers.)
    #[test]
    fn pseudo_header_values_carry_no_nul_cr_or_lf() {
        for (rules, p) in BOTH {
            for (i, bad) in [
                (3, "/a\r\nx-injected: 1"),
                (3, "/a\0"),
                (2, "example.com\n"),
                (0, "GET\r"),
            ] {
                let mut fields = GET.to_vec();
                fields[i].1 = bad;
                assert!(!request(rules, &fields), "{p}: {bad:?}");
            }
        }
    }

    /// RFC 9113 §8.3.1, RFC 9114 §4.3.1: a `host` that disagrees with `:authority` is
    /// malformed on both protocols (the HTTP/2 core used to accept it); one `host` at most.
    #[test]
    fn host_agrees_with_authority() {
        for (rules, p) in BOTH {
            assert!(get_with(rules, &[("host", "example.com")]), "{p}: agreeing");
            assert!(
                !get_with(rules, &[("host", "other.example")]),
                "{p}: disagreeing"
            );
            let mut host_only = without(":authority");
            host_only.push(("host", "example.com"));
            assert!(request(rules, &host_only), "{p}: host alone");
            host_only.push(("host", "example.com"));
            assert!(!request(rules, &host_only), "{p}: two hosts");
        }
    }

    /// RFC 9114 §4.3.1 requires `:authority` or `host` of an http(s) request on HTTP/3;
    /// RFC 9113 §8.3.1 does not make their absence malformed on HTTP/2.
    #[test]
    fn authority_or_host_required_on_h3_only() {
        let no_authority = without(":authority");
        assert!(
            !request(Rules::H3, &no_authority),
            "h3: https needs an authority"
        );
        assert!(request(Rules::H2, &no_authority), "h2: https may omit it");
        let mut other_scheme = no_authority.clone();
        other_scheme[1].1 = "foo";
        assert!(
            request(Rules::H3, &other_scheme),
            "h3: only http(s) need one"
        );
    }

    #[test]
    fn connect_needs_authority_and_nothing_else() {
        for (rules, p) in BOTH {
            assert!(
                request(
                    rules,
                    &[(":method", "CONNECT"), (":authority", "example.com:443")]
                ),
                "{p}"
            );
            assert!(
                !request(rules, &[(":method", "CONNECT")]),
                "{p}: no authority"
            );
            assert!(
                !request(
                    rules,
                    &[
                        (":method", "CONNECT"),
                        (":authority", "example.com:443"),
                        (":path", "/")
                    ]
                ),
                "{p}: with :path"
            );
        }
    }

    #[test]
    fn field_name_and_value_rules() {
        for (rules, p) in BOTH {
            assert!(
                !get_with(rules, &[("Accept", "*/*")]),
                "{p}: uppercase name"
            );
            assert!(!get_with(rules, &[("bad name", "x")]), "{p}");
            assert!(!get_with(rules, &[("", "x")]), "{p}");
            for value in ["a\0b", "a\rb", "a\nb", "a\r\nb", " a", "a\t"] {
                assert!(!get_with(rules, &[("x-v", value)]), "{p}: {value:?}");
            }
            assert!(
                get_with(rules, &[("x-v", "a b\tc")]),
                "{p}: inner whitespace is fine"
            );
        }
    }

    #[test]
    fn connection_specific_fields_and_te() {
        for (rules, p) in BOTH {
            for name in [
                "connection",
                "keep-alive",
                "proxy-connection",
                "transfer-encoding",
                "upgrade",
            ] {
                assert!(!get_with(rules, &[(name, "x")]), "{p}: {name}");
            }
            assert!(!get_with(rules, &[("te", "gzip")]), "{p}");
        }
    }

    #[test]
    fn content_length_is_digits_fits_and_agrees() {
        for (rules, p) in BOTH {
            let mut head = RequestHead::default();
            let mut sink = HeadSink::new(&mut head, rules);
            for (n, v) in GET
                .iter()
                .chain(&[("content-length", "42"), ("content-length", "42")])
            {
                sink.field(n.as_bytes(), v.as_bytes());
            }
            assert!(sink.finish(), "{p}");
            assert_eq!(head.content_length(), Some(42), "{p}");
            assert!(
                !get_with(rules, &[("content-length", "1"), ("content-length", "2")]),
                "{p}"
            );
            for bad in ["", "-1", "1x", "1,1", "0x10", "99999999999999999999"] {
                assert!(!get_with(rules, &[("content-length", bad)]), "{p}: {bad:?}");
            }
        }
        assert_eq!(
            parse_content_length(b"18446744073709551615"),
            Some(u64::MAX)
        );
        assert_eq!(parse_content_length(b"18446744073709551616"), None);
    }

    #[test]
    fn trailers_take_regular_fields_only() {
        let mut head = RequestHead::default();
        let mut sink = TrailerSink::new(&mut head);
        sink.field(b"x-checksum", b"abc");
        sink.field(b"x-note", b"tab\there, obs-text \xe9");
        assert!(sink.finish());
        let collected: Vec<_> = head.fields().collect();
        assert_eq!(
            collected,
            [
                (&b"x-checksum"[..], &b"abc"[..]),
                (b"x-note", b"tab\there, obs-text \xe9")
            ]
        );

        for (name, value) in [
            (":path", "/"),
            ("X-Upper", "v"),
            ("x", "a\r\nb"),
            ("x", "a\x01b"),
            ("x", "a\x7fb"),
            ("connection", "close"),
            ("te", "gzip"),
        ] {
            let mut head = RequestHead::default();
            let mut sink = TrailerSink::new(&mut head);
            sink.field(name.as_bytes(), value.as_bytes());
            assert!(!sink.finish(), "{name}: {value:?}");
        }
    }
}
