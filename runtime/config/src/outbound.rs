//! An app's outbound HTTP policy: the destinations its guest may reach
//! (`--allow-outbound`) and the limits on reaching them. Nothing is allowed
//! unless a pattern names it.

use std::net::{IpAddr, SocketAddr};
use std::str::FromStr;
use std::time::Duration;

use crate::ip_class;

/// Default time a connection to an allowed origin may take to open.
pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// Default number of outbound requests one app may have in flight at once.
pub const DEFAULT_MAX_CONCURRENT: usize = 32;

/// Where an app's guest may send requests, and how many at once.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outbound {
    /// Destinations allowed; empty denies everything.
    pub allow: Vec<HostPattern>,
    /// Time to open a connection; the guest's own `connect-timeout` may only shorten it.
    pub connect_timeout: Duration,
    /// Requests in flight at once (from sending the head until the response
    /// body is finished or dropped); more fail with `connection-limit-reached`.
    pub max_concurrent: usize,
}

impl Default for Outbound {
    fn default() -> Self {
        Outbound {
            allow: Vec::new(),
            connect_timeout: DEFAULT_CONNECT_TIMEOUT,
            max_concurrent: DEFAULT_MAX_CONCURRENT,
        }
    }
}

impl Outbound {
    /// Whether a request to `host` (a name or an IP literal, IPv6 with or
    /// without brackets) on `port` is allowed.
    pub fn allows(&self, host: &str, port: u16) -> bool {
        let host = normalise(host);
        self.allow.iter().any(|p| p.matches(&host, port))
    }

    /// Of the addresses `host:port` resolved to, those a connection may go to:
    /// public ones, and special ones (loopback, private, ...) that an entry
    /// allowing `host:port` names itself. None left → the first refused
    /// address and its class, for the log.
    pub fn reachable(
        &self,
        host: &str,
        port: u16,
        resolved: impl IntoIterator<Item = SocketAddr>,
    ) -> Result<Vec<SocketAddr>, Refused> {
        let host = normalise(host);
        let entries: Vec<&HostPattern> = self
            .allow
            .iter()
            .filter(|p| p.matches(&host, port))
            .collect();
        let mut refused = None;
        let mut reachable = Vec::new();
        for addr in resolved {
            match ip_class::special(addr.ip()) {
                Some(class) if !entries.iter().any(|p| p.names_address(addr.ip())) => {
                    refused.get_or_insert(Refused {
                        address: addr.ip(),
                        class,
                    });
                }
                _ => reachable.push(addr),
            }
        }
        match refused {
            Some(refused) if reachable.is_empty() => Err(refused),
            _ => Ok(reachable),
        }
    }
}

/// A special address no allow-list entry names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Refused {
    pub address: IpAddr,
    /// What kind of address it is (`loopback`, `private`, ...).
    pub class: &'static str,
}

/// One `--allow-outbound` entry: `host`, `host:port`, `*.domain` or
/// `*.domain:port` (IPv6 as `[::1]:port`). Without a port, every port of the
/// host is allowed; `*.domain` matches names under `domain`, not `domain` itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostPattern {
    /// Lowercase, without brackets or a trailing dot; for a wildcard, the
    /// suffix after `*.`.
    host: String,
    subdomains: bool,
    port: Option<u16>,
}

impl HostPattern {
    fn matches(&self, host: &str, port: u16) -> bool {
        if self.port.is_some_and(|p| p != port) {
            return false;
        }
        if self.subdomains {
            host.strip_suffix(self.host.as_str())
                .is_some_and(|head| head.len() > 1 && head.ends_with('.'))
        } else {
            host == self.host
        }
    }

    /// Whether this entry names `ip` itself, so reaching it is the operator's
    /// choice: the same IP literal, or `localhost` (`*.localhost`) for a
    /// loopback address. A name that merely resolves to `ip` does not.
    fn names_address(&self, ip: IpAddr) -> bool {
        let ip = ip.to_canonical();
        if self.host == "localhost" || self.host.ends_with(".localhost") {
            return ip.is_loopback();
        }
        !self.subdomains
            && self
                .host
                .parse::<IpAddr>()
                .is_ok_and(|named| named.to_canonical() == ip)
    }
}

