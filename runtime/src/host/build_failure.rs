//! The answer while an app has never built: a 500 whose body shows the compiler's
//! errors, as a page for browsers and as text for everything else.

use http::{HeaderMap, HeaderValue, Response, StatusCode, header};

use super::body::ResponseBody;
use super::dispatch::plain;

/// Why an app has no version to serve.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BuildFailure {
    /// The app (crate) that failed to build.
    pub app: String,
    /// What the build printed about the failure, without colour codes.
    pub errors: String,
}

impl BuildFailure {
    /// A 500 showing the errors: HTML when the client accepts it (a browser), else text.
    pub fn response(&self, request: &HeaderMap) -> Response<ResponseBody> {
        let status = StatusCode::INTERNAL_SERVER_ERROR;
        if !accepts_html(request) {
            let text = format!(
                "500 Internal Server Error: `{}` failed to build; wedge serves it once a build succeeds\n\n{}\n",
                self.app,
                self.errors.trim_end()
            );
            return plain(status, text);
        }
        let page = format!(
            "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>{app} failed to build</title>\
             <style>body{{font-family:system-ui,sans-serif;margin:2rem}}\
             pre{{background:#1e1e1e;color:#eee;padding:1rem;overflow:auto}}</style></head>\n\
             <body><h1>{app} failed to build</h1>\
             <p>wedge serves it once a build succeeds; save a fix and reload this page.</p>\n\
             <pre>{errors}</pre></body></html>\n",
            app = escape_html(&self.app),
            errors = escape_html(self.errors.trim_end()),
        );
        let mut response = Response::new(ResponseBody::text(page));
        *response.status_mut() = status;
        response.headers_mut().insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("text/html; charset=utf-8"),
        );
        response
    }
}

/// Browsers ask for `text/html` first; curl and most tools send `*/*` or nothing.
fn accepts_html(request: &HeaderMap) -> bool {
    request
        .get_all(header::ACCEPT)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(','))
        .any(|item| {
            item.split(';')
                .next()
                .is_some_and(|t| t.trim() == "text/html")
        })
}

fn escape_html(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '&' => out.push_str("&amp;"),
            '"' => out.push_str("&quot;"),
            _ => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use http_body_util::BodyExt;

    fn failure() -> BuildFailure {
        BuildFailure {
            app: "greeter".into(),
            errors: "error: expected `;`, found `<x>`".into(),
        }
    }

    fn headers(accept: &'static str) -> HeaderMap {
        let mut headers = HeaderMap::new();
        headers.insert(header::ACCEPT, HeaderValue::from_static(accept));
        headers
    }

    async fn body(response: Response<ResponseBody>) -> String {
        let bytes = response.into_body().collect().await.unwrap().to_bytes();
        String::from_utf8(bytes.to_vec()).unwrap()
    }

    #[tokio::test]
    async fn browsers_get_an_escaped_html_page() {
        let accept = "text/html,application/xhtml+xml;q=0.9,*/*;q=0.8";
        let response = failure().response(&headers(accept));
        assert_eq!(response.status(), 500);
        assert_eq!(
            response.headers()[header::CONTENT_TYPE],
            "text/html; charset=utf-8"
        );
        let page = body(response).await;
        assert!(page.contains("<h1>greeter failed to build</h1>"), "{page}");
        assert!(page.contains("found `&lt;x&gt;`"), "{page}");
    }

    #[tokio::test]
    async fn other_clients_get_the_errors_as_text() {
        for request in [
            headers("*/*"),
            HeaderMap::new(),
            headers("application/json"),
        ] {
            let response = failure().response(&request);
            assert_eq!(response.status(), 500);
            assert!(
                response.headers()[header::CONTENT_TYPE]
                    .to_str()
                    .unwrap()
                    .starts_with("text/plain")
            );
            let text = body(response).await;
            assert!(text.contains("`greeter` failed to build"), "{text}");
            assert!(text.contains("found `<x>`"), "{text}");
        }
    }
}
