//! A client that sends one request and then reads nothing: what a hostile client
//! does to hold a connection, and its response's resources, for free.

use std::path::Path;
use std::sync::Arc;

use rustls::pki_types::CertificateDer;
use rustls::pki_types::pem::PemObject;
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

/// Either kind of connection, plain or TLS.
pub trait Connection: AsyncRead + AsyncWrite + Send + Unpin {}

impl<T: AsyncRead + AsyncWrite + Send + Unpin> Connection for T {}

/// A connection to `addr` that sent `GET path` `times` times (pipelined) and will
/// read nothing more (a receive buffer as small as the kernel allows, about 2 KiB,
/// so the server's writes soon wait), over TLS when `tls` names the development
/// certificate to trust.
pub async fn never_reading(
    addr: &str,
    path: &str,
    times: usize,
    tls: Option<&Path>,
) -> Box<dyn Connection> {
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.set_recv_buffer_size(1024).unwrap();
    let stream = socket.connect(addr.parse().unwrap()).await.unwrap();
    let request = format!("GET {path} HTTP/1.1\r\nhost: x\r\n\r\n").repeat(times);
    let mut client: Box<dyn Connection> = match tls {
        None => Box::new(stream),
        Some(ca) => {
            let mut roots = rustls::RootCertStore::empty();
            for cert in CertificateDer::pem_file_iter(ca).unwrap() {
                roots.add(cert.unwrap()).unwrap();
            }
            let provider = Arc::new(rustls::crypto::ring::default_provider());
            let mut config = rustls::ClientConfig::builder_with_provider(provider)
                .with_safe_default_protocol_versions()
                .unwrap()
                .with_root_certificates(roots)
                .with_no_client_auth();
            config.alpn_protocols = vec![b"http/1.1".to_vec()];
            let connector = tokio_rustls::TlsConnector::from(Arc::new(config));
            let name = "localhost".try_into().unwrap();
            Box::new(connector.connect(name, stream).await.unwrap())
        }
    };
    client.write_all(request.as_bytes()).await.unwrap();
    client.flush().await.unwrap();
    client
}

/// Reads what reached `client`'s buffer: the server must have reset the connection
/// (within 30 s).
pub async fn assert_reset(client: &mut Box<dyn Connection>) {
    let mut taken = Vec::new();
    let read = tokio::time::timeout(Duration::from_secs(30), client.read_to_end(&mut taken));
    let err = read
        .await
        .expect("the connection was left open")
        .unwrap_err();
    assert_eq!(err.kind(), std::io::ErrorKind::ConnectionReset, "{err}");
}