/// Lowercase, no IPv6 brackets, no trailing dot: names compare as DNS does.
fn normalise(host: &str) -> String {
    let host = host
        .strip_prefix('[')
        .and_then(|h| h.strip_suffix(']'))
        .unwrap_or(host);
    host.trim_end_matches('.').to_ascii_lowercase()
}

impl FromStr for HostPattern {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        let bad = |why: &str| {
            format!(
                "`{text}` is not an outbound host pattern ({why}); use host, host:port or *.domain"
            )
        };
        let (host, port) = split_port(text).map_err(|why| bad(&why))?;
        let (host, subdomains) = match host.strip_prefix("*.") {
            Some(rest) => (rest, true),
            None => (host, false),
        };
        let host = normalise(host);
        let valid = |c: char| c.is_ascii_alphanumeric() || matches!(c, '-' | '.' | ':' | '_');
        if host.is_empty() || !host.chars().all(valid) || host.starts_with('.') {
            return Err(bad("not a host name or IP address"));
        }
        Ok(HostPattern {
            host,
            subdomains,
            port,
        })
    }
}

/// `host[:port]` or `[v6][:port]` into the host and its port, if any.
fn split_port(text: &str) -> Result<(&str, Option<u16>), String> {
    let (host, port) = if let Some(rest) = text.strip_prefix('[') {
        let (v6, after) = rest.split_once(']').ok_or("an unclosed `[`")?;
        match after {
            "" => (v6, None),
            _ => (v6, Some(after.strip_prefix(':').ok_or("junk after `]`")?)),
        }
    } else {
        match text.rsplit_once(':') {
            // A bare IPv6 address has several colons and no port.
            Some((host, port)) if !host.contains(':') => (host, Some(port)),
            _ => (text, None),
        }
    };
    let port = port
        .map(|p| p.parse::<u16>().map_err(|_| format!("bad port `{p}`")))
        .transpose()?;
    Ok((host, port))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy(patterns: &[&str]) -> Outbound {
        Outbound {
            allow: patterns.iter().map(|p| p.parse().unwrap()).collect(),
            ..Outbound::default()
        }
    }

    #[test]
    fn nothing_is_allowed_by_default() {
        let outbound = Outbound::default();
        assert!(!outbound.allows("example.com", 443));
        assert!(!outbound.allows("127.0.0.1", 80));
    }

    #[test]
    fn an_exact_host_allows_every_port_of_that_host_only() {
        let outbound = policy(&["api.example.com"]);
        assert!(outbound.allows("api.example.com", 443));
        assert!(outbound.allows("api.example.com", 8080));
        assert!(!outbound.allows("example.com", 443));
        assert!(!outbound.allows("evil-api.example.com", 443));
        assert!(!outbound.allows("api.example.com.evil.net", 443));
    }

    #[test]
    fn host_and_port_allow_that_port_only() {
        let outbound = policy(&["127.0.0.1:9000"]);
        assert!(outbound.allows("127.0.0.1", 9000));
        assert!(!outbound.allows("127.0.0.1", 9001));
        assert!(!outbound.allows("127.0.0.2", 9000));
    }

    #[test]
    fn a_wildcard_allows_subdomains_not_the_domain_itself() {
        let outbound = policy(&["*.example.com"]);
        assert!(outbound.allows("a.example.com", 443));
        assert!(outbound.allows("a.b.example.com", 80));
        assert!(!outbound.allows("example.com", 443));
        assert!(!outbound.allows("badexample.com", 443));
        let with_port = policy(&["*.example.com:8443"]);
        assert!(with_port.allows("a.example.com", 8443));
        assert!(!with_port.allows("a.example.com", 443));
    }

    #[test]
    fn names_compare_case_insensitively_and_without_a_trailing_dot() {
        let outbound = policy(&["API.Example.COM"]);
        assert!(outbound.allows("api.example.com", 443));
        assert!(outbound.allows("Api.EXAMPLE.com.", 443));
    }

    #[test]
    fn ipv6_literals_with_and_without_brackets() {
        let outbound = policy(&["[::1]:8080", "2001:db8::1"]);
        assert!(outbound.allows("[::1]", 8080));
        assert!(outbound.allows("::1", 8080));
        assert!(!outbound.allows("[::1]", 8081));
        assert!(outbound.allows("[2001:db8::1]", 443));
    }

    #[test]
    fn bad_patterns_are_one_line_errors() {
        for bad in [
            "",
            "*.",
            "host:port",
            "host:70000",
            "[::1",
            "[::1]x",
            "a b",
            "*.*.x",
        ] {
            let err = bad.parse::<HostPattern>().unwrap_err();
            assert!(err.contains("not an outbound host pattern"), "{bad}: {err}");
            assert!(!err.contains('\n'), "{err}");
        }
    }

    fn addrs(ips: &[&str]) -> Vec<SocketAddr> {
        ips.iter()
            .map(|ip| SocketAddr::new(ip.parse().unwrap(), 443))
            .collect()
    }

    #[test]
    fn a_name_resolving_to_a_special_address_is_refused() {
        let outbound = policy(&["api.example.com"]);
        let refused = outbound
            .reachable("api.example.com", 443, addrs(&["10.0.0.5"]))
            .unwrap_err();
        assert_eq!(refused.address, "10.0.0.5".parse::<IpAddr>().unwrap());
        assert_eq!(refused.class, "private");
        for ip in [
            "127.0.0.1",
            "::1",
            "169.254.169.254",
            "::ffff:127.0.0.1",
            "0.0.0.0",
        ] {
            assert!(
                outbound
                    .reachable("api.example.com", 443, addrs(&[ip]))
                    .is_err(),
                "{ip}"
            );
        }
    }

    #[test]
    fn public_addresses_are_reachable_and_special_ones_left_out() {
        let outbound = policy(&["api.example.com"]);
        let mixed = addrs(&["10.0.0.5", "93.184.216.34", "::1", "2606:2800::1"]);
        assert_eq!(
            outbound.reachable("api.example.com", 443, mixed),
            Ok(addrs(&["93.184.216.34", "2606:2800::1"]))
        );
    }

    #[test]
    fn an_ip_literal_entry_makes_that_address_reachable() {
        let outbound = policy(&["127.0.0.1:8080", "[fd00::1]"]);
        let loopback = vec![SocketAddr::new("127.0.0.1".parse().unwrap(), 8080)];
        assert_eq!(
            outbound.reachable("127.0.0.1", 8080, loopback.clone()),
            Ok(loopback)
        );
        // Its IPv4-mapped form is the same address.
        let mapped = vec![SocketAddr::new("::ffff:127.0.0.1".parse().unwrap(), 8080)];
        assert_eq!(
            outbound.reachable("127.0.0.1", 8080, mapped.clone()),
            Ok(mapped)
        );
        assert!(
            outbound
                .reachable("fd00::1", 443, addrs(&["fd00::1"]))
                .is_ok()
        );
        // Only the address named: another loopback address is not.
        assert!(
            outbound
                .reachable("127.0.0.1", 8080, addrs(&["127.0.0.2"]))
                .is_err()
        );
    }

    #[test]
    fn localhost_entries_make_loopback_reachable_and_nothing_else() {
        let outbound = policy(&["localhost:8080", "*.localhost"]);
        for host in ["localhost", "app.localhost"] {
            assert!(
                outbound
                    .reachable(host, 8080, addrs(&["127.0.0.1", "::1"]))
                    .is_ok(),
                "{host}"
            );
            let refused = outbound
                .reachable(host, 8080, addrs(&["10.0.0.1"]))
                .unwrap_err();
            assert_eq!(refused.class, "private");
        }
    }

    #[test]
    fn an_entry_naming_an_address_counts_only_for_requests_it_allows() {
        // `127.0.0.1:9000` names loopback, but not for `name:80`, which
        // another (name) entry allows.
        let outbound = policy(&["127.0.0.1:9000", "name"]);
        assert!(
            outbound
                .reachable("name", 80, addrs(&["127.0.0.1"]))
                .is_err()
        );
        // A wildcard over numbers is not an IP literal.
        let wildcard = policy(&["*.0.0.1"]);
        assert!(
            wildcard
                .reachable("127.0.0.1", 80, addrs(&["127.0.0.1"]))
                .is_err()
        );
    }
}
