//! Shared pieces of the HTTP/3 tests: a running server with its data directory
//! (where its development certificate is) and QUIC connections that trust it.

#![allow(dead_code)] // each test binary uses its own subset

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use quinn::crypto::rustls::QuicClientConfig;
use rustls::pki_types::CertificateDer;
use rustls::pki_types::pem::PemObject;

use super::support::{Server, example, temp_dir};

/// A server with its data directory (where its development certificate is).
pub struct H3Server {
    pub server: Server,
    pub data_dir: PathBuf,
}

/// Starts `wedge serve <example> ARGS` with its own data directory.
pub fn start(example_name: &str, args: &[&str]) -> H3Server {
    let data_dir = temp_dir("h3");
    let server = Server::start_in(&example(example_name), args, &data_dir);
    H3Server { server, data_dir }
}

impl H3Server {
    /// The TLS listener's address: HTTP/3 is on its port over UDP.
    pub fn addr(&self) -> SocketAddr {
        let tls = self.server.tls_url.as_ref().expect("a TLS listener");
        tls.trim_start_matches("https://").parse().unwrap()
    }

    /// A bare QUIC connection with ALPN h3, trusting only the dev certificate.
    pub async fn connect_quic(&self) -> quinn::Connection {
        self.connect_quic_with(None).await
    }

    /// The same; `stream_window` bounds what the server may send on a stream before
    /// we read.
    pub async fn connect_quic_with(&self, stream_window: Option<u32>) -> quinn::Connection {
        let pem = self.data_dir.join("tls/dev-cert.pem");
        let mut endpoint = quinn::Endpoint::client("127.0.0.1:0".parse().unwrap()).unwrap();
        endpoint.set_default_client_config(client_config(&pem, stream_window));
        endpoint
            .connect(self.addr(), "localhost")
            .unwrap()
            .await
            .expect("QUIC handshake")
    }
}

fn client_config(ca: &Path, stream_window: Option<u32>) -> quinn::ClientConfig {
    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_file_iter(ca).unwrap() {
        roots.add(cert.unwrap()).unwrap();
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut tls = rustls::ClientConfig::builder_with_provider(provider)
        .with_protocol_versions(&[&rustls::version::TLS13])
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    tls.alpn_protocols = vec![b"h3".to_vec()];
    let mut config = quinn::ClientConfig::new(Arc::new(QuicClientConfig::try_from(tls).unwrap()));
    let mut transport = quinn::TransportConfig::default();
    // Tests that block on the server process must not see the connection idle out.
    transport.keep_alive_interval(Some(Duration::from_secs(5)));
    if let Some(window) = stream_window {
        transport.stream_receive_window(window.into());
    }
    config.transport_config(Arc::new(transport));
    config
}
