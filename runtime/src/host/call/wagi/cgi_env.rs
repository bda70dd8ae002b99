//! A request head as the CGI meta-variables of RFC 3875 §4.1, the environment a WAGI
//! program reads its request from, beside the app's own variables (`--env`,
//! `[app.env]`; CGI's win a name both give). Nothing of the host's environment.
//!
//! `REMOTE_ADDR` is the client connection's address (not a proxy's forwarded one).
//! `SCRIPT_NAME` is the path the app's route mounts it on (`x-wedge-base-path`, empty
//! on `/`) and `PATH_INFO` the rest of the path, percent-decoded; `QUERY_STRING` and
//! `REQUEST_URI` are as sent. Each request field is `HTTP_` and its name upper-cased
//! with `-` as `_`, repeated fields joined with `, ` (cookies with `; `); a field
//! whose name holds a `_` is left out, as it would pass for another's (nginx and
//! Apache do the same). So is `Proxy`: as `HTTP_PROXY` it would name the proxy
//! the program's HTTP client sends its outgoing requests through ("httpoxy",
//! CVE-2016-5385; Go's net/http/cgi and Apache drop it too).

use std::borrow::Cow;
use std::collections::BTreeMap;

use http::request::Parts;
use http::uri::Scheme;
use http::{Version, header};

use crate::host::call::{BASE_PATH, ClientAddr};

/// The program's environment for the request of `head`.
pub(crate) fn variables(
    head: &Parts,
    scheme: &Scheme,
    app_env: &[(String, String)],
) -> Vec<(String, String)> {
    let mut env: BTreeMap<String, String> = app_env.iter().cloned().collect();
    let mut set = |name: &str, value: Cow<'_, str>| {
        env.insert(name.to_string(), value.into_owned());
    };
    let field = |name: header::HeaderName| head.headers.get(name).map(|v| lossy(v.as_bytes()));
    set("GATEWAY_INTERFACE", "CGI/1.1".into());
    set(
        "SERVER_SOFTWARE",
        concat!("wedge/", env!("CARGO_PKG_VERSION")).into(),
    );
    set("SERVER_PROTOCOL", protocol(head.version).into());
    set("REQUEST_METHOD", head.method.as_str().into());
    let (server_name, server_port) = server(head, scheme);
    set("SERVER_NAME", server_name.into());
    set("SERVER_PORT", server_port.to_string().into());
    if *scheme == Scheme::HTTPS {
        set("HTTPS", "on".into());
    }
    if let Some(ClientAddr(client)) = head.extensions.get() {
        // An IPv4 client of a dual-stack socket as the IPv4 address it is.
        set("REMOTE_ADDR", client.ip().to_canonical().to_string().into());
    }
    let path = head.uri.path();
    let script_name = field(BASE_PATH).unwrap_or_default();
    let path_info = path.strip_prefix(&*script_name).unwrap_or(path);
    set("PATH_INFO", percent_decoded(path_info));
    set("SCRIPT_NAME", script_name);
    set("QUERY_STRING", head.uri.query().unwrap_or("").into());
    let target = head
        .uri
        .path_and_query()
        .map_or(path, |target| target.as_str());
    set("REQUEST_URI", target.into());
    if let Some(value) = field(header::CONTENT_TYPE) {
        set("CONTENT_TYPE", value);
    }
    if let Some(value) = field(header::CONTENT_LENGTH) {
        set("CONTENT_LENGTH", value);
    }
    for name in head.headers.keys() {
        let own = [header::CONTENT_TYPE, header::CONTENT_LENGTH, BASE_PATH];
        if own.contains(name) || name.as_str().contains('_') || name.as_str() == "proxy" {
            continue;
        }
        let separator = if name == header::COOKIE { "; " } else { ", " };
        let values: Vec<Cow<'_, str>> = head
            .headers
            .get_all(name)
            .iter()
            .map(|v| lossy(v.as_bytes()))
            .collect();
        let variable = format!(
            "HTTP_{}",
            name.as_str().to_ascii_uppercase().replace('-', "_")
        );
        set(&variable, values.join(separator).into());
    }
    // An HTTP/2 or HTTP/3 request names its host in its URI, not in a field.
    if !head.headers.contains_key(header::HOST)
        && let Some(authority) = head.uri.authority()
    {
        set("HTTP_HOST", authority.as_str().into());
    }
    env.into_iter().collect()
}

/// `SERVER_PROTOCOL`, as the request came.
fn protocol(version: Version) -> &'static str {
    match version {
        Version::HTTP_09 => "HTTP/0.9",
        Version::HTTP_10 => "HTTP/1.0",
        Version::HTTP_2 => "HTTP/2",
        Version::HTTP_3 => "HTTP/3",
        _ => "HTTP/1.1",
    }
}

/// The host the request was sent to (its URI's, else its `Host` field's) and port
/// (the one named, else the scheme's).
fn server(head: &Parts, scheme: &Scheme) -> (String, u16) {
    let authority = head.uri.authority().cloned().or_else(|| {
        let host = head.headers.get(header::HOST)?;
        host.to_str().ok()?.parse().ok()
    });
    let default_port = if *scheme == Scheme::HTTPS { 443 } else { 80 };
    match authority {
        Some(authority) => (
            authority.host().to_string(),
            authority.port_u16().unwrap_or(default_port),
        ),
        None => (String::new(), default_port),
    }
}

