//! Which app a request goes to: routes such as `api.example.com/`,
//! `*.example.com/` or `/hello`, and the table that picks the most specific
//! one for a request's host and path. Pure: no IO, and a lookup allocates nothing.

use std::collections::HashMap;
use std::fmt;
use std::str::FromStr;

/// Longest DNS name (RFC 1035): longer hosts can only match host-less routes.
const MAX_HOST: usize = 253;

/// One route: an optional host (exact or `*.` wildcard) and a path prefix.
///
/// Written `host/path`, `*.domain/path` or `/path`. The path matches on segment
/// boundaries: `/hello` matches `/hello`, `/hello/` and `/hello/x`, not
/// `/helloworld`; `/` matches every path. A trailing `/` is dropped, so
/// `/hello/` is the same route as `/hello`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Route {
    host: Option<RouteHost>,
    /// Starts with `/`; no trailing `/` unless it is exactly `/`.
    path: String,
}

/// Lowercase, without brackets or a trailing dot.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum RouteHost {
    Exact(String),
    /// `*.suffix`: names under `suffix`, not `suffix` itself.
    Wildcard(String),
}

impl FromStr for Route {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        let bad = |why: &str| {
            format!("`{text}` is not a route ({why}); use host/path, *.domain/path or /path")
        };
        let slash = text
            .find('/')
            .ok_or_else(|| bad("no path; add one, e.g. `/`"))?;
        let (host, path) = text.split_at(slash);
        let host = match host {
            "" => None,
            host => Some(parse_host(host).map_err(bad)?),
        };
        Ok(Route {
            host,
            path: parse_path(path).map_err(bad)?,
        })
    }
}

fn parse_host(text: &str) -> Result<RouteHost, &'static str> {
    let (name, wildcard) = match text.strip_prefix("*.") {
        Some(rest) => (rest, true),
        None => (text, false),
    };
    let name = match name.strip_prefix('[') {
        Some(v6) => v6
            .strip_suffix(']')
            .filter(|v6| v6.contains(':') && !wildcard)
            .ok_or("a bad IPv6 literal")?,
        None if name.contains(':') => return Err("a port; routes match any port"),
        None => name.strip_suffix('.').unwrap_or(name),
    };
    let valid = |c: char| c.is_ascii_alphanumeric() || matches!(c, '-' | '.' | '_' | ':');
    if name.is_empty() || name.len() > MAX_HOST || !name.chars().all(valid) {
        return Err("not a host name");
    }
    if name.starts_with('.') || name.ends_with('.') || name.contains("..") {
        return Err("an empty label in the host");
    }
    let name = name.to_ascii_lowercase();
    Ok(if wildcard {
        RouteHost::Wildcard(name)
    } else {
        RouteHost::Exact(name)
    })
}

fn parse_path(path: &str) -> Result<String, &'static str> {
    if path.contains(['?', '#']) {
        return Err("a query or fragment; routes match paths only");
    }
    if path.contains(|c: char| c.is_whitespace() || c.is_control() || c == '*') {
        return Err("whitespace, a control character or `*` in the path");
    }
    if path.contains("//") {
        return Err("an empty path segment");
    }
    Ok(match path.trim_end_matches('/') {
        "" => "/".to_string(),
        trimmed => trimmed.to_string(),
    })
}

impl Route {
    /// The path prefix: `/`, or segments without a trailing `/`.
    pub fn path(&self) -> &str {
        &self.path
    }
}

impl fmt::Display for Route {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.host {
            Some(RouteHost::Exact(host)) if host.contains(':') => write!(f, "[{host}]")?,
            Some(RouteHost::Exact(host)) => f.write_str(host)?,
            Some(RouteHost::Wildcard(suffix)) => write!(f, "*.{suffix}")?,
            None => {}
        }
        f.write_str(&self.path)
    }
}

/// Two owners claim the same route; the table keeps neither.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DuplicateRoute<T> {
    pub route: Route,
    /// The owner listed first.
    pub first: T,
    /// The owner listed later.
    pub second: T,
}

impl<T: fmt::Display> fmt::Display for DuplicateRoute<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "route `{}` is claimed by both `{}` and `{}`",
            self.route, self.first, self.second
        )
    }
}

