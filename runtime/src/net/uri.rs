//! The request target as every engine hands it on: an absolute URI, built in one
//! place from what the engine parsed (an HTTP/1.1 origin-form target and its Host
//! field, or HTTP/2 and HTTP/3 pseudo-headers), and the scheme a connection implies.

use http::Uri;
use http::uri::Scheme;

/// Whether a connection arrived over TLS: the scheme of its requests' URIs when they
/// name none, and the scheme a guest is told its request came with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RequestScheme {
    Http,
    Https,
}

impl RequestScheme {
    /// The scheme as a URI spells it.
    pub fn as_str(self) -> &'static str {
        match self {
            RequestScheme::Http => "http",
            RequestScheme::Https => "https",
        }
    }
}

impl From<RequestScheme> for Scheme {
    fn from(scheme: RequestScheme) -> Scheme {
        match scheme {
            RequestScheme::Http => Scheme::HTTP,
            RequestScheme::Https => Scheme::HTTPS,
        }
    }
}

/// The absolute URI of a request to `authority` for `path_and_query`, with `scheme`
/// (the request's own, or its connection's when it names none). Fails for parts that
/// do not make a URI.
pub fn absolute(
    scheme: &[u8],
    authority: &[u8],
    path_and_query: &[u8],
) -> Result<Uri, http::Error> {
    Uri::builder()
        .scheme(scheme)
        .authority(authority)
        .path_and_query(path_and_query)
        .build()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parts_make_an_absolute_uri_and_bad_ones_none() {
        let uri = absolute(b"https", b"example.com:8443", b"/a?b=1").unwrap();
        assert_eq!(uri, "https://example.com:8443/a?b=1");
        assert!(absolute(b"http", b"bad host", b"/").is_err());
    }
}
