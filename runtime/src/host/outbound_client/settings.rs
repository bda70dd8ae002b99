//! Host-wide settings of the outbound clients: which certificate authorities
//! an origin's certificate may chain to, and how many idle connections the
//! pools keep for how long. Set once at start-up, before any app is loaded,
//! and the same for every app (each app still has its own pool).

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use rustls::pki_types::CertificateDer;

/// Default idle connections kept per origin and app.
pub const DEFAULT_MAX_IDLE_PER_HOST: usize = 8;
/// Default time an idle connection is kept for reuse.
pub const DEFAULT_IDLE_TIMEOUT: Duration = Duration::from_secs(90);

#[derive(Debug, Clone)]
pub struct ClientSettings {
    /// Trusted besides the webpki roots (Mozilla's list).
    pub extra_roots: Vec<CertificateDer<'static>>,
    /// Idle connections kept per origin; more are closed once idle (0: no reuse).
    pub max_idle_per_host: usize,
    /// How long an idle connection is kept before it is closed.
    pub idle_timeout: Duration,
}

impl Default for ClientSettings {
    fn default() -> Self {
        ClientSettings {
            extra_roots: Vec::new(),
            max_idle_per_host: DEFAULT_MAX_IDLE_PER_HOST,
            idle_timeout: DEFAULT_IDLE_TIMEOUT,
        }
    }
}

/// The settings with their TLS configuration built.
pub(super) struct Shared {
    pub(super) tls: Arc<rustls::ClientConfig>,
    pub(super) max_idle_per_host: usize,
    pub(super) idle_timeout: Duration,
}

static SHARED: OnceLock<Shared> = OnceLock::new();

/// Sets the outbound clients' settings; the first call wins (wedge makes one,
/// at start-up). Without one, the defaults apply.
pub fn configure(settings: ClientSettings) -> Result<(), rustls::Error> {
    let shared = Shared::build(settings)?;
    let _ = SHARED.set(shared);
    Ok(())
}

pub(super) fn shared() -> &'static Shared {
    SHARED.get_or_init(|| {
        Shared::build(ClientSettings::default()).expect("the webpki roots and ring build a config")
    })
}

impl Shared {
    fn build(settings: ClientSettings) -> Result<Shared, rustls::Error> {
        Ok(Shared {
            tls: Arc::new(tls_config(&settings.extra_roots)?),
            max_idle_per_host: settings.max_idle_per_host,
            idle_timeout: settings.idle_timeout,
        })
    }
}

/// The webpki roots (Mozilla's list) plus `extra_roots`.
pub fn root_store(
    extra_roots: &[CertificateDer<'static>],
) -> Result<rustls::RootCertStore, rustls::Error> {
    let mut roots = rustls::RootCertStore {
        roots: webpki_roots::TLS_SERVER_ROOTS.to_vec(),
    };
    for root in extra_roots {
        roots.add(root.clone())?;
    }
    Ok(roots)
}

/// TLS 1.2/1.3 with ring, the webpki roots plus `extra_roots`, offering h2
/// then HTTP/1.1 by ALPN.
pub fn tls_config(
    extra_roots: &[CertificateDer<'static>],
) -> Result<rustls::ClientConfig, rustls::Error> {
    let roots = root_store(extra_roots)?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()?
        .with_root_certificates(roots)
        .with_no_client_auth();
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(config)
}
