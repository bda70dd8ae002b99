//! `/healthz` and `/readyz` on the admin listener, for probes (Kubernetes' kubelet,
//! a load balancer's health check).
//!
//! Both are unauthenticated, unlike the rest of the admin API: a kubelet's `httpGet`
//! probe sends no bearer token (a token in the pod spec would be readable by anyone
//! who can read the Deployment). In exchange they leak nothing: their bodies are
//! fixed words and counts — no app names, paths, digests, versions or error texts;
//! those are in the log and behind the token (`GET /apps`).
//!
//! - `/healthz`: 200 while the process answers at all (liveness). It stays 200
//!   while draining: the kubelet is already stopping the pod, and a liveness
//!   failure would only make it kill the pod before its requests finish.
//! - `/readyz`: 200 once the listeners accept and the apps are loaded (the
//!   config's, and the deployed ones kept in the data dir); else 503 with one line
//!   naming what is not ready. 503 again once a shutdown begins, so a balancer
//!   stops sending new requests while the ones in flight drain.

use std::collections::BTreeSet;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};

use http::{Method, StatusCode, header};
use tokio::sync::watch;

use super::{Response, not_allowed, text};

/// Where the start, the shutdown and the admin API report how far wedge is.
#[derive(Default)]
pub struct Readiness {
    /// The configured apps (and the stored deployed ones) were loaded.
    apps_loaded: AtomicBool,
    /// The app listeners accept connections.
    listening: AtomicBool,
    /// A shutdown began: no new connections, requests in flight finishing. A watch,
    /// so that streams without an end of their own (`wedge dev`'s build events) end.
    draining: watch::Sender<bool>,
    /// Deployed apps kept in the data dir that did not load at start. The pod does
    /// not serve what it was given, so it is not ready until each is deployed again
    /// or removed (`PUT`/`DELETE /apps/{name}`). Names never go into the probes'
    /// answers.
    unrestored: Mutex<BTreeSet<String>>,
}

impl Readiness {
    pub fn apps_loaded(&self) {
        self.apps_loaded.store(true, Ordering::SeqCst);
    }

    pub fn listening(&self) {
        self.listening.store(true, Ordering::SeqCst);
    }

    pub fn draining(&self) {
        self.draining.send_replace(true);
    }

    /// True from when a shutdown begins.
    pub fn draining_signal(&self) -> watch::Receiver<bool> {
        self.draining.subscribe()
    }

    /// Deployed app `name` was kept in the data dir but did not load at start.
    pub fn not_restored(&self, name: &str) {
        self.unrestored().insert(name.to_string());
    }

    /// The deployed apps that did not load at start and are not settled yet, for
    /// `GET /apps` (behind the token; the probes never name them).
    pub fn unrestored_apps(&self) -> Vec<String> {
        self.unrestored().iter().cloned().collect()
    }

    /// App `name` was deployed or removed: whatever did not restore is settled.
    pub fn settled(&self, name: &str) {
        self.unrestored().remove(name);
    }

    /// What is not ready, one phrase each; empty when ready. Draining says only that:
    /// nothing else matters once the process is on its way out.
    pub fn missing(&self) -> Vec<String> {
        if *self.draining.borrow() {
            return vec!["draining (shutting down)".to_string()];
        }
        let mut missing = Vec::new();
        if !self.apps_loaded.load(Ordering::SeqCst) {
            missing.push("apps loading".to_string());
        }
        if !self.listening.load(Ordering::SeqCst) {
            missing.push("listeners not accepting yet".to_string());
        }
        let unrestored = self.unrestored().len();
        if unrestored > 0 {
            missing.push(format!(
                "{unrestored} deployed app(s) did not restore (see the log; deploy or remove them)"
            ));
        }
        missing
    }

    fn unrestored(&self) -> std::sync::MutexGuard<'_, BTreeSet<String>> {
        crate::sync::lock(&self.unrestored)
    }
}

/// The probe's answer if `path` is a probe's, else `None` (the API's, behind the token).
pub fn answer(method: &Method, path: &str, readiness: &Readiness) -> Option<Response> {
    let probe = match path {
        "/healthz" => Probe::Live,
        "/readyz" => Probe::Ready,
        _ => return None,
    };
    if method != Method::GET && method != Method::HEAD {
        return Some(not_allowed("GET, HEAD"));
    }
    let mut response = match probe {
        Probe::Live => text(StatusCode::OK, "ok"),
        Probe::Ready => {
            let (status, message) = readyz(readiness);
            text(status, &message)
        }
    };
    // A probe's answer is about this moment: no cache may keep it.
    let no_store = header::HeaderValue::from_static("no-store");
    response
        .headers_mut()
        .insert(header::CACHE_CONTROL, no_store);
    Some(response)
}

enum Probe {
    Live,
    Ready,
}

/// `/readyz`'s status and one line: ready, or what is not.
fn readyz(readiness: &Readiness) -> (StatusCode, String) {
    match readiness.missing() {
        missing if missing.is_empty() => (StatusCode::OK, "ready".to_string()),
        missing => (
            StatusCode::SERVICE_UNAVAILABLE,
            format!("not ready: {}", missing.join("; ")),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ready_only_once_apps_are_loaded_and_listeners_accept_and_not_while_draining() {
        let readiness = Readiness::default();
        let (status, body) = readyz(&readiness);
        assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(body, "not ready: apps loading; listeners not accepting yet");

        readiness.apps_loaded();
        let (status, body) = readyz(&readiness);
        assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(body, "not ready: listeners not accepting yet");

        readiness.listening();
        assert_eq!(readyz(&readiness), (StatusCode::OK, "ready".to_string()));

        readiness.draining();
        let (status, body) = readyz(&readiness);
        assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(body, "not ready: draining (shutting down)");
    }

    #[test]
    fn an_unrestored_app_keeps_it_unready_until_settled_and_is_never_named() {
        let readiness = Readiness::default();
        readiness.apps_loaded();
        readiness.listening();
        readiness.not_restored("secret-app");
        readiness.not_restored("other");
        let (status, body) = readyz(&readiness);
        assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
        assert!(body.contains("2 deployed app(s) did not restore"), "{body}");
        assert!(!body.contains("secret-app"), "{body}");
        readiness.settled("secret-app");
        assert_eq!(readyz(&readiness).0, StatusCode::SERVICE_UNAVAILABLE);
        readiness.settled("other");
        assert_eq!(readyz(&readiness).0, StatusCode::OK);
    }

    #[test]
    fn healthz_is_up_whatever_the_readiness_and_other_paths_are_not_probes() {
        let readiness = Readiness::default();
        let live = answer(&Method::GET, "/healthz", &readiness).unwrap();
        assert_eq!(live.status(), StatusCode::OK);
        assert_eq!(live.headers()[header::CACHE_CONTROL], "no-store");
        let head = answer(&Method::HEAD, "/readyz", &readiness).unwrap();
        assert_eq!(head.status(), StatusCode::SERVICE_UNAVAILABLE);
        let post = answer(&Method::POST, "/healthz", &readiness).unwrap();
        assert_eq!(post.status(), StatusCode::METHOD_NOT_ALLOWED);
        for path in ["/apps", "/metrics", "/healthz/", "/readyz/x", "/"] {
            assert!(answer(&Method::GET, path, &readiness).is_none(), "{path}");
        }
    }
}
