//! Routing by method and path pattern, with `:name` parameters.

use crate::decode::percent_decode;
use crate::error::Error;
use crate::request::Request;
use crate::response::{IntoResponse, Response};
use http::Method;
use std::future::Future;
use std::pin::Pin;

type Handler = Box<dyn Fn(Request) -> Pin<Box<dyn Future<Output = Response>>>>;

/// Dispatches requests to async handlers by method and path pattern.
///
/// A pattern is a path whose segments are literal (`/items`) or parameters
/// (`/items/:id`, read with [`Request::param`]), relative to where the app is
/// mounted: an app on the wedge route `/api` matches `/api/items` with the
/// pattern `/items` ([`Request::app_path`]); [`Router::nest`] mounts a router
/// under a prefix of its own. Matching is per segment and
/// exact (`/items/` does not match `/items`). When several patterns match,
/// literal segments win over parameters, left to right: `/users/me` beats
/// `/users/:id` for `/users/me`. Then the method picks the handler:
///
/// - no pattern matches the path: `404`;
/// - the path matches but no route has the method: `405` with an `allow`
///   header listing the methods the path has;
/// - a `HEAD` request with no `HEAD` route is served by the `GET` route (the
///   host sends the head alone).
///
/// Handlers are `async fn(Request) -> R` with `R:` [`IntoResponse`], so a
/// handler returning `Result<Response, Error>` can use `?`. A route added
/// twice for the same method and pattern keeps the first.
///
/// ```no_run
/// use wedge_sdk::{Error, Request, Response, Router};
///
/// async fn list(_req: Request) -> Response {
///     Response::text("all users\n")
/// }
///
/// async fn show(req: Request) -> Result<Response, Error> {
///     let id: u64 = req
///         .param("id")
///         .and_then(|id| id.parse().ok())
///         .ok_or_else(|| Error::http(400, "user ids are numbers"))?;
///     Ok(Response::text(format!("user {id}\n")))
/// }
///
/// async fn handle(req: Request) -> Response {
///     Router::new()
///         .get("/users", list)
///         .get("/users/:id", show)
///         .handle(req)
///         .await
/// }
///
/// wedge_sdk::export_handler!(handle);
/// ```
#[derive(Default)]
pub struct Router {
    routes: Vec<Route>,
}

struct Route {
    method: Method,
    pattern: Vec<Segment>,
    handler: Handler,
}

#[derive(Clone, PartialEq, Eq)]
enum Segment {
    Literal(String),
    Param(String),
}

impl Segment {
    /// The one segment of the pattern `/`.
    fn is_empty(&self) -> bool {
        matches!(self, Segment::Literal(l) if l.is_empty())
    }
}

impl Router {
    /// A router with no routes: it answers every request `404`.
    ///
    /// ```
    /// let router = wedge_sdk::Router::new();
    /// # let _ = router;
    /// ```
    pub fn new() -> Self {
        Self::default()
    }

    /// Route `method` requests whose path matches `pattern` to `handler`.
    ///
    /// ```no_run
    /// use wedge_sdk::{Method, Request, Response, Router};
    ///
    /// async fn purge(req: Request) -> Response {
    ///     Response::text(format!("purged {}\n", req.param("key").unwrap_or("")))
    /// }
    ///
    /// async fn handle(req: Request) -> Response {
    ///     let purge_method = Method::from_bytes(b"PURGE").unwrap();
    ///     Router::new().route(purge_method, "/cache/:key", purge).handle(req).await
    /// }
    /// # wedge_sdk::export_handler!(handle);
    /// ```
    pub fn route<F, Fut>(mut self, method: Method, pattern: &str, handler: F) -> Self
    where
        F: Fn(Request) -> Fut + 'static,
        Fut: Future + 'static,
        Fut::Output: IntoResponse,
    {
        self.routes.push(Route {
            method,
            pattern: parse_pattern(pattern),
            handler: Box::new(move |req| {
                let fut = handler(req);
                Box::pin(async move { fut.await.into_response() })
            }),
        });
        self
    }

    /// Route `GET` (and `HEAD`, unless it has its own route) requests.
    ///
    /// ```no_run
    /// # use wedge_sdk::{Request, Response, Router};
    /// async fn home(_req: Request) -> Response { Response::html("<h1>Home</h1>\n") }
    /// async fn handle(req: Request) -> Response { Router::new().get("/", home).handle(req).await }
    /// # wedge_sdk::export_handler!(handle);
    /// ```
    pub fn get<F, Fut>(self, pattern: &str, handler: F) -> Self
    where
        F: Fn(Request) -> Fut + 'static,
        Fut: Future + 'static,
        Fut::Output: IntoResponse,
    {
        self.route(Method::GET, pattern, handler)
    }

