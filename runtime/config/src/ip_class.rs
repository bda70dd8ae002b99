//! Which IP addresses are not public unicast ones: loopback, private,
//! link-local, multicast and the other special-purpose ranges (IANA's
//! registries, RFC 6890 and successors). A guest's outbound request may not
//! reach them unless the allow-list names them (server-side request forgery).

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// What kind of special address `ip` is, or `None` for a public unicast one.
/// IPv6 forms that carry an IPv4 address (mapped, compatible, NAT64, 6to4)
/// are judged by the address they carry.
pub fn special(ip: IpAddr) -> Option<&'static str> {
    match ip {
        IpAddr::V4(v4) => special_v4(v4),
        IpAddr::V6(v6) => special_v6(v6),
    }
}

fn special_v4(ip: Ipv4Addr) -> Option<&'static str> {
    if ip == Ipv4Addr::BROADCAST {
        return Some("broadcast");
    }
    let [a, b, c, _] = ip.octets();
    Some(match (a, b, c) {
        (0, ..) => UNSPECIFIED,
        (10, ..) | (192, 168, _) => "private",
        (172, 16..=31, _) => "private",
        (100, 64..=127, _) => "shared address space (CGNAT)",
        (127, ..) => "loopback",
        (169, 254, _) => "link-local",
        (192, 0, 0) => "IETF protocol assignment",
        (192, 0, 2) | (198, 51, 100) | (203, 0, 113) => "documentation",
        (192, 88, 99) => "6to4 relay anycast",
        (198, 18..=19, _) => "benchmarking",
        (224..=239, ..) => "multicast",
        (240..=255, ..) => "reserved",
        _ => return None,
    })
}

fn special_v6(ip: Ipv6Addr) -> Option<&'static str> {
    if ip.is_unspecified() {
        return Some(UNSPECIFIED);
    }
    if ip.is_loopback() {
        return Some("loopback");
    }
    if let Some(v4) = embedded_v4(ip) {
        return special_v4(v4);
    }
    let s = ip.segments();
    Some(match s[0] {
        // Deprecated IPv4-compatible (::a.b.c.d) and the rest of ::/8.
        0x0000 => "reserved",
        0x0064 if s[1] == 0xff9b && s[2] == 0x0001 => "local-use NAT64",
        0x0100 if s[1..4] == [0, 0, 0] => "discard-only",
        0x2001 if s[1] == 0x0db8 => "documentation",
        // 2001::/23: Teredo, ORCHID, benchmarking and other protocol assignments.
        0x2001 if s[1] < 0x0200 => "IETF protocol assignment",
        0x3fff if s[1] < 0x1000 => "documentation",
        0xfc00..=0xfdff => "private (unique local)",
        0xfe80..=0xfebf => "link-local",
        0xfec0..=0xfeff => "site-local",
        0xff00..=0xffff => "multicast",
        // Everything outside 2000::/3 is unassigned or reserved.
        first if !(0x2000..=0x3fff).contains(&first) => "reserved",
        _ => return None,
    })
}

/// The class of the unspecified addresses (0.0.0.0/8, `::`): a connection to
/// one goes to this host itself, so no pattern may allow them.
pub const UNSPECIFIED: &str = "unspecified";

/// The IPv4 address an IPv6 address carries and the name of the form it is
/// in: IPv4-mapped, IPv4-compatible (`::a.b.c.d`, but `::` and `::1`), NAT64
/// or 6to4.
pub fn ipv4_form(ip: Ipv6Addr) -> Option<(Ipv4Addr, &'static str)> {
    if let Some(v4) = ip.to_ipv4_mapped() {
        return Some((v4, "IPv4-mapped"));
    }
    if ip.segments()[..6] == [0; 6] && !ip.is_unspecified() && !ip.is_loopback() {
        let [.., a, b, c, d] = ip.octets();
        return Some((Ipv4Addr::new(a, b, c, d), "IPv4-compatible"));
    }
    let form = match ip.segments() {
        [0x0064, 0xff9b, 0, 0, 0, 0, ..] => "NAT64",
        [0x2002, ..] => "6to4",
        _ => return None,
    };
    embedded_v4(ip).map(|v4| (v4, form))
}

