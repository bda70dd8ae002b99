//! The admin API, on its own listener (`--admin ADDR`, off by default): deploy,
//! replace and remove apps while wedge serves, list them, and read the metrics.
//! Every request needs `Authorization: Bearer <token>`, but the probes' ([`health`]).
//! HTTP/1.1, over TLS with `--admin-tls-cert`/`--admin-tls-key`; in cleartext off a
//! loopback address the start is warned about (the token would cross the network).
//! The listener is bound before the apps load, so liveness answers from the start;
//! until they are loaded the API answers 503.
//!
//! - `PUT /apps/{name}`: a form with the component and its settings (see
//!   [`upload`]); deploys or replaces the app atomically (requests in flight
//!   finish on the version they started with) → 201 (new) or 200 (replaced)
//!   with `{"name", "digest"}`. Anything that does not load (not a component,
//!   bad settings, a route another app claims) → 400 with the reason, and the
//!   app served before keeps serving.
//! - `DELETE /apps/{name}` → 204, or 404 if no such app was deployed. Its key-value
//!   data stays, unless `?purge=true`.
//! - Either with a name that is not an app name → 400.
//! - `GET /apps` → the apps served, as JSON.
//! - `GET /metrics` → Prometheus text.
//! - `GET /healthz`, `GET /readyz` → liveness and readiness, without the token.
//!
//! Deployed apps are kept in the data dir ([`store`]) and deployed again at start.

mod auth;
mod health;
mod store;
pub mod upload;

use std::convert::Infallible;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use anyhow::{Context, Result};
use bytes::Bytes;
use http::{Method, StatusCode, header};
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpListener;
use tokio::sync::Mutex;
use tokio_rustls::TlsAcceptor;

pub use auth::{TOKEN_ENV, Token, secret};
pub use health::Readiness;
use store::Store;

use crate::config;
use crate::metrics::{self, Metrics};
use crate::net::h1::HEADER_READ_TIMEOUT;
use crate::net::{cert, tls};
use crate::tenancy::Tenancy;

/// Default for `--admin-max-upload` (100 MiB): the largest form `PUT /apps/{name}` takes.
pub const DEFAULT_MAX_UPLOAD: u64 = 100 * 1024 * 1024;

/// How the admin API is served.
pub struct Settings {
    pub listen: SocketAddr,
    pub token: Token,
    /// HTTPS with this certificate (`--admin-tls-cert`/`--admin-tls-key`); `None` →
    /// cleartext HTTP, which a non-loopback address is warned about at start.
    pub tls: Option<TlsAcceptor>,
    /// The largest `PUT /apps/{name}` body, in bytes.
    pub max_upload: u64,
}

impl Settings {
    /// The acceptor for the admin listener serving `pem` (cert, key), checked now:
    /// a bad file fails the start before any app is compiled.
    pub fn tls_acceptor(cert: &Path, key: &Path) -> Result<TlsAcceptor> {
        let key = cert::load_pem(cert, key).context("the admin API's TLS certificate")?;
        tls::http1_acceptor(&key).context("the admin API's TLS certificate")
    }
}

/// The admin listener: the probes from the moment it is bound, the API once the
/// apps are loaded and it is installed.
pub struct Endpoint {
    settings: Settings,
    readiness: Arc<Readiness>,
    api: OnceLock<Admin>,
}

/// The admin API's state: the apps it changes and where it keeps them.
pub struct Admin {
    tenancy: Arc<Tenancy>,
    store: Store,
    metrics: Option<Arc<Metrics>>,
    /// Told when a deploy or removal settles an app that did not restore.
    readiness: Arc<Readiness>,
    /// Deploys and removals run one at a time (they share the store's files).
    changes: Mutex<()>,
}

type Response = http::Response<Full<Bytes>>;

/// A pause after a failed accept (e.g. out of file descriptors), so the loop
/// does not spin while the condition lasts.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(100);

