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
    /// allowing `host:port` names itself; never an unspecified one (0.0.0.0/8,
    /// `::`: a connection to it goes to this host). None left → the first
    /// refused address and its class, for the log.
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
                Some(class)
                    if class == ip_class::UNSPECIFIED
                        || !entries.iter().any(|p| p.names_address(addr.ip())) =>
                {
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

impl Refused {
    /// Whether no entry could allow it (an unspecified address), as opposed
    /// to one the allow-list could name.
    pub fn never_allowed(&self) -> bool {
        self.class == ip_class::UNSPECIFIED
    }
}

/// One `--allow-outbound` entry: `host`, `host:port`, `*.domain` or
/// `*.domain:port` (IPv6 as `[::1]:port`). Without a port, every port of the
/// host is allowed; `*.domain` matches names under `domain`, not `domain` itself.
/// An IP address must be one a connection can name plainly: not an unspecified
/// address, nor an IPv6 form (mapped, compatible, NAT64, 6to4) of a special
/// IPv4 address, which would name loopback (or a private address) in disguise.
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
        if let (false, Ok(ip)) = (subdomains, host.parse::<IpAddr>()) {
            check_address(ip, port).map_err(|why| {
                format!("`{text}` is not an outbound host pattern: {ip} is {why}")
            })?;
        }
        Ok(HostPattern {
            host,
            subdomains,
            port,
        })
    }
}