    /// Route `POST` requests.
    ///
    /// ```no_run
    /// # use wedge_sdk::{Request, Response, Router};
    /// async fn create(_req: Request) -> Response { Response::new(201) }
    /// async fn handle(req: Request) -> Response { Router::new().post("/items", create).handle(req).await }
    /// # wedge_sdk::export_handler!(handle);
    /// ```
    pub fn post<F, Fut>(self, pattern: &str, handler: F) -> Self
    where
        F: Fn(Request) -> Fut + 'static,
        Fut: Future + 'static,
        Fut::Output: IntoResponse,
    {
        self.route(Method::POST, pattern, handler)
    }

    /// Route `PUT` requests.
    ///
    /// ```no_run
    /// # use wedge_sdk::{Request, Response, Router};
    /// async fn replace(_req: Request) -> Response { Response::new(204) }
    /// async fn handle(req: Request) -> Response { Router::new().put("/items/:id", replace).handle(req).await }
    /// # wedge_sdk::export_handler!(handle);
    /// ```
    pub fn put<F, Fut>(self, pattern: &str, handler: F) -> Self
    where
        F: Fn(Request) -> Fut + 'static,
        Fut: Future + 'static,
        Fut::Output: IntoResponse,
    {
        self.route(Method::PUT, pattern, handler)
    }

    /// Route `PATCH` requests.
    ///
    /// ```no_run
    /// # use wedge_sdk::{Request, Response, Router};
    /// async fn update(_req: Request) -> Response { Response::new(204) }
    /// async fn handle(req: Request) -> Response { Router::new().patch("/items/:id", update).handle(req).await }
    /// # wedge_sdk::export_handler!(handle);
    /// ```
    pub fn patch<F, Fut>(self, pattern: &str, handler: F) -> Self
    where
        F: Fn(Request) -> Fut + 'static,
        Fut: Future + 'static,
        Fut::Output: IntoResponse,
    {
        self.route(Method::PATCH, pattern, handler)
    }

    /// Route `DELETE` requests.
    ///
    /// ```no_run
    /// # use wedge_sdk::{Request, Response, Router};
    /// async fn remove(_req: Request) -> Response { Response::new(204) }
    /// async fn handle(req: Request) -> Response { Router::new().delete("/items/:id", remove).handle(req).await }
    /// # wedge_sdk::export_handler!(handle);
    /// ```
    pub fn delete<F, Fut>(self, pattern: &str, handler: F) -> Self
    where
        F: Fn(Request) -> Fut + 'static,
        Fut: Future + 'static,
        Fut::Output: IntoResponse,
    {
        self.route(Method::DELETE, pattern, handler)
    }

    /// Serve `router`'s routes under `prefix`: `/users/:id` nested at `/admin`
    /// matches `/admin/users/7`. A nested route keeps its method and handler, and
    /// its parameters join the prefix's (`/orgs/:org`).
    ///
    /// ```no_run
    /// # use wedge_sdk::{Request, Response, Router};
    /// async fn users(_req: Request) -> Response { Response::text("users\n") }
    /// async fn handle(req: Request) -> Response {
    ///     let admin = Router::new().get("/users", users);
    ///     Router::new().nest("/admin", admin).handle(req).await
    /// }
    /// # wedge_sdk::export_handler!(handle);
    /// ```
    pub fn nest(mut self, prefix: &str, router: Router) -> Self {
        let prefix = parse_pattern(prefix.trim_end_matches('/'));
        let prefix: Vec<&Segment> = prefix.iter().filter(|s| !s.is_empty()).collect();
        for route in router.routes {
            let mut pattern: Vec<Segment> = prefix.iter().map(|s| (*s).clone()).collect();
            // The nested router's `/` is the prefix itself.
            if !(route.pattern.len() == 1 && route.pattern[0].is_empty()) || pattern.is_empty() {
                pattern.extend(route.pattern);
            }
            self.routes.push(Route { pattern, ..route });
        }
        self
    }

