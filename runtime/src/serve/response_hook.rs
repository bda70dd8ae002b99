//! What every response of a listener gets on its way out, whichever protocol carries it:
//! today the Alt-Svc advertisement of HTTP/3 on the TLS listener (RFC 7838).

use http::{HeaderValue, Response, header};

/// Applied to each response head a listener's connections send.
#[derive(Clone, Debug, Default)]
pub struct ResponseHook {
    alt_svc: Option<HeaderValue>,
}

impl ResponseHook {
    /// Adds nothing (cleartext, or TLS with HTTP/3 off).
    pub fn none() -> Self {
        ResponseHook::default()
    }

    /// Tells clients HTTP/3 is served on UDP `port` of the same host.
    pub fn advertise_h3(port: u16) -> Self {
        let value = HeaderValue::try_from(format!("h3=\":{port}\"; ma=86400"))
            .expect("a port number makes a valid header value");
        ResponseHook {
            alt_svc: Some(value),
        }
    }

    /// Adds what this listener adds; a handler's own Alt-Svc is left as it is.
    pub fn apply<B>(&self, response: &mut Response<B>) {
        if let Some(alt_svc) = &self.alt_svc {
            response
                .headers_mut()
                .entry(header::ALT_SVC)
                .or_insert_with(|| alt_svc.clone());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn response() -> Response<()> {
        Response::new(())
    }

    #[test]
    fn advertises_h3_on_the_given_port() {
        let mut r = response();
        ResponseHook::advertise_h3(8443).apply(&mut r);
        assert_eq!(r.headers()[header::ALT_SVC], "h3=\":8443\"; ma=86400");
    }

    #[test]
    fn none_adds_nothing_and_a_handlers_own_alt_svc_stays() {
        let mut r = response();
        ResponseHook::none().apply(&mut r);
        assert!(r.headers().is_empty());
        r.headers_mut()
            .insert(header::ALT_SVC, HeaderValue::from_static("clear"));
        ResponseHook::advertise_h3(8443).apply(&mut r);
        assert_eq!(r.headers()[header::ALT_SVC], "clear");
    }
}