impl Endpoint {
    /// Binds the admin address and serves it from a task of its own until the
    /// runtime stops: the probes at once, the API once [`Endpoint::install`]ed.
    pub async fn bind(settings: Settings, readiness: Arc<Readiness>) -> Result<Arc<Endpoint>> {
        let listen = settings.listen;
        let listener = TcpListener::bind(listen)
            .await
            .with_context(|| format!("cannot listen on {listen} (admin API)"))?;
        let addr = listener.local_addr()?;
        let scheme = if settings.tls.is_some() {
            "https"
        } else {
            "http"
        };
        tracing::info!("admin API on {scheme}://{addr}/");
        if settings.tls.is_none() && !addr.ip().to_canonical().is_loopback() {
            tracing::warn!(
                "admin API on {addr} without TLS: off a loopback address its bearer token \
                 crosses the network in cleartext; give it a certificate with \
                 --admin-tls-cert/--admin-tls-key (admin_tls_cert/admin_tls_key in the config)"
            );
        }
        let endpoint = Arc::new(Endpoint {
            settings,
            readiness,
            api: OnceLock::new(),
        });
        tokio::spawn(accept(listener, endpoint.clone()));
        Ok(endpoint)
    }

    /// Serves `api` from now on (until then its requests get 503).
    pub fn install(&self, api: Admin) {
        if self.api.set(api).is_err() {
            tracing::error!("admin API installed twice: keeping the first");
        }
    }

    async fn respond(&self, request: http::Request<Incoming>) -> Response {
        let path = request.uri().path();
        if let Some(probe) = health::answer(request.method(), path, &self.readiness) {
            return probe;
        }
        let authorization = request.headers().get(header::AUTHORIZATION);
        if !self
            .settings
            .token
            .admits(authorization.map(|v| v.as_bytes()))
        {
            let mut response = text(StatusCode::UNAUTHORIZED, "a valid bearer token is needed");
            let challenge = header::HeaderValue::from_static("Bearer realm=\"wedge admin\"");
            response
                .headers_mut()
                .insert(header::WWW_AUTHENTICATE, challenge);
            return response;
        }
        match self.api.get() {
            Some(api) => api.respond(request, self.settings.max_upload).await,
            None => {
                let mut response = text(StatusCode::SERVICE_UNAVAILABLE, "the apps are loading");
                let retry = header::HeaderValue::from_static("1");
                response.headers_mut().insert(header::RETRY_AFTER, retry);
                response
            }
        }
    }
}

impl Admin {
    /// The admin API over `tenancy`, with the apps kept in `data_dir` deployed
    /// again; one that no longer loads is logged, left on disk (a `DELETE`
    /// removes it) and keeps `readiness` unready until deployed again or removed.
    pub async fn restore(
        tenancy: Arc<Tenancy>,
        data_dir: &Path,
        readiness: Arc<Readiness>,
    ) -> Admin {
        let store = Store::new(data_dir);
        for (name, saved) in store.saved() {
            let restored = match saved {
                Ok(entry) => tenancy.deploy(entry).await.map(drop),
                Err(err) => Err(err),
            };
            if let Err(err) = restored {
                tracing::error!("deployed app `{name}` was not restored: {err:#}");
                readiness.not_restored(&name);
            }
        }
        Admin {
            tenancy,
            store,
            metrics: None,
            readiness,
            changes: Mutex::new(()),
        }
    }

    /// Serves `metrics` at `GET /metrics`.
    pub fn with_metrics(self, metrics: Arc<Metrics>) -> Admin {
        Admin {
            metrics: Some(metrics),
            ..self
        }
    }

    /// An authorised request; `max_upload` bounds a deploy's body.
    async fn respond(&self, request: http::Request<Incoming>, max_upload: u64) -> Response {
        let path = request.uri().path().to_string();
        let segments: Vec<&str> = path.trim_start_matches('/').split('/').collect();
        match (request.method(), segments.as_slice()) {
            (&Method::GET, ["apps"]) => self.list().await,
            (&Method::PUT | &Method::DELETE, ["apps", name]) => {
                // The name becomes a directory in the data dir: `..`, `.` or an
                // empty name would reach past the app's own.
                if let Err(reason) = config::check_app_name(name) {
                    return text(StatusCode::BAD_REQUEST, &reason);
                }
                if request.method() == Method::PUT {
                    self.deploy(name, request, max_upload).await
                } else {
                    let purge = request.uri().query() == Some("purge=true");
                    self.remove(name, purge).await
                }
            }
            (&Method::GET, ["metrics"]) if self.metrics.is_some() => self.metrics(),
            (_, ["apps"]) => not_allowed("GET"),
            (_, ["apps", _]) => not_allowed("PUT, DELETE"),
            _ => text(StatusCode::NOT_FOUND, &format!("no such resource: {path}")),
        }
    }