    /// Answer `req` with the handler of the route it matches (its path
    /// parameters set on the request), or with `404` / `405`.
    ///
    /// ```no_run
    /// # use wedge_sdk::{Request, Response, Router};
    /// # async fn home(_req: Request) -> Response { Response::new(200) }
    /// async fn handle(req: Request) -> Response {
    ///     Router::new().get("/", home).handle(req).await
    /// }
    /// # wedge_sdk::export_handler!(handle);
    /// ```
    pub async fn handle(&self, mut req: Request) -> Response {
        let segments = split(req.app_path());
        let Some(best) = self
            .routes
            .iter()
            .filter(|r| matches(&r.pattern, &segments))
            .min_by_key(|r| specificity(&r.pattern))
        else {
            return Error::http(404, format_args!("no route for {}", req.path())).into_response();
        };
        let same_path = || self.routes.iter().filter(|r| r.pattern == best.pattern);
        let wanted = req.method();
        let route = same_path().find(|r| r.method == wanted).or_else(|| {
            (wanted == Method::HEAD)
                .then(|| same_path().find(|r| r.method == Method::GET))
                .flatten()
        });
        let Some(route) = route else {
            let mut allow: Vec<&str> = Vec::new();
            for method in same_path().map(|r| r.method.as_str()) {
                if !allow.contains(&method) {
                    allow.push(method);
                }
            }
            if allow.contains(&"GET") && !allow.contains(&"HEAD") {
                allow.push("HEAD");
            }
            let message = format_args!("{wanted} is not allowed for {}", req.path());
            return Error::http(405, message)
                .into_response()
                .with_header("allow", allow.join(", "));
        };
        let params = params(&route.pattern, &segments);
        req.set_params(params);
        (route.handler)(req).await
    }
}

impl std::fmt::Debug for Router {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut list = f.debug_list();
        for route in &self.routes {
            list.entry(&format_args!(
                "{} {}",
                route.method,
                unparse(&route.pattern)
            ));
        }
        list.finish()
    }
}

fn split(path: &str) -> Vec<&str> {
    path.strip_prefix('/').unwrap_or(path).split('/').collect()
}

fn parse_pattern(pattern: &str) -> Vec<Segment> {
    split(pattern)
        .into_iter()
        .map(|s| match s.strip_prefix(':') {
            Some(name) => Segment::Param(name.to_owned()),
            None => Segment::Literal(s.to_owned()),
        })
        .collect()
}

fn unparse(pattern: &[Segment]) -> String {
    pattern
        .iter()
        .map(|s| match s {
            Segment::Literal(l) => format!("/{l}"),
            Segment::Param(p) => format!("/:{p}"),
        })
        .collect()
}

fn matches(pattern: &[Segment], segments: &[&str]) -> bool {
    pattern.len() == segments.len()
        && pattern.iter().zip(segments).all(|(p, s)| match p {
            Segment::Literal(l) => l == s,
            Segment::Param(_) => !s.is_empty(),
        })
}

/// Sort key among patterns matching one path: literals (`false`) before
/// parameters (`true`), compared left to right.
fn specificity(pattern: &[Segment]) -> Vec<bool> {
    pattern
        .iter()
        .map(|s| matches!(s, Segment::Param(_)))
        .collect()
}

