//! Shared pieces of the HTTP/3 tests: a running server with its data directory
//! (where its development certificate is), QUIC connections that trust it, and
//! requests over them through the `h3` crate.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use bytes::{Buf, Bytes};
use h3::client::{RequestStream, SendRequest};
use http::{Request, StatusCode};
use quinn::crypto::rustls::QuicClientConfig;
use rustls::pki_types::CertificateDer;
use rustls::pki_types::pem::PemObject;

use crate::{Server, example, temp_dir};

/// A server with its data directory (where its development certificate is).
pub struct H3Server {
    pub server: Server,
    pub data_dir: PathBuf,
}

/// Starts `wedge serve <example> ARGS` with its own data directory.
pub fn start(example_name: &str, args: &[&str]) -> H3Server {
    start_via(&[], example_name, args)
}

/// Like [`start`], logging what the tracing filter `log` lets through (`WEDGE_LOG`).
pub fn start_logging(example_name: &str, args: &[&str], log: &str) -> H3Server {
    start_via(&["env", &format!("WEDGE_LOG={log}")], example_name, args)
}

/// Like [`start`], run through `prefix` ([`Server::start_via`]).
fn start_via(prefix: &[&str], example_name: &str, args: &[&str]) -> H3Server {
    let data_dir = temp_dir("h3");
    let server = Server::start_via(prefix, &example(example_name), args, &data_dir);
    H3Server { server, data_dir }
}

impl H3Server {
    /// The TLS listener's address: HTTP/3 is on its port over UDP (`wedge dev`'s
    /// `https://localhost:PORT` is reached on 127.0.0.1).
    pub fn addr(&self) -> SocketAddr {
        let tls = self.server.tls_url.as_ref().expect("a TLS listener");
        let authority = tls.trim_start_matches("https://");
        let authority = authority.replace("localhost:", "127.0.0.1:");
        authority.parse().unwrap()
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

/// A QUIC client config with ALPN h3 trusting only `ca`; `stream_window` bounds what
/// the server may send on a stream before we read.
pub fn client_config(ca: &Path, stream_window: Option<u32>) -> quinn::ClientConfig {
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

/// Requests on one HTTP/3 connection (the `h3` crate's client).
pub type Requests = SendRequest<h3_quinn::OpenStreams, Bytes>;

impl H3Server {
    /// A new connection speaking HTTP/3 through the `h3` crate. `stream_window`
    /// bounds what the server may send on a stream before we read.
    pub async fn connect_with(&self, stream_window: Option<u32>) -> Requests {
        let quic = self.connect_quic_with(stream_window).await;
        let (mut driver, requests) = h3::client::new(h3_quinn::Connection::new(quic))
            .await
            .expect("HTTP/3 connection");
        tokio::spawn(async move {
            let _ = std::future::poll_fn(|cx| driver.poll_close(cx)).await;
        });
        requests
    }

    /// A new HTTP/3 connection with default windows.
    pub async fn connect(&self) -> Requests {
        self.connect_with(None).await
    }
}

/// A request for `path` on the server (`https://localhost`).
pub fn request(method: &str, path: &str) -> Request<()> {
    Request::builder()
        .method(method)
        .uri(format!("https://localhost{path}"))
        .body(())
        .unwrap()
}

/// Sends `method path` with `body` (if any) while reading the response: the upload
/// and the download run side by side, as an echo needs.
pub async fn exchange(
    requests: &mut Requests,
    method: &str,
    path: &str,
    body: Option<Vec<u8>>,
) -> (StatusCode, Vec<u8>) {
    let stream = requests.send_request(request(method, path)).await.unwrap();
    let (mut upload, mut download) = stream.split();
    let send = async move {
        if let Some(body) = body {
            for chunk in body.chunks(64 * 1024) {
                upload
                    .send_data(Bytes::copy_from_slice(chunk))
                    .await
                    .unwrap();
            }
        }
        // A server that answered without the rest of the request may have stopped the
        // stream (STOP_SENDING) already: then the finish fails, and the answer tells.
        let _ = upload.finish().await;
    };
    let ((), answer) = tokio::join!(send, read_response(&mut download));
    answer
}

/// The response's status and whole body.
pub async fn read_response<S: h3::quic::RecvStream>(
    stream: &mut RequestStream<S, Bytes>,
) -> (StatusCode, Vec<u8>) {
    let response = stream.recv_response().await.unwrap();
    (response.status(), read_body(stream).await.unwrap())
}

/// The rest of a response's body, or the error that cut it off.
pub async fn read_body<S: h3::quic::RecvStream>(
    stream: &mut RequestStream<S, Bytes>,
) -> Result<Vec<u8>, h3::error::StreamError> {
    let mut body = Vec::new();
    while let Some(mut chunk) = stream.recv_data().await? {
        while chunk.has_remaining() {
            let part = chunk.chunk();
            body.extend_from_slice(part);
            let n = part.len();
            chunk.advance(n);
        }
    }
    Ok(body)
}
