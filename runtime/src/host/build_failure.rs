//! What `wedge dev` shows of a build that failed: the compiler's errors as rustc
//! coloured them, on a page that reloads itself once a build succeeds (it listens to
//! `wedge dev`'s overlay's events), or as text for everything but browsers.

use std::hash::{Hash, Hasher};

use http::{HeaderMap, HeaderName, HeaderValue, Response, StatusCode, header};

use super::ansi;
use super::response::plain;
use super::response_body::ResponseBody;

/// The build events' path (`wedge dev`'s overlay serves them).
pub const EVENTS_PATH: &str = "/_wedge/events";
/// The response field that says the last build failed.
pub const BUILD_HEADER: HeaderName = HeaderName::from_static("x-wedge-build");

/// Why an app has no new version to serve.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BuildFailure {
    /// The app (crate) that failed to build.
    pub app: String,
    /// What the build printed about the failure, with cargo's and rustc's colours
    /// (ANSI escapes).
    pub errors: String,
}

impl BuildFailure {
    /// The answer while the app has never built: a 500 showing the errors, as the
    /// page when the client accepts HTML (a browser), else as text.
    pub fn response(&self, request: &HeaderMap) -> Response<ResponseBody> {
        let status = StatusCode::INTERNAL_SERVER_ERROR;
        let mut response = if accepts_html(request) {
            let mut response = html(self.page());
            *response.status_mut() = status;
            response
        } else {
            let text = format!(
                "500 Internal Server Error: `{}` failed to build; wedge serves it once a build succeeds\n\n{}\n",
                self.app,
                self.plain_errors().trim_end()
            );
            plain(status, text)
        };
        mark_failed(&mut response);
        response
    }

    /// The errors without their colours.
    pub fn plain_errors(&self) -> String {
        ansi::strip(&self.errors)
    }

    /// Names these errors, so that a page showing them knows when the build's
    /// errors are others (or none): the hash of their text.
    pub fn id(&self) -> String {
        let mut hasher = std::hash::DefaultHasher::new();
        self.errors.hash(&mut hasher);
        format!("{:016x}", hasher.finish())
    }

    /// The first error's headline (`error[E0425]: cannot find value …`, or a JS
    /// tool's `SyntaxError: …`) and the first source location after it (or, as
    /// Node.js prints it, before it), for a one-line summary.
    pub fn headline(&self) -> (String, Option<String>) {
        let errors = self.plain_errors();
        let lines: Vec<&str> = errors.lines().collect();
        let at = lines.iter().position(|line| is_error(line));
        let headline = at
            .map(|at| lines[at])
            .or_else(|| lines.iter().copied().find(|line| !line.trim().is_empty()))
            .unwrap_or("the build failed")
            .trim()
            .to_string();
        let (before, after) = lines.split_at(at.map_or(0, |at| at + 1));
        let location = |lines: &[&str]| {
            lines
                .iter()
                .flat_map(|line| line.split_whitespace())
                .find_map(|word| ansi::location(word).map(|len| word[..len].to_string()))
        };
        (headline, location(after).or_else(|| location(before)))
    }

    /// The error page: the errors coloured as rustc coloured them, each file:line
    /// marked; it reloads itself when the build's errors change or go.
    pub fn page(&self) -> String {
        let title = format!("{} failed to build", self.app);
        let body = format!(
            "<pre>{}</pre>\n<p class=\"note\">Save a fix: wedge rebuilds, and this page reloads \
             when the build succeeds (or fails otherwise). Until then, requests get the last \
             version that built, if any, with a banner linking here.</p>",
            ansi::to_html(self.errors.trim_end()),
        );
        page(&title, "failed", &body, &format!("failed {}", self.id()))
    }
}

/// Whether `line` heads an error: rustc's and cargo's `error…`, or an exception
/// as JS tools print it (`SyntaxError: …`, `Error: …`).
fn is_error(line: &str) -> bool {
    let line = line.trim_start();
    line.starts_with("error")
        || line
            .split_once(": ")
            .is_some_and(|(name, _)| name.ends_with("Error") && !name.contains(char::is_whitespace))
}

/// The build page when the last build succeeded: it reloads itself, to show the
/// errors, once one fails.
pub fn built_page(app: &str) -> String {
    let body = format!(
        "<p>The last build of {} succeeded: <a href=\"/\">go to the app</a>. This page shows \
         the errors when a build fails.</p>",
        ansi::escape(app)
    );
    page(&format!("{app} built"), "built", &body, "ok")
}