fn params(pattern: &[Segment], segments: &[&str]) -> Vec<(String, String)> {
    pattern
        .iter()
        .zip(segments)
        .filter_map(|(p, s)| match p {
            Segment::Param(name) => Some((name.clone(), percent_decode(s, false).into_owned())),
            Segment::Literal(_) => None,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::request::Body;
    use crate::request::tests::run;
    use crate::response::ResponseBody;

    async fn show(req: Request) -> Response {
        let params: Vec<String> = ["id", "name"]
            .iter()
            .filter_map(|k| Some(format!("{k}={}", req.param(k)?)))
            .collect();
        Response::text(format!("{} {}", req.method(), params.join(" ")))
    }

    async fn fixed(_req: Request) -> Response {
        Response::text("fixed")
    }

    async fn fails(_req: Request) -> Result<Response, Error> {
        Err(Error::http(418, "teapot"))
    }

    fn router() -> Router {
        Router::new()
            .get("/", fixed)
            .get("/users/:id", show)
            .delete("/users/:id", show)
            .get("/users/me", fixed)
            .get("/users/:id/files/:name", show)
            .post("/fail", fails)
    }

    /// Status, `allow` header and body of `method path` through `router`.
    fn call(router: &Router, method: Method, path: &str) -> (u16, Option<String>, String) {
        call_mounted(router, method, path, &[])
    }

    /// [`call`] with request `fields` (e.g. the base path wedge sets).
    fn call_mounted(
        router: &Router,
        method: Method,
        path: &str,
        fields: &[(&str, &str)],
    ) -> (u16, Option<String>, String) {
        let req = Request::for_test(method, path, fields, Body::from_chunks(vec![], None));
        let (status, fields, body) = run(router.handle(req)).into_parts();
        let allow = fields
            .iter()
            .find(|(k, _)| k == "allow")
            .map(|(_, v)| String::from_utf8(v.clone()).unwrap());
        let ResponseBody::Full(body) = body else {
            panic!("expected a full body")
        };
        (status, allow, String::from_utf8(body.to_vec()).unwrap())
    }

    #[test]
    fn matches_literals_and_params() {
        let r = router();
        assert_eq!(call(&r, Method::GET, "/").2, "fixed");
        assert_eq!(call(&r, Method::GET, "/users/7").2, "GET id=7");
        assert_eq!(call(&r, Method::DELETE, "/users/7").2, "DELETE id=7");
        assert_eq!(
            call(&r, Method::GET, "/users/a%20b/files/x%2Fy.txt").2,
            "GET id=a b name=x/y.txt"
        );
    }

    #[test]
    fn literal_segments_win_over_params_whatever_the_order() {
        let r = router();
        assert_eq!(call(&r, Method::GET, "/users/me").2, "fixed");
        let reversed = Router::new()
            .get("/a/:x", show)
            .get("/:id/b", show)
            .get("/a/b", fixed);
        assert_eq!(call(&reversed, Method::GET, "/a/b").2, "fixed");
        // Leftmost literal first: /a/:x beats /:id/b.
        let left = Router::new().get("/:id/b", show).get("/a/:id", fixed);
        assert_eq!(call(&left, Method::GET, "/a/b").2, "fixed");
    }

    #[test]
    fn unmatched_paths_are_404() {
        let r = router();
        for path in ["/nope", "/users", "/users/", "/users/7/", "/users/7/files"] {
            let (status, allow, body) = call(&r, Method::GET, path);
            assert_eq!((status, allow), (404, None), "{path}");
            assert_eq!(body, format!("no route for {path}\n"));
        }
        assert_eq!(call(&Router::new(), Method::GET, "/").0, 404);
    }

    #[test]
    fn other_methods_are_405_with_allow() {
        let r = router();
        let (status, allow, body) = call(&r, Method::POST, "/users/7");
        assert_eq!(status, 405);
        assert_eq!(allow.as_deref(), Some("GET, DELETE, HEAD"));
        assert_eq!(body, "POST is not allowed for /users/7\n");
        // The literal route owns /users/me: DELETE does not fall through to :id.
        let (status, allow, _) = call(&r, Method::DELETE, "/users/me");
        assert_eq!((status, allow.as_deref()), (405, Some("GET, HEAD")));
        let (status, allow, _) = call(&r, Method::GET, "/fail");
        assert_eq!((status, allow.as_deref()), (405, Some("POST")));
    }

    #[test]
    fn head_falls_back_to_get() {
        assert_eq!(call(&router(), Method::HEAD, "/users/7").2, "HEAD id=7");
    }

    #[test]
    fn handler_errors_become_responses() {
        let (status, _, body) = call(&router(), Method::POST, "/fail");
        assert_eq!((status, body.as_str()), (418, "teapot\n"));
    }

    #[test]
    fn routes_match_below_the_path_the_app_is_mounted_on() {
        let on_api = [("x-wedge-base-path", "/api")];
        let r = router();
        let call = |path| call_mounted(&r, Method::GET, path, &on_api);
        assert_eq!(call("/api/users/7").2, "GET id=7");
        assert_eq!(call("/api").2, "fixed");
        assert_eq!(call("/api/").2, "fixed");
        // The 404 names the path as sent.
        assert_eq!(call("/api/nope").2, "no route for /api/nope\n");
        // A base that is not the path's prefix on a segment boundary is ignored.
        let odd = [("x-wedge-base-path", "/us")];
        assert_eq!(
            call_mounted(&r, Method::GET, "/users/7", &odd).2,
            "GET id=7"
        );
    }

    #[test]
    fn nested_routers_serve_under_their_prefix() {
        let admin = Router::new()
            .get("/", fixed)
            .get("/users/:id", show)
            .delete("/users/:id", show);
        let r = Router::new()
            .get("/users/:id", fixed)
            .nest("/admin/", admin)
            .nest("/orgs/:name", Router::new().get("/users/:id", show));
        assert_eq!(call(&r, Method::GET, "/admin").2, "fixed");
        assert_eq!(call(&r, Method::GET, "/admin/users/7").2, "GET id=7");
        assert_eq!(call(&r, Method::DELETE, "/admin/users/7").2, "DELETE id=7");
        assert_eq!(call(&r, Method::GET, "/users/7").2, "fixed");
        assert_eq!(
            call(&r, Method::GET, "/orgs/acme/users/7").2,
            "GET id=7 name=acme"
        );
        let on_api = [("x-wedge-base-path", "/api")];
        let (status, _, body) = call_mounted(&r, Method::GET, "/api/admin/users/8", &on_api);
        assert_eq!((status, body.as_str()), (200, "GET id=8"));
        assert_eq!(
            format!(
                "{:?}",
                Router::new().nest("/", Router::new().get("/", fixed))
            ),
            "[GET /]"
        );
    }

    #[test]
    fn first_duplicate_wins_and_debug_lists_routes() {
        let r = Router::new().get("/x", fixed).get("/x", show);
        assert_eq!(call(&r, Method::GET, "/x").2, "fixed");
        assert_eq!(format!("{r:?}"), "[GET /x, GET /x]");
    }
}
