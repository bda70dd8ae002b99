//! The Host field of an HTTP/1.1 request (RFC 9112 §3.2): exactly one, holding an
//! authority without user info (or empty, when the target has no authority). A
//! server must answer anything else with `400`: two Host fields that disagree let a
//! proxy in front route by one and wedge by the other.

use http::header::HOST;
use http::uri::Authority;
use http::{HeaderMap, Version};

/// Why the request's Host fields break RFC 9112 §3.2, if they do.
pub fn host_fault(version: Version, headers: &HeaderMap) -> Option<&'static str> {
    let mut hosts = headers.get_all(HOST).iter();
    let host = match (hosts.next(), hosts.next()) {
        // HTTP/1.0 predates Host: it may leave it out.
        (None, _) if version == Version::HTTP_10 => return None,
        (None, _) => return Some("an HTTP/1.1 request needs a Host field"),
        (Some(_), Some(_)) => return Some("a request may have only one Host field"),
        (Some(host), None) => host.as_bytes(),
    };
    if host.is_empty() {
        return None;
    }
    match Authority::try_from(host) {
        Ok(authority) if is_host_and_port(&authority) => None,
        _ => Some("the Host field is not a host and port"),
    }
}

/// `uri-host [ ":" port ]`: no user info, a port of digits (`Authority` takes any).
fn is_host_and_port(authority: &Authority) -> bool {
    match authority.as_str().strip_prefix(authority.host()) {
        Some(port) => port.strip_prefix(':').map_or(port.is_empty(), |digits| {
            digits.bytes().all(|b| b.is_ascii_digit())
        }),
        // User info before the host.
        None => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fault(version: Version, hosts: &[&str]) -> Option<&'static str> {
        let mut headers = HeaderMap::new();
        for host in hosts {
            headers.append(HOST, host.parse().unwrap());
        }
        host_fault(version, &headers)
    }

    #[test]
    fn one_host_with_or_without_a_port_is_fine() {
        for host in [
            "example.com",
            "example.com:8080",
            "127.0.0.1:1",
            "[::1]:443",
            "",
        ] {
            assert_eq!(fault(Version::HTTP_11, &[host]), None, "{host}");
        }
    }

    #[test]
    fn none_two_or_a_malformed_host_is_refused() {
        assert!(fault(Version::HTTP_11, &[]).is_some());
        assert!(fault(Version::HTTP_11, &["a.example", "b.example"]).is_some());
        assert!(fault(Version::HTTP_11, &["a.example", "a.example"]).is_some());
        for host in [
            "user@a.example",
            "a b",
            "a.example/path",
            "[::1",
            "a.example:port",
        ] {
            assert!(fault(Version::HTTP_11, &[host]).is_some(), "{host}");
        }
    }

    #[test]
    fn http_1_0_may_leave_it_out() {
        assert_eq!(fault(Version::HTTP_10, &[]), None);
        assert!(fault(Version::HTTP_10, &["a", "b"]).is_some());
    }
}