/// `%XX` sequences as the bytes they stand for (RFC 3875 §4.1.5: `PATH_INFO` is
/// decoded); a path that would decode to a NUL or to bytes that are not UTF-8 is
/// left as sent, as an environment variable holds neither.
fn percent_decoded(path: &str) -> Cow<'_, str> {
    if !path.contains('%') {
        return path.into();
    }
    let bytes = path.as_bytes();
    let mut decoded = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = bytes
            .get(i + 1..i + 3)
            .and_then(|digits| std::str::from_utf8(digits).ok())
            .and_then(|digits| u8::from_str_radix(digits, 16).ok());
        match (bytes[i], hex) {
            (b'%', Some(byte)) => {
                decoded.push(byte);
                i += 3;
            }
            (byte, _) => {
                decoded.push(byte);
                i += 1;
            }
        }
    }
    match String::from_utf8(decoded) {
        Ok(text) if !text.contains('\0') => text.into(),
        _ => path.into(),
    }
}

/// A field value as text (obsolete non-ASCII bytes as U+FFFD).
fn lossy(value: &[u8]) -> Cow<'_, str> {
    String::from_utf8_lossy(value)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env_of(request: http::Request<()>, scheme: Scheme) -> BTreeMap<String, String> {
        let (head, ()) = request.into_parts();
        let app = [
            ("GREETING".to_string(), "hi".to_string()),
            ("REQUEST_METHOD".to_string(), "forged".to_string()),
        ];
        variables(&head, &scheme, &app).into_iter().collect()
    }

    #[test]
    fn an_http2_request_under_a_mount_point_as_cgi_variables() {
        let mut request = http::Request::post("https://example.com:8443/api/caf%C3%A9/x?q=%20a&b")
            .version(Version::HTTP_2)
            .header("content-type", "text/plain")
            .header("content-length", "5")
            .header(BASE_PATH, "/api")
            .header("accept", "text/html")
            .header("accept", "text/plain")
            .header("cookie", "a=1")
            .header("cookie", "b=2")
            .header("x_forwarded_for", "forged")
            .header("proxy", "http://attacker.example/")
            .body(())
            .unwrap();
        let client = "[::ffff:192.0.2.7]:50000".parse().unwrap();
        request.extensions_mut().insert(ClientAddr(client));
        let env = env_of(request, Scheme::HTTPS);
        let expected = [
            ("CONTENT_LENGTH", "5"),
            ("CONTENT_TYPE", "text/plain"),
            ("GATEWAY_INTERFACE", "CGI/1.1"),
            ("GREETING", "hi"),
            ("HTTPS", "on"),
            ("HTTP_ACCEPT", "text/html, text/plain"),
            ("HTTP_COOKIE", "a=1; b=2"),
            ("HTTP_HOST", "example.com:8443"),
            ("PATH_INFO", "/café/x"),
            ("QUERY_STRING", "q=%20a&b"),
            ("REMOTE_ADDR", "192.0.2.7"),
            ("REQUEST_METHOD", "POST"),
            ("REQUEST_URI", "/api/caf%C3%A9/x?q=%20a&b"),
            ("SCRIPT_NAME", "/api"),
            ("SERVER_NAME", "example.com"),
            ("SERVER_PORT", "8443"),
            ("SERVER_PROTOCOL", "HTTP/2"),
        ];
        let mut env = env;
        assert!(env.remove("SERVER_SOFTWARE").unwrap().starts_with("wedge/"));
        let expected: BTreeMap<String, String> = expected
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        assert_eq!(env, expected);
    }

    #[test]
    fn an_http1_request_on_slash_names_its_host_by_its_field() {
        let request = http::Request::get("/")
            .header("host", "localhost")
            .body(())
            .unwrap();
        let env = env_of(request, Scheme::HTTP);
        assert_eq!(env["SERVER_NAME"], "localhost");
        assert_eq!(env["SERVER_PORT"], "80");
        assert_eq!(env["HTTP_HOST"], "localhost");
        assert_eq!(env["SCRIPT_NAME"], "");
        assert_eq!(env["PATH_INFO"], "/");
        assert_eq!(env["QUERY_STRING"], "");
        assert_eq!(env["SERVER_PROTOCOL"], "HTTP/1.1");
        assert!(!env.contains_key("HTTPS") && !env.contains_key("CONTENT_LENGTH"));
    }

    #[test]
    fn paths_decode_unless_they_would_hold_a_nul_or_broken_text() {
        assert_eq!(percent_decoded("/a%2Fb%20c"), "/a/b c");
        assert_eq!(percent_decoded("/100%"), "/100%");
        assert_eq!(percent_decoded("/%zz"), "/%zz");
        assert_eq!(percent_decoded("/a%00b"), "/a%00b");
        assert_eq!(percent_decoded("/%ff"), "/%ff");
    }
}
