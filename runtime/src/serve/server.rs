//! Serving started: the listeners bound once per worker, TLS and HTTP/3 set up around
//! one certificate, and the workers serving their listeners with one frontend until
//! told to stop. What `wedge serve` and `wedge dev` share once their flags are read.

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Result;
use tokio_rustls::TlsAcceptor;

use super::frontend::Frontend;
use super::workers::Workers;
use crate::net::h2::H2Config;
use crate::net::h3::H3Config;
use crate::net::listener::{ConnLimits, H3Server};
use crate::net::{Listeners, cert, tls};

/// Binds the cleartext and TLS addresses (and HTTP/3's, over UDP, when `h3`) once per
/// worker: the first set opens the ports (port 0 resolved), the others join them.
pub fn bind_workers(
    plain: &[SocketAddr],
    tls: &[SocketAddr],
    h3: bool,
    limits: ConnLimits,
    workers: usize,
) -> Result<Vec<Listeners>> {
    let first = Listeners::bind(plain.to_vec(), tls.to_vec(), h3)?.with_limits(limits);
    tracing::debug!("listening on {:?}", first.addrs());
    let mut sets = Vec::with_capacity(workers);
    for _ in 1..workers {
        sets.push(first.join()?);
    }
    sets.insert(0, first);
    Ok(sets)
}

/// What the TLS listener and HTTP/3 answer with.
#[derive(Clone, Default)]
pub struct Tls {
    acceptor: Option<TlsAcceptor>,
    h3: Option<H3Server>,
}

impl Tls {
    /// TLS with `key` (the operator's, else the development certificate in
    /// `data_dir`), and HTTP/3 with `h3` when it is on.
    pub fn new(
        operator_key: Option<cert::CertifiedKey>,
        data_dir: &Path,
        h3: Option<H3Config>,
    ) -> Result<Tls> {
        let key = certified_key(operator_key, data_dir)?;
        let h3 = match h3 {
            Some(config) => Some(H3Server {
                quinn: config.server_config(&key)?,
                config: Arc::new(config),
            }),
            None => None,
        };
        Ok(Tls {
            acceptor: Some(tls::acceptor(&key)?),
            h3,
        })
    }
}

/// Starts a worker per set of `listeners`, each serving them with `frontend` (counting
/// as its worker) until the workers are told to stop, then draining for at most `drain`.
pub fn start_workers(
    listeners: Vec<Listeners>,
    frontend: Frontend,
    h2: H2Config,
    tls: Tls,
    drain: Duration,
) -> Result<Workers> {
    let h2 = Arc::new(h2);
    Workers::start(listeners, move |index, listeners, stop| {
        listeners.serve(
            frontend.clone().for_worker(index),
            h2.clone(),
            tls.acceptor.clone(),
            tls.h3.clone(),
            stop.wait(),
            drain,
        )
    })
}

/// The TLS listener's (and HTTP/3's) certificate: the given PEM files or the
/// development certificate.
fn certified_key(
    operator_key: Option<cert::CertifiedKey>,
    data_dir: &Path,
) -> Result<cert::CertifiedKey> {
    match operator_key {
        Some(key) => Ok(key),
        None => {
            let dev = cert::dev_cert(data_dir)?;
            let verb = if dev.created { "created" } else { "using" };
            tracing::info!(
                "TLS: {verb} a self-signed development certificate for localhost, {}; \
                 trust it with `curl --cacert {}` (or use `curl -k`)",
                dev.cert.display(),
                dev.cert.display()
            );
            cert::load_pem(&dev.cert, &dev.key)
        }
    }
}