/// The IPv4 address an IPv6 address stands for: IPv4-mapped (::ffff:0:0/96),
/// NAT64 (64:ff9b::/96) and 6to4 (2002::/16) forms reach it.
fn embedded_v4(ip: Ipv6Addr) -> Option<Ipv4Addr> {
    if let Some(v4) = ip.to_ipv4_mapped() {
        return Some(v4);
    }
    let s = ip.segments();
    let octets = ip.octets();
    match s {
        [0x0064, 0xff9b, 0, 0, 0, 0, ..] => Some(Ipv4Addr::new(
            octets[12], octets[13], octets[14], octets[15],
        )),
        [0x2002, ..] => Some(Ipv4Addr::new(octets[2], octets[3], octets[4], octets[5])),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn class(ip: &str) -> Option<&'static str> {
        special(ip.parse().unwrap())
    }

    fn assert_classes(cases: &[(&str, &str)]) {
        for &(ip, want) in cases {
            assert_eq!(class(ip), Some(want), "{ip}");
        }
    }

    #[test]
    fn public_addresses_are_not_special() {
        for ip in [
            "1.1.1.1",
            "8.8.8.8",
            "9.255.255.255",
            "11.0.0.0",
            "100.63.255.255",
            "100.128.0.0",
            "126.255.255.255",
            "128.0.0.0",
            "169.253.255.255",
            "172.15.255.255",
            "172.32.0.0",
            "192.0.1.1",
            "192.167.255.255",
            "198.17.255.255",
            "198.20.0.0",
            "223.255.255.255",
            "2001:4860:4860::8888",
            "2606:4700::1111",
            "2001:200::1",
            "::ffff:8.8.8.8",
            "64:ff9b::808:808",
            "2002:808:808::1",
        ] {
            assert_eq!(class(ip), None, "{ip}");
        }
    }

    #[test]
    fn every_special_ipv4_range_at_both_ends() {
        assert_classes(&[
            ("0.0.0.0", "unspecified"),
            ("0.255.255.255", "unspecified"),
            ("10.0.0.0", "private"),
            ("10.255.255.255", "private"),
            ("172.16.0.0", "private"),
            ("172.31.255.255", "private"),
            ("192.168.0.0", "private"),
            ("192.168.255.255", "private"),
            ("100.64.0.0", "shared address space (CGNAT)"),
            ("100.127.255.255", "shared address space (CGNAT)"),
            ("127.0.0.1", "loopback"),
            ("127.255.255.254", "loopback"),
            ("169.254.0.0", "link-local"),
            ("169.254.169.254", "link-local"),
            ("192.0.0.8", "IETF protocol assignment"),
            ("192.0.2.1", "documentation"),
            ("198.51.100.1", "documentation"),
            ("203.0.113.255", "documentation"),
            ("192.88.99.1", "6to4 relay anycast"),
            ("198.18.0.0", "benchmarking"),
            ("198.19.255.255", "benchmarking"),
            ("224.0.0.1", "multicast"),
            ("239.255.255.255", "multicast"),
            ("240.0.0.0", "reserved"),
            ("255.255.255.254", "reserved"),
            ("255.255.255.255", "broadcast"),
        ]);
    }

    #[test]
    fn every_special_ipv6_range() {
        assert_classes(&[
            ("::", "unspecified"),
            ("::1", "loopback"),
            ("::2", "reserved"),
            ("::a00:1", "reserved"),
            ("64:ff9b:1::1", "local-use NAT64"),
            ("100::1", "discard-only"),
            ("2001::1", "IETF protocol assignment"),
            ("2001:1ff:ffff::1", "IETF protocol assignment"),
            ("2001:db8::1", "documentation"),
            ("3fff::1", "documentation"),
            ("3fff:fff::1", "documentation"),
            ("fc00::1", "private (unique local)"),
            ("fdff:ffff::1", "private (unique local)"),
            ("fe80::1", "link-local"),
            ("febf:ffff::1", "link-local"),
            ("fec0::1", "site-local"),
            ("ff02::1", "multicast"),
            ("ffff::1", "multicast"),
            ("4000::1", "reserved"),
            ("1234::1", "reserved"),
        ]);
    }

    #[test]
    fn ipv6_forms_of_ipv4_addresses_name_the_address_and_the_form() {
        let form = |ip: &str| ipv4_form(ip.parse().unwrap()).map(|(v4, f)| (v4.to_string(), f));
        let case = |v4: &str, f| Some((v4.to_string(), f));
        assert_eq!(form("::ffff:7f00:1"), case("127.0.0.1", "IPv4-mapped"));
        assert_eq!(form("::ffff:8.8.8.8"), case("8.8.8.8", "IPv4-mapped"));
        assert_eq!(form("::127.0.0.1"), case("127.0.0.1", "IPv4-compatible"));
        assert_eq!(form("::2"), case("0.0.0.2", "IPv4-compatible"));
        assert_eq!(form("64:ff9b::7f00:1"), case("127.0.0.1", "NAT64"));
        assert_eq!(form("2002:a00:1::"), case("10.0.0.1", "6to4"));
        for plain in ["::", "::1", "2001:db8::1", "64:ff9b:1::1", "fe80::1"] {
            assert_eq!(form(plain), None, "{plain}");
        }
    }

    #[test]
    fn ipv6_forms_of_ipv4_addresses_are_judged_by_the_ipv4_address() {
        assert_classes(&[
            ("::ffff:127.0.0.1", "loopback"),
            ("::ffff:10.1.2.3", "private"),
            ("::ffff:169.254.169.254", "link-local"),
            ("::ffff:0.0.0.0", "unspecified"),
            ("::ffff:100.64.0.1", "shared address space (CGNAT)"),
            ("::ffff:255.255.255.255", "broadcast"),
            ("64:ff9b::7f00:1", "loopback"),
            ("64:ff9b::c0a8:101", "private"),
            ("2002:7f00:1::", "loopback"),
            ("2002:a9fe:a9fe::1", "link-local"),
        ]);
    }
}