    /// The apps served, then the deployed ones kept in the data dir that did not
    /// load at start (`"status": "not restored"`; the log says why).
    async fn list(&self) -> Response {
        let served = self.tenancy.apps().await.into_iter().map(|app| {
            serde_json::json!({
                "name": app.name,
                "status": "serving",
                "digest": app.digest,
                "routes": app.routes,
                "deployed": app.deployed,
                "running": app.running,
                "waiting": app.waiting,
            })
        });
        let unrestored = self.readiness.unrestored_apps().into_iter().map(|name| {
            serde_json::json!({
                "name": name,
                "status": "not restored",
                "digest": null,
                "routes": [],
                "deployed": true,
                "running": 0,
                "waiting": 0,
            })
        });
        let apps: Vec<serde_json::Value> = served.chain(unrestored).collect();
        json(StatusCode::OK, &serde_json::Value::from(apps))
    }

    async fn deploy(
        &self,
        name: &str,
        request: http::Request<Incoming>,
        max_upload: u64,
    ) -> Response {
        let upload = match upload::read(request, max_upload).await {
            Ok(upload) => upload,
            Err(upload::Refused(status, message)) => return text(status, &message),
        };
        // Without an uploaded component the settings name an oci:// one.
        let component = upload.component.as_deref();
        // Hashing (and below, writing and syncing) up to --admin-max-upload blocks:
        // off the async threads, so /healthz and /readyz keep answering.
        let version = tokio::task::block_in_place(|| {
            self.store
                .version(name, component.unwrap_or_default(), &upload.config)
        });
        let uploaded = component.map(|_| self.store.component_path(&version));
        // Errors name the files as the client knows them, not as they are stored.
        let config_file = upload.config_file.as_deref().unwrap_or(CONFIG_SOURCE);
        let entry = match config::parse_app(&upload.config, config_file, name, uploaded.clone()) {
            Ok(entry) => entry,
            Err(errors) => return text(StatusCode::BAD_REQUEST, &errors.to_string()),
        };
        let _one_at_a_time = self.changes.lock().await;
        let replaces = self.is_deployed(name).await;
        let written =
            tokio::task::block_in_place(|| self.store.write(version, component, &upload.config));
        let version = match written {
            Ok(version) => version,
            Err(err) => return server_error(&err),
        };
        let deployed = match self.tenancy.deploy(entry).await {
            Ok(deployed) => deployed,
            Err(err) => {
                self.store.discard(version);
                let mut message = format!("{err:#}");
                if let Some(stored) = uploaded {
                    let file = upload.component_file.as_deref().unwrap_or(COMPONENT_SOURCE);
                    message = message.replace(&stored.display().to_string(), file);
                }
                return text(StatusCode::BAD_REQUEST, &message);
            }
        };
        let digest = deployed.digest;
        // A tag is resolved once per deploy: a restart serves the digest it resolved
        // to now, not whatever the tag names by then.
        let pinned = match &deployed.resolved {
            Some(resolved) => self.store.pin(&version, resolved),
            None => Ok(()),
        };
        if let Err(err) = pinned.and_then(|()| self.store.commit(version)) {
            return server_error(&err);
        }
        self.readiness.settled(name);
        tracing::info!("admin: deployed app `{name}` ({digest})");
        let status = if replaces {
            StatusCode::OK
        } else {
            StatusCode::CREATED
        };
        json(
            status,
            &serde_json::json!({ "name": name, "digest": digest }),
        )
    }