/// Why an allow-list entry may not be the address `ip` (with `port`), if so.
fn check_address(ip: IpAddr, port: Option<u16>) -> Result<(), String> {
    let carried = match ip {
        IpAddr::V6(v6) => ip_class::ipv4_form(v6),
        IpAddr::V4(_) => None,
    };
    let judged = carried.map_or(ip, |(v4, _)| IpAddr::V4(v4));
    if ip_class::special(ip) == Some(ip_class::UNSPECIFIED)
        || ip_class::special(judged) == Some(ip_class::UNSPECIFIED)
    {
        return Err(
            "the unspecified address, not a destination (a connection to it \
             reaches this host itself); to allow a service on this host, name \
             127.0.0.1, ::1 or localhost"
                .into(),
        );
    }
    match (carried, ip_class::special(judged)) {
        (Some((v4, form)), Some(class)) => {
            let plain = match port {
                Some(port) => format!("{v4}:{port}"),
                None => v4.to_string(),
            };
            Err(format!(
                "{v4} ({class}) in IPv6 form ({form}); write `{plain}` to allow it"
            ))
        }
        _ => Ok(()),
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

    /// `text`'s error as a pattern, checked to be one line naming it.
    fn refused(text: &str) -> String {
        let err = text.parse::<HostPattern>().unwrap_err();
        assert!(
            err.starts_with(&format!("`{text}` is not an outbound host pattern: ")),
            "{err}"
        );
        assert!(!err.contains('\n'), "{err}");
        err
    }

    #[test]
    fn an_unspecified_address_is_refused_as_a_pattern() {
        for text in [
            "0.0.0.0",
            "0.0.0.0:8080",
            "::",
            "[::]",
            "[::]:8080",
            "[0:0::0]:1",
            "0.1.2.3",
            "[::ffff:0.0.0.0]:8080",
            "::ffff:0:0",
        ] {
            let err = refused(text);
            assert!(err.contains("is the unspecified address"), "{err}");
            assert!(err.contains("name 127.0.0.1, ::1 or localhost"), "{err}");
        }
    }

    #[test]
    fn an_ipv6_form_of_a_special_ipv4_address_is_refused_with_the_plain_one() {
        for (text, says) in [
            (
                "[::ffff:7f00:1]:8080",
                "::ffff:127.0.0.1 is 127.0.0.1 (loopback) in IPv6 form (IPv4-mapped); \
                 write `127.0.0.1:8080` to allow it",
            ),
            ("[::ffff:127.0.0.1]", "write `127.0.0.1` to allow it"),
            ("::ffff:7f00:1", "(IPv4-mapped); write `127.0.0.1`"),
            ("[::127.0.0.1]:1", "(IPv4-compatible); write `127.0.0.1:1`"),
            ("[64:ff9b::7f00:1]", "(NAT64); write `127.0.0.1`"),
            ("[2002:7f00:1::]", "(6to4); write `127.0.0.1`"),
            ("[::ffff:10.0.0.1]", "10.0.0.1 (private) in IPv6 form"),
            ("[::ffff:169.254.169.254]", "(link-local)"),
        ] {
            let err = refused(text);
            assert!(err.contains(says), "{says:?} not in {err:?}");
        }
    }

    #[test]
    fn plain_addresses_public_ipv6_forms_and_numeric_names_are_patterns() {
        for text in [
            "127.0.0.1:8080",
            "127.255.0.1",
            "[::1]:8080",
            "10.0.0.1",
            "[::ffff:8.8.8.8]",
            "[64:ff9b::808:808]:443",
            "2001:db8::1",
            // Names to the allow-list: what they resolve to is checked on connecting.
            "127.1",
            "0",
            "2130706433",
            "*.0.0.1",
        ] {
            assert!(text.parse::<HostPattern>().is_ok(), "{text}");
        }
    }

    #[test]
    fn loopback_in_any_form_is_reachable_only_through_an_entry_naming_it() {
        let outbound = policy(&["api.example.com", "*.example.net", "127.0.0.1:8080"]);
        let disguised = [
            "::ffff:7f00:1",
            "::127.0.0.1",
            "64:ff9b::7f00:1",
            "2002:7f00:1::",
            "0.0.0.0",
            "::",
            "127.0.0.2",
            "::1",
        ];
        for ip in disguised {
            for host in ["api.example.com", "a.example.net"] {
                assert!(
                    outbound.reachable(host, 443, addrs(&[ip])).is_err(),
                    "{host} → {ip}"
                );
            }
            // The entry naming 127.0.0.1 names none of these but 127.0.0.1 itself
            // (IPv4-mapped, as a dual-stack resolver may answer).
            let at_8080 = vec![SocketAddr::new(ip.parse().unwrap(), 8080)];
            let reachable = outbound.reachable("127.0.0.1", 8080, at_8080).is_ok();
            assert_eq!(reachable, ip == "::ffff:7f00:1", "{ip}");
        }

        // An unspecified address (a connection to it reaches this host) is not
        // reachable even through an entry naming it, built as parsing no longer would.
        let named = |host: &str| HostPattern {
            host: host.into(),
            subdomains: false,
            port: None,
        };
        let outbound = Outbound {
            allow: vec![
                named("0.0.0.0"),
                named("::"),
                named("localhost"),
                named("0"),
            ],
            ..Outbound::default()
        };
        for (host, ip) in [
            ("0.0.0.0", "0.0.0.0"),
            ("::", "::"),
            ("localhost", "0.0.0.0"),
            ("0", "0.0.0.0"),
            ("localhost", "::ffff:0.0.0.0"),
        ] {
            let refused = outbound.reachable(host, 80, addrs(&[ip])).unwrap_err();
            assert_eq!(refused.class, "unspecified", "{host} → {ip}");
            assert!(refused.never_allowed());
        }
        let loopback = outbound.reachable("localhost", 80, addrs(&["127.0.0.1", "::1"]));
        assert_eq!(loopback, Ok(addrs(&["127.0.0.1", "::1"])));
    }

    #[test]
    fn a_config_or_a_deploy_naming_an_unspecified_address_is_refused_with_its_line() {
        let text = "listen = \"127.0.0.1:8080\"\n[[app]]\nname = \"a\"\ncomponent = \"a.wasm\"\n\
                    outbound = [\"db.internal\", \"0.0.0.0:9000\", \"[::ffff:127.0.0.1]:9000\"]\n";
        let errors = crate::parse(text, std::path::Path::new("wedge.toml"))
            .unwrap_err()
            .to_string();
        let lines: Vec<&str> = errors.lines().collect();
        assert_eq!(lines.len(), 2, "{errors}");
        assert!(
            lines[0].starts_with(
                "wedge.toml:5: app[0].outbound[1]: `0.0.0.0:9000` is not an outbound host \
                 pattern: 0.0.0.0 is the unspecified address"
            ),
            "{errors}"
        );
        assert!(
            lines[1].starts_with("wedge.toml:5: app[0].outbound[2]: `[::ffff:127.0.0.1]:9000`"),
            "{errors}"
        );
        assert!(
            lines[1].ends_with("write `127.0.0.1:9000` to allow it"),
            "{errors}"
        );
        let deployed = crate::parse_app("outbound = [\"[::]:80\"]\n", "config", "a", None);
        let errors = deployed.unwrap_err().to_string();
        assert!(errors.contains(":: is the unspecified address"), "{errors}");
    }
}
