//! The head of a CGI response (RFC 3875 §6): header lines, each `Name: value`, ended
//! by an empty line. `Status: 404 Not Found` sets the status, `Location` without a
//! status is a redirect (`302`), every other field is the response's; at least one of
//! `Content-Type`, `Location` and `Status` must be there. Lines end with LF or CRLF.
//! Fields that frame the message on the wire are wedge's to write, so a program's
//! are dropped; its `Content-Length` is kept and held to (see `stdout`).

use http::header::{self, HeaderName, HeaderValue};
use http::{HeaderMap, StatusCode};

pub(crate) use crate::host::fault::MalformedCgi;

/// A parsed response head.
#[derive(Debug)]
pub(crate) struct CgiHead {
    pub status: StatusCode,
    pub headers: HeaderMap,
    /// Its `Content-Length`, which the body must match.
    pub content_length: Option<u64>,
}

/// Where the head's empty line ends in `output` (the offset of the body's first
/// byte), if it has arrived. `from`: where to start looking (what was searched before,
/// less the three bytes an end may straddle).
pub(crate) fn head_end(output: &[u8], from: usize) -> Option<usize> {
    let mut start = from.saturating_sub(3);
    while let Some(newline) = output[start..].iter().position(|&b| b == b'\n') {
        let at = start + newline;
        // An empty line: the newline before this one, with at most a CR between.
        let line = &output[..at];
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        if at == 0 || line.is_empty() || line.ends_with(b"\n") {
            return Some(at + 1);
        }
        start = at + 1;
    }
    None
}

/// The head in `text` (everything before its empty line).
pub(crate) fn parse(text: &[u8]) -> Result<CgiHead, MalformedCgi> {
    let mut status = None;
    let mut headers = HeaderMap::new();
    let mut content_length = None;
    let lines = text
        .split(|&b| b == b'\n')
        .map(|line| line.strip_suffix(b"\r").unwrap_or(line))
        .filter(|line| !line.is_empty());
    for (number, line) in lines.enumerate() {
        let bad = |why: &str| {
            MalformedCgi(format!(
                "CGI response head line {}: {why}: `{}`",
                number + 1,
                String::from_utf8_lossy(&line[..line.len().min(80)]).escape_debug()
            ))
        };
        let too_many = || bad("more fields than a response can hold");
        let colon = line
            .iter()
            .position(|&b| b == b':')
            .ok_or_else(|| bad("not a `Name: value` field"))?;
        let name = HeaderName::from_bytes(&line[..colon]).map_err(|_| bad("not a field name"))?;
        let value = line[colon + 1..].trim_ascii();
        let value = HeaderValue::from_bytes(value).map_err(|_| bad("not a field value"))?;
        if name.as_str() == "status" {
            status =
                Some(parse_status(&value).ok_or_else(|| bad("not a status like `404 Not Found`"))?);
        } else if is_singular(&name) {
            if name == header::CONTENT_LENGTH {
                content_length = Some(parse_length(&value).ok_or_else(|| bad("not a length"))?);
            }
            // `insert` and `append` panic past `HeaderMap`'s capacity, which a long
            // enough `max_cgi_head` lets a program reach.
            headers.try_insert(name, value).map_err(|_| too_many())?;
        } else if !is_framing(&name) {
            headers.try_append(name, value).map_err(|_| too_many())?;
        }
    }
    let status = match status {
        Some(status) => status,
        None if headers.contains_key(header::LOCATION) => StatusCode::FOUND,
        None if headers.contains_key(header::CONTENT_TYPE) => StatusCode::OK,
        None => {
            return Err(MalformedCgi(
                "CGI response head has none of `Content-Type`, `Location` and `Status`".into(),
            ));
        }
    };
    if status == StatusCode::NO_CONTENT {
        // A `204` has no content, so no length of it to send (RFC 9110 §8.6).
        headers.remove(header::CONTENT_LENGTH);
        content_length = None;
    }
    Ok(CgiHead {
        status,
        headers,
        content_length,
    })
}

/// Fields a response has one of: a program that writes one twice means its last,
/// as Apache's mod_cgi takes it (two would reach the client as a list, which a
/// browser refuses for `Location` and `Content-Length`).
fn is_singular(name: &HeaderName) -> bool {
    name == header::CONTENT_LENGTH || name == header::CONTENT_TYPE || name == header::LOCATION
}

/// `404`, `404 Not Found`: the code, three digits, of a final response: a `1xx` is
/// an interim one (`101` would switch an HTTP/1.1 connection's protocol; HTTP/2 and
/// HTTP/3 clients reset the stream), and HTTP has none past `599` (RFC 9110 §15).
fn parse_status(value: &HeaderValue) -> Option<StatusCode> {
    let code = value.as_bytes().split(|&b| b == b' ').next()?;
    if code.len() != 3 {
        return None;
    }
    StatusCode::from_bytes(code)
        .ok()
        .filter(|status| (200..600).contains(&status.as_u16()))
}

/// A `Content-Length` as HTTP writes it: digits alone (RFC 9110 §8.6). Rust's integer
/// parser also takes a leading `+`, which no client takes: `+4` sent on is an empty
/// reply over HTTP/1.1 and a reset stream over HTTP/2 and HTTP/3.
fn parse_length(value: &HeaderValue) -> Option<u64> {
    let digits = value.as_bytes();
    if digits.is_empty() || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    std::str::from_utf8(digits).ok()?.parse().ok()
}