    /// Removes deployed app `name`, and with `purge` its key-value data.
    async fn remove(&self, name: &str, purge: bool) -> Response {
        let _one_at_a_time = self.changes.lock().await;
        // A stored app that failed to restore is not served but still removable.
        let removed = self.tenancy.remove(name).await.and_then(|served| {
            let stored = self.store.remove(name)?;
            Ok((served, stored))
        });
        let removed = match removed {
            Ok((Some(served), _)) if purge => match self.tenancy.purge_keyvalue(&served).await {
                Ok(()) => Ok(true),
                Err(err) => return server_error(&err),
            },
            Ok((served, stored)) => Ok(served.is_some() || stored),
            Err(err) => Err(err),
        };
        match removed {
            Ok(true) => {
                self.readiness.settled(name);
                tracing::info!("admin: removed app `{name}`");
                empty(StatusCode::NO_CONTENT)
            }
            Ok(false) if self.tenancy.apps().await.iter().any(|app| app.name == name) => text(
                StatusCode::NOT_FOUND,
                &format!(
                    "`{name}` is an app of the config file, not a deployed one: remove it \
                     from the file (the admin API removes only the apps it deployed)"
                ),
            ),
            Ok(false) => text(
                StatusCode::NOT_FOUND,
                &format!("no app `{name}` was deployed"),
            ),
            Err(err) => server_error(&err),
        }
    }

    async fn is_deployed(&self, name: &str) -> bool {
        let apps = self.tenancy.apps().await;
        apps.iter().any(|app| app.deployed && app.name == name)
    }

    fn metrics(&self) -> Response {
        let text = self
            .metrics
            .as_ref()
            .map(|m| m.encode())
            .unwrap_or_default();
        with_body(StatusCode::OK, metrics::CONTENT_TYPE, Bytes::from(text))
    }
}

/// How deploy errors name the uploaded settings and component when the form
/// gives no file names.
const CONFIG_SOURCE: &str = "config";
const COMPONENT_SOURCE: &str = "the uploaded component";

/// Serves each connection to the admin address over HTTP/1.1, in TLS if set.
async fn accept(listener: TcpListener, admin: Arc<Endpoint>) {
    loop {
        let stream = match listener.accept().await {
            Ok((stream, _)) => stream,
            Err(err) => {
                tracing::warn!("admin API: accepting a connection failed: {err}");
                tokio::time::sleep(ACCEPT_BACKOFF).await;
                continue;
            }
        };
        let admin = admin.clone();
        tokio::spawn(async move {
            let Some(acceptor) = admin.settings.tls.clone() else {
                return serve(stream, admin).await;
            };
            // The handshake is bounded like a request head: a client that opens a
            // connection and says nothing does not hold it.
            match tokio::time::timeout(HEADER_READ_TIMEOUT, acceptor.accept(stream)).await {
                Ok(Ok(tls)) => serve(tls, admin).await,
                Ok(Err(err)) => tracing::debug!("admin API: TLS handshake failed: {err}"),
                Err(_) => tracing::debug!("admin API: TLS handshake timed out"),
            }
        });
    }
}

/// Serves one connection's requests.
async fn serve<IO>(io: IO, admin: Arc<Endpoint>)
where
    IO: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let service = service_fn(move |request| {
        let admin = admin.clone();
        async move { Ok::<_, Infallible>(admin.respond(request).await) }
    });
    let connection = http1::Builder::new()
        .timer(TokioTimer::new())
        .header_read_timeout(HEADER_READ_TIMEOUT)
        .serve_connection(TokioIo::new(io), service);
    if let Err(err) = connection.await {
        tracing::debug!("admin API connection ended: {err}");
    }
}

fn text(status: StatusCode, message: &str) -> Response {
    let body = Bytes::from(format!("{message}\n"));
    with_body(status, "text/plain; charset=utf-8", body)
}

fn json(status: StatusCode, value: &serde_json::Value) -> Response {
    with_body(
        status,
        "application/json",
        Bytes::from(format!("{value}\n")),
    )
}

fn with_body(status: StatusCode, media: &'static str, body: Bytes) -> Response {
    let mut response = http::Response::new(Full::new(body));
    *response.status_mut() = status;
    let media = header::HeaderValue::from_static(media);
    response.headers_mut().insert(header::CONTENT_TYPE, media);
    response
}

fn empty(status: StatusCode) -> Response {
    let mut response = http::Response::new(Full::new(Bytes::new()));
    *response.status_mut() = status;
    response
}

fn not_allowed(allow: &'static str) -> Response {
    let mut response = text(StatusCode::METHOD_NOT_ALLOWED, "method not allowed");
    let allow = header::HeaderValue::from_static(allow);
    response.headers_mut().insert(header::ALLOW, allow);
    response
}

fn server_error(err: &anyhow::Error) -> Response {
    tracing::error!("admin API: {err:#}");
    text(StatusCode::INTERNAL_SERVER_ERROR, &format!("{err:#}"))
}