/// Routes to their owners (e.g. app names), looked up per request.
///
/// Precedence: the most specific host first — an exact host, then wildcards
/// from the longest suffix to the shortest, then host-less routes — and
/// within a host the longest path prefix. A host none of whose paths match
/// falls through to the next, less specific one.
#[derive(Debug, Clone)]
pub struct RouteTable<T> {
    exact: HashMap<String, Paths<T>>,
    /// Keyed by the suffix after `*.`.
    wildcard: HashMap<String, Paths<T>>,
    any_host: Paths<T>,
}

/// One host's path prefixes, longest first, so the first match is the longest.
#[derive(Debug, Clone)]
struct Paths<T>(Vec<(String, T)>);

impl<T> Default for Paths<T> {
    fn default() -> Self {
        Paths(Vec::new())
    }
}

impl<T> Paths<T> {
    fn lookup(&self, path: &str) -> Option<&T> {
        self.0
            .iter()
            .find(|(prefix, _)| path_matches(prefix, path))
            .map(|(_, owner)| owner)
    }
}

/// `prefix` matches `path` on a segment boundary.
fn path_matches(prefix: &str, path: &str) -> bool {
    if prefix == "/" {
        return true;
    }
    path.strip_prefix(prefix)
        .is_some_and(|rest| rest.is_empty() || rest.starts_with('/'))
}

impl<T: Clone> RouteTable<T> {
    /// A table of `routes`; every route claimed twice is an error naming both owners.
    pub fn new(routes: Vec<(Route, T)>) -> Result<Self, Vec<DuplicateRoute<T>>> {
        let mut table: RouteTable<T> = RouteTable {
            exact: HashMap::new(),
            wildcard: HashMap::new(),
            any_host: Paths::default(),
        };
        let mut duplicates = Vec::new();
        for (route, owner) in routes {
            let paths = match &route.host {
                Some(RouteHost::Exact(host)) => table.exact.entry(host.clone()).or_default(),
                Some(RouteHost::Wildcard(suffix)) => {
                    table.wildcard.entry(suffix.clone()).or_default()
                }
                None => &mut table.any_host,
            };
            match paths.0.iter().find(|(path, _)| *path == route.path) {
                Some((_, first)) => duplicates.push(DuplicateRoute {
                    first: first.clone(),
                    second: owner,
                    route,
                }),
                None => paths.0.push((route.path, owner)),
            }
        }
        if !duplicates.is_empty() {
            return Err(duplicates);
        }
        let by_length = |paths: &mut Paths<T>| {
            paths
                .0
                .sort_by_key(|(path, _)| std::cmp::Reverse(path.len()))
        };
        table.exact.values_mut().for_each(by_length);
        table.wildcard.values_mut().for_each(by_length);
        by_length(&mut table.any_host);
        Ok(table)
    }
}

impl<T> RouteTable<T> {
    /// The owner of the most specific route for a request to `host` (a Host
    /// header or `:authority`: any case, with or without a port or a trailing
    /// dot, IPv6 in brackets) and `path` (without the query); `None` → 404.
    pub fn lookup(&self, host: Option<&str>, path: &str) -> Option<&T> {
        let mut buffer = [0u8; MAX_HOST];
        let host = host.and_then(|host| normalise(host, &mut buffer));
        host.and_then(|host| self.lookup_host(host, path))
            .or_else(|| self.any_host.lookup(path))
    }

    fn lookup_host(&self, host: &str, path: &str) -> Option<&T> {
        if let Some(owner) = self.exact.get(host).and_then(|p| p.lookup(path)) {
            return Some(owner);
        }
        // Suffixes after each dot, longest first: a.b.example.com tries
        // *.b.example.com, then *.example.com, then *.com.
        host.match_indices('.')
            .filter_map(|(dot, _)| self.wildcard.get(&host[dot + 1..]))
            .find_map(|paths| paths.lookup(path))
    }
}