/// A page of wedge's own; `shown` is the build state it shows, as the events say it
/// (`ok`, or `failed ID`): when an event says otherwise, the page reloads.
fn page(title: &str, class: &str, body: &str, shown: &str) -> String {
    format!(
        r#"<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width">
<title>{title}</title>
<style>
:root {{ color-scheme: dark; }}
body {{ margin: 0; background: #181a1f; color: #d7dae0; font: 15px/1.5 system-ui, sans-serif; }}
header {{ padding: 1rem 2rem; color: #fff; }}
header.failed {{ background: #b3261e; }}
header.built {{ background: #2e7d32; }}
h1 {{ margin: 0; font-size: 1.25rem; }}
main {{ padding: 0.5rem 2rem 2rem; }}
pre {{ font: 13px/1.45 ui-monospace, "SFMono-Regular", Menlo, Consolas, monospace; background: #0f1115;
  padding: 1rem 1.25rem; border-radius: 6px; overflow: auto; }}
.loc {{ background: #3a4252; color: #fff; border-radius: 3px; padding: 0 0.2em; text-decoration: underline; }}
.note {{ opacity: 0.8; }}
a {{ color: #8ab4f8; }}
</style></head>
<body><header class="{class}"><h1>{title}</h1></header>
<main>
{body}
</main>
<script>{reload}</script>
</body></html>
"#,
        title = ansi::escape(title),
        reload = reload_script(&format!("data => data !== {shown:?}")),
    )
}

/// A script that listens to the build's events and reloads the page when `when`
/// (a JS function of the event's data) says so.
pub fn reload_script(when: &str) -> String {
    format!(
        "(() => {{ const reload = {when}; const events = new EventSource({EVENTS_PATH:?}); \
         events.onmessage = (e) => {{ if (reload(e.data)) {{ events.close(); location.reload(); }} }}; }})();"
    )
}

/// An HTML response of wedge's own (200), marked with the build's state by whoever
/// sends it.
pub fn html(page: String) -> Response<ResponseBody> {
    let mut response = Response::new(ResponseBody::text(page));
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/html; charset=utf-8"),
    );
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    response
}

/// Says, for curl users, that the build failed (`x-wedge-build: failed`).
pub fn mark_failed<B>(response: &mut Response<B>) {
    response
        .headers_mut()
        .insert(BUILD_HEADER, HeaderValue::from_static("failed"));
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

#[cfg(test)]
mod tests {
    use super::*;
    use http_body_util::BodyExt;

    /// What rustc prints for an unknown name, colours on (the `-->` line's location
    /// is its own run).
    const ERRORS: &str = "\x1b[0m\x1b[1m\x1b[38;5;9merror[E0425]\x1b[0m\x1b[0m\x1b[1m: cannot find value `<x>` in this scope\x1b[0m\n\x1b[0m \x1b[0m\x1b[0m\x1b[1m\x1b[38;5;12m--> \x1b[0m\x1b[0msrc/lib.rs:4:5\x1b[0m\n";

    fn failure() -> BuildFailure {
        BuildFailure {
            app: "greeter".into(),
            errors: format!("   Compiling greeter\n{ERRORS}"),
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
    async fn browsers_get_the_errors_coloured_on_a_page_that_reloads() {
        let accept = "text/html,application/xhtml+xml;q=0.9,*/*;q=0.8";
        let response = failure().response(&headers(accept));
        assert_eq!(response.status(), 500);
        assert_eq!(
            response.headers()[header::CONTENT_TYPE],
            "text/html; charset=utf-8"
        );
        assert_eq!(response.headers()[BUILD_HEADER], "failed");
        let page = body(response).await;
        assert!(page.contains("<h1>greeter failed to build</h1>"), "{page}");
        assert!(page.contains("`&lt;x&gt;`"), "{page}");
        assert!(
            page.contains("<span style=\"color:#ff616e;font-weight:bold;\">error[E0425]</span>"),
            "{page}"
        );
        assert!(
            page.contains("<span class=\"loc\">src/lib.rs:4:5</span>"),
            "{page}"
        );
        let shown = format!("data !== \"failed {}\"", failure().id());
        assert!(page.contains(&shown), "{page}");
        assert!(
            page.contains("new EventSource(\"/_wedge/events\")"),
            "{page}"
        );
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
            assert_eq!(response.headers()[BUILD_HEADER], "failed");
            assert!(
                response.headers()[header::CONTENT_TYPE]
                    .to_str()
                    .unwrap()
                    .starts_with("text/plain")
            );
            let text = body(response).await;
            assert!(text.contains("`greeter` failed to build"), "{text}");
            assert!(
                text.contains("cannot find value `<x>` in this scope\n"),
                "{text}"
            );
            assert!(!text.contains('\x1b'), "{text:?}");
        }
    }

    #[test]
    fn the_headline_is_the_first_error_and_its_location() {
        assert_eq!(
            failure().headline(),
            (
                "error[E0425]: cannot find value `<x>` in this scope".to_string(),
                Some("src/lib.rs:4:5".to_string())
            )
        );
        let other = BuildFailure {
            app: "x".into(),
            errors: "\ncannot run cargo\n".into(),
        };
        assert_eq!(other.headline(), ("cannot run cargo".to_string(), None));
        assert_ne!(failure().id(), other.id());
    }

    #[test]
    fn a_js_tools_error_heads_and_its_location_may_come_first() {
        // As `node --check` prints a syntax error.
        let node = BuildFailure {
            app: "app".into(),
            errors: "\n> build\n/app/src/app.js:5\nthis is not js (\n     ^^\n\n\
                     SyntaxError: Unexpected identifier 'is'\n    at wrapSafe (node:internal)\n"
                .into(),
        };
        assert_eq!(
            node.headline(),
            (
                "SyntaxError: Unexpected identifier 'is'".to_string(),
                Some("/app/src/app.js:5".to_string())
            )
        );
        // Lines that only mention an error are not one.
        let note = BuildFailure {
            app: "app".into(),
            errors: "no errors: 0 files\nthe Error of it: x\n".into(),
        };
        assert_eq!(note.headline().0, "no errors: 0 files");
    }
}