/// Fields about the connection and the message's framing, which wedge writes for
/// each protocol itself (HTTP/2 and HTTP/3 forbid them).
fn is_framing(name: &HeaderName) -> bool {
    name == header::CONNECTION
        || name == header::TRANSFER_ENCODING
        || name == header::UPGRADE
        || name == header::TE
        || name == header::TRAILER
        || name.as_str() == "keep-alive"
        || name.as_str() == "proxy-connection"
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_head_ends_at_the_first_empty_line_whatever_the_line_ends() {
        assert_eq!(head_end(b"Content-Type: text/plain\n\nbody", 0), Some(26));
        assert_eq!(
            head_end(b"Content-Type: text/plain\r\n\r\nbody", 0),
            Some(28)
        );
        assert_eq!(head_end(b"Status: 204\r\n\nbody", 0), Some(14));
        assert_eq!(head_end(b"\nbody", 0), Some(1));
        assert_eq!(head_end(b"Content-Type: text/plain\r\n", 0), None);
        // Found across writes: the search resumes where it stopped.
        let output = b"Content-Type: text/plain\r\n\r\n";
        assert_eq!(head_end(output, 26), Some(28));
    }

    #[test]
    fn status_location_and_fields_make_the_response() {
        let head =
            parse(b"Status: 404 Not Found\r\nContent-Type: text/html\r\nX-A: 1\r\nX-A: 2\r\n")
                .unwrap();
        assert_eq!(head.status, StatusCode::NOT_FOUND);
        assert_eq!(head.headers[header::CONTENT_TYPE], "text/html");
        assert_eq!(head.headers.get_all("x-a").iter().count(), 2);
        assert!(!head.headers.contains_key("status"));

        let redirect = parse(b"Location: https://example.com/\n").unwrap();
        assert_eq!(redirect.status, StatusCode::FOUND);
        assert_eq!(redirect.headers[header::LOCATION], "https://example.com/");

        let last = parse(b"Status: 599\nContent-Length: 007\n").unwrap();
        assert_eq!((last.status.as_u16(), last.content_length), (599, Some(7)));

        let plain = parse(b"content-type:text/plain  \n").unwrap();
        assert_eq!(plain.status, StatusCode::OK);
        assert_eq!(plain.headers[header::CONTENT_TYPE], "text/plain");
    }

    #[test]
    fn a_field_a_response_has_one_of_is_the_last_written_and_a_204_has_no_length() {
        let head = parse(
            b"Content-Type: text/plain\nLocation: /a\nContent-Length: 3\nX-A: 1\n\
              Content-Type: text/html\nLocation: /b\nContent-Length: 4\nX-A: 2\n",
        )
        .unwrap();
        let all = |name: &str| -> Vec<&str> {
            let values = head.headers.get_all(name).iter();
            values.map(|v| v.to_str().unwrap()).collect()
        };
        assert_eq!(all("content-type"), ["text/html"]);
        assert_eq!(all("location"), ["/b"]);
        assert_eq!(all("content-length"), ["4"]);
        assert_eq!(head.content_length, Some(4));
        assert_eq!(all("x-a"), ["1", "2"], "other fields are a list");

        let no_content = parse(b"Status: 204\nContent-Length: 5\n").unwrap();
        assert!(!no_content.headers.contains_key(header::CONTENT_LENGTH));
        assert_eq!(no_content.content_length, None);
        let not_modified = parse(b"Status: 304\nContent-Length: 5\n").unwrap();
        assert_eq!(not_modified.headers[header::CONTENT_LENGTH], "5");
    }

    #[test]
    fn framing_fields_are_dropped_and_content_length_kept() {
        let head = parse(
            b"Content-Type: text/plain\nConnection: close\nTransfer-Encoding: chunked\n\
              Keep-Alive: 5\nContent-Length: 12\n",
        )
        .unwrap();
        let names: Vec<&str> = head.headers.keys().map(HeaderName::as_str).collect();
        assert_eq!(names, ["content-type", "content-length"]);
        assert_eq!(head.content_length, Some(12));
    }

    #[test]
    fn what_is_not_a_cgi_head_says_why_and_where() {
        let why = |text: &[u8]| parse(text).unwrap_err().0;
        assert_eq!(
            why(b"Content-Type: text/plain\nHTTP/1.1 200 OK\n"),
            "CGI response head line 2: not a `Name: value` field: `HTTP/1.1 200 OK`"
        );
        assert!(
            why(b"Status: OK\n").contains("not a status"),
            "{}",
            why(b"Status: OK\n")
        );
        assert!(why(b"Status: 2000\n").contains("not a status"));
        assert!(why(b"Status: 101 Switching Protocols\n").contains("not a status"));
        assert!(why(b"Status: 100\n").contains("not a status"));
        assert!(why(b"Status: 600\n").contains("not a status"));
        assert!(why(b"Status: 999 Custom\n").contains("not a status"));
        assert!(why(b"Bad Name: x\n").contains("not a field name"));
        assert!(why(b"X-A: a\x01b\n").contains("not a field value"));
        for length in ["ten", "+4", "-0", "4 4", "0x10", "", "18446744073709551616"] {
            let head = format!("Status: 200\nContent-Length: {length}\n");
            assert!(why(head.as_bytes()).contains("not a length"), "{length}");
        }
        assert_eq!(
            why(b"X-Powered-By: cgi\n"),
            "CGI response head has none of `Content-Type`, `Location` and `Status`"
        );
        assert!(why(b"").contains("none of"));
    }

    #[test]
    fn more_fields_than_a_header_map_holds_are_malformed_not_a_panic() {
        // 30000 names, more than `HeaderMap` can index (about 24576).
        let head: String = (0..30_000).map(|i| format!("x{i}: v\n")).collect();
        assert!(
            parse(head.as_bytes())
                .unwrap_err()
                .0
                .contains("more fields than a response can hold")
        );
    }
}