/// `host` without its port, brackets or trailing dot, lowercased into
/// `buffer`; `None` if it is empty or too long to be a DNS name.
fn normalise<'b>(host: &str, buffer: &'b mut [u8; MAX_HOST]) -> Option<&'b str> {
    let host = match host.strip_prefix('[') {
        Some(rest) => rest.split_once(']').map_or(rest, |(v6, _)| v6),
        None => match host.split_once(':') {
            // Several colons without brackets: a bare IPv6 address, no port.
            Some((name, port)) if !port.contains(':') => name,
            _ => host,
        },
    };
    let host = host.strip_suffix('.').unwrap_or(host);
    if host.is_empty() || host.len() > MAX_HOST {
        return None;
    }
    let out = &mut buffer[..host.len()];
    out.copy_from_slice(host.as_bytes());
    out.make_ascii_lowercase();
    std::str::from_utf8(out).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table(routes: &[(&str, &'static str)]) -> RouteTable<&'static str> {
        let routes = routes
            .iter()
            .map(|(route, app)| (route.parse().unwrap(), *app))
            .collect();
        RouteTable::new(routes).unwrap()
    }

    #[test]
    fn routes_parse_into_host_and_path() {
        for (text, canonical) in [
            ("api.example.com/", "api.example.com/"),
            ("*.example.com/", "*.example.com/"),
            ("/hello", "/hello"),
            ("/hello/", "/hello"),
            ("API.Example.com./v1/", "api.example.com/v1"),
            ("[::1]/", "[::1]/"),
            ("127.0.0.1/x", "127.0.0.1/x"),
        ] {
            let route: Route = text.parse().unwrap();
            assert_eq!(route.to_string(), canonical, "{text}");
        }
    }

    #[test]
    fn bad_routes_are_one_line_errors() {
        for bad in [
            "",
            "api.example.com",
            "hello",
            "api.example.com:8080/",
            "*./",
            "**.example.com/",
            "a..b/",
            ".example.com/",
            "exa mple.com/",
            "[::1/",
            "*.[::1]/",
            "/a?b",
            "/a#b",
            "/a b",
            "/a*",
            "//",
            "/a//b",
        ] {
            let err = bad.parse::<Route>().unwrap_err();
            assert!(err.contains("is not a route"), "{bad}: {err}");
            assert!(!err.contains('\n'), "{err}");
        }
    }

    #[test]
    fn an_exact_host_matches_that_host_only() {
        let routes = table(&[("api.example.com/", "api")]);
        assert_eq!(routes.lookup(Some("api.example.com"), "/x"), Some(&"api"));
        assert_eq!(routes.lookup(Some("example.com"), "/x"), None);
        assert_eq!(routes.lookup(Some("x.api.example.com"), "/x"), None);
        assert_eq!(routes.lookup(None, "/x"), None);
    }

    #[test]
    fn hosts_ignore_case_port_and_trailing_dot() {
        let routes = table(&[("api.example.com/", "api"), ("[::1]/", "v6")]);
        for host in [
            "API.Example.COM",
            "api.example.com:8443",
            "api.example.com.",
            "Api.Example.Com.:80",
        ] {
            assert_eq!(routes.lookup(Some(host), "/"), Some(&"api"), "{host}");
        }
        for host in ["[::1]:8080", "[::1]", "::1"] {
            assert_eq!(routes.lookup(Some(host), "/"), Some(&"v6"), "{host}");
        }
        assert_eq!(routes.lookup(Some("[::2]:8080"), "/"), None);
    }

    #[test]
    fn a_wildcard_matches_subdomains_not_the_domain_itself() {
        let routes = table(&[("*.example.com/", "wild")]);
        assert_eq!(routes.lookup(Some("a.example.com"), "/"), Some(&"wild"));
        assert_eq!(routes.lookup(Some("a.b.example.com"), "/"), Some(&"wild"));
        assert_eq!(routes.lookup(Some("A.EXAMPLE.com:80"), "/"), Some(&"wild"));
        assert_eq!(routes.lookup(Some("example.com"), "/"), None);
        assert_eq!(routes.lookup(Some("badexample.com"), "/"), None);
    }

    #[test]
    fn paths_match_on_segment_boundaries() {
        let routes = table(&[("/hello", "hello")]);
        for path in ["/hello", "/hello/", "/hello/x/y"] {
            assert_eq!(routes.lookup(None, path), Some(&"hello"), "{path}");
        }
        for path in ["/helloworld", "/hell", "/", "/x/hello"] {
            assert_eq!(routes.lookup(None, path), None, "{path}");
        }
        let root = table(&[("/", "root")]);
        for path in ["/", "/anything/at/all", ""] {
            assert_eq!(root.lookup(Some("any.host"), path), Some(&"root"), "{path}");
        }
    }

    #[test]
    fn the_longest_path_prefix_wins() {
        let routes = table(&[("/", "root"), ("/api/v1", "v1"), ("/api", "api")]);
        assert_eq!(routes.lookup(None, "/api/v1/users"), Some(&"v1"));
        assert_eq!(routes.lookup(None, "/api/v2"), Some(&"api"));
        assert_eq!(routes.lookup(None, "/api/v1x"), Some(&"api"));
        assert_eq!(routes.lookup(None, "/other"), Some(&"root"));
    }

    #[test]
    fn the_most_specific_host_wins_before_the_path() {
        let routes = table(&[
            ("/api/long/path", "any"),
            ("*.com/", "com"),
            ("*.example.com/", "wild"),
            ("api.example.com/", "exact"),
        ]);
        let app = |host| routes.lookup(Some(host), "/api/long/path/x");
        assert_eq!(app("api.example.com"), Some(&"exact"));
        assert_eq!(app("www.example.com"), Some(&"wild"));
        assert_eq!(app("a.b.example.com"), Some(&"wild"));
        assert_eq!(app("other.com"), Some(&"com"));
        assert_eq!(app("example.org"), Some(&"any"));
        assert_eq!(routes.lookup(None, "/api/long/path"), Some(&"any"));
    }

    #[test]
    fn a_host_without_a_matching_path_falls_through_to_less_specific_hosts() {
        let routes = table(&[
            ("api.example.com/v1", "exact"),
            ("*.api.example.com/v1", "deep"),
            ("*.example.com/v2", "wild"),
            ("/", "fallback"),
        ]);
        assert_eq!(
            routes.lookup(Some("x.api.example.com"), "/v1"),
            Some(&"deep")
        );
        assert_eq!(
            routes.lookup(Some("x.api.example.com"), "/v2"),
            Some(&"wild")
        );
        assert_eq!(
            routes.lookup(Some("api.example.com"), "/v1"),
            Some(&"exact")
        );
        assert_eq!(routes.lookup(Some("api.example.com"), "/v2"), Some(&"wild"));
        assert_eq!(
            routes.lookup(Some("api.example.com"), "/v3"),
            Some(&"fallback")
        );
    }

    #[test]
    fn no_matching_route_is_none() {
        let routes = table(&[("api.example.com/v1", "api"), ("/hello", "hello")]);
        assert_eq!(routes.lookup(Some("api.example.com"), "/v2"), None);
        assert_eq!(routes.lookup(Some("other.example.com"), "/v1"), None);
        assert_eq!(routes.lookup(None, "/"), None);
        assert_eq!(routes.lookup(Some(""), "/x"), None);
        let long_host = "a".repeat(MAX_HOST + 1);
        assert_eq!(routes.lookup(Some(&long_host), "/hello"), Some(&"hello"));
        assert!(table(&[]).lookup(Some("a.com"), "/").is_none());
    }

    #[test]
    fn a_route_claimed_twice_names_both_owners() {
        let routes = [
            ("api.example.com/v1/", "first"),
            ("/hello", "third"),
            ("API.example.com/v1", "second"),
            ("/hello", "fourth"),
            ("*.example.com/v1", "wild"),
        ];
        let routes = routes
            .iter()
            .map(|(r, a)| (r.parse().unwrap(), *a))
            .collect();
        let duplicates = RouteTable::new(routes).unwrap_err();
        let messages: Vec<String> = duplicates.iter().map(ToString::to_string).collect();
        assert_eq!(
            messages,
            [
                "route `api.example.com/v1` is claimed by both `first` and `second`",
                "route `/hello` is claimed by both `third` and `fourth`",
            ]
        );
    }
}
