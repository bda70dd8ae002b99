//! The client side of the admin API, for `wedge deploy`, `wedge apps` and `wedge rm`:
//! its address (`HOST:PORT` as wedge.toml's `admin` writes it, or an http:// or
//! https:// URL), the certificates to trust for https://, and the bearer token.

use std::path::PathBuf;
use std::sync::Arc;

use anyhow::{Context, Result, anyhow, bail};
use bytes::Bytes;
use clap::Args;
use http::{Method, Request, StatusCode, Uri, header};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use rustls::client::WebPkiServerVerifier;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{DigitallySignedStruct, SignatureScheme};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;

use super::outbound_args::{CaFile, parse_ca};
use crate::admin;
use crate::host::outbound_client;

#[derive(Args)]
pub struct AdminClientArgs {
    /// The admin API: HOST:PORT as wedge.toml's `admin` gives it (reached over
    /// http://), or a URL, e.g. https://admin.example.net:9000 if it serves TLS.
    #[arg(long, value_name = "ADDR")]
    admin: String,

    /// For an https:// admin API: a PEM file of certificate authorities to trust
    /// besides the webpki roots (Mozilla's list), e.g. the admin's self-signed
    /// certificate itself; repeat for more.
    #[arg(long = "admin-ca", value_name = "FILE", value_parser = parse_ca)]
    admin_ca: Vec<CaFile>,

    /// File holding the admin API's bearer token; else $WEDGE_ADMIN_TOKEN.
    #[arg(long, value_name = "FILE")]
    token_file: Option<PathBuf>,
}

/// A body to send: its `Content-Type` and bytes.
pub type Body = (String, Bytes);

/// One admin API, ready to be asked.
pub struct AdminClient {
    /// The address as the user gave it, for messages.
    given: String,
    /// `http://HOST:PORT` or the URL given, without a trailing `/`.
    base: String,
    tls: Option<Arc<rustls::ClientConfig>>,
    token: String,
    runtime: tokio::runtime::Runtime,
}

impl AdminClientArgs {
    pub fn client(&self) -> Result<AdminClient> {
        let given = self.admin.clone();
        let base = if given.contains("://") {
            given.trim_end_matches('/').to_string()
        } else {
            format!("http://{given}")
        };
        let uri: Uri = base.parse().map_err(|_| not_an_address(&given))?;
        if uri.authority().is_none() {
            return Err(not_an_address(&given));
        }
        let tls = match uri.scheme_str() {
            Some("https") => Some(Arc::new(admin_tls(&self.admin_ca)?)),
            Some("http") if !self.admin_ca.is_empty() => {
                bail!("--admin-ca is for an https:// admin API, not `{given}`")
            }
            Some("http") => None,
            _ => return Err(not_an_address(&given)),
        };
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .context("starting the async runtime")?;
        Ok(AdminClient {
            base,
            tls,
            token: admin::secret(self.token_file.as_deref())?,
            runtime,
            given,
        })
    }
}

fn not_an_address(given: &str) -> anyhow::Error {
    anyhow!(
        "--admin takes HOST:PORT (e.g. 127.0.0.1:9000) or an http:// or https:// URL, not `{given}`"
    )
}

impl AdminClient {
    /// `method path` (e.g. `/apps`), with `body` if any: the answer's status and
    /// body. A refused token is an error.
    pub fn send(
        &self,
        method: Method,
        path: &str,
        body: Option<Body>,
    ) -> Result<(StatusCode, Bytes)> {
        let url = format!("{}{path}", self.base);
        let uri: Uri = url.parse().map_err(|_| anyhow!("`{url}` is not a URL"))?;
        let authority = uri.authority().expect("checked in client()").clone();
        let mut request = Request::builder()
            .method(method)
            .uri(uri.path_and_query().map_or("/", |p| p.as_str()))
            .header(header::HOST, authority.as_str())
            .header(header::AUTHORIZATION, format!("Bearer {}", self.token));
        let bytes = match body {
            Some((content_type, bytes)) => {
                request = request.header(header::CONTENT_TYPE, content_type);
                bytes
            }
            None => Bytes::new(),
        };
        let request = request
            .body(Full::new(bytes))
            .context("building the request")?;
        let (status, body) = self.runtime.block_on(self.exchange(request, &uri))?;
        if status == StatusCode::UNAUTHORIZED {
            bail!("the admin API at {} refused the token (401)", self.given);
        }
        Ok((status, body))
    }

    /// Sends `request` to `uri`'s host over one connection, in TLS if the API is
    /// https://; the response's status and body.
    async fn exchange(
        &self,
        request: Request<Full<Bytes>>,
        uri: &Uri,
    ) -> Result<(StatusCode, Bytes)> {
        let given = &self.given;
        let unreachable =
            |err: &dyn std::fmt::Display| anyhow!("cannot reach the admin API at {given}: {err}");
        let host = uri.host().unwrap_or_default();
        let host = host
            .strip_prefix('[')
            .and_then(|h| h.strip_suffix(']'))
            .unwrap_or(host);
        let port = uri
            .port_u16()
            .unwrap_or(if self.tls.is_some() { 443 } else { 80 });
        let tcp = TcpStream::connect((host, port))
            .await
            .map_err(|err| unreachable(&err))?;
        let response = match &self.tls {
            None => exchange(tcp, request).await,
            Some(config) => {
                let name = ServerName::try_from(host.to_string())
                    .map_err(|err| anyhow!("`{host}` is not a TLS server name: {err}"))?;
                let stream = TlsConnector::from(config.clone())
                    .connect(name, tcp)
                    .await
                    .map_err(|err| {
                        anyhow!(
                            "TLS with the admin API at {given} failed: {err} (a certificate no \
                             root vouches for? trust it with --admin-ca FILE)"
                        )
                    })?;
                exchange(stream, request).await
            }
        }
        .map_err(|err| unreachable(&anyhow::Error::from(err).root_cause()))?;
        let status = response.status();
        let body = response
            .into_body()
            .collect()
            .await
            .with_context(|| format!("reading the admin API's answer from {given}"))?;
        Ok((status, body.to_bytes()))
    }
}

/// An answer's text as one line (the admin API says why in plain text).
pub fn reason(body: &[u8]) -> String {
    let text = String::from_utf8_lossy(body);
    text.trim().lines().collect::<Vec<_>>().join("; ")
}

/// The client side of an https:// admin API: its certificate chains to the
/// webpki roots or an `--admin-ca` certificate, or is one of the `--admin-ca`
/// certificates itself (a self-signed one, even marked as a CA as `openssl req
/// -x509` makes it, which webpki would refuse as a server's certificate).
fn admin_tls(ca: &[CaFile]) -> Result<rustls::ClientConfig> {
    let trusted: Vec<_> = ca.iter().flat_map(|ca| ca.0.clone()).collect();
    let mut config = outbound_client::tls_config(&trusted)?;
    // The admin API speaks HTTP/1.1 only.
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let roots = Arc::new(outbound_client::root_store(&trusted)?);
    let chained = WebPkiServerVerifier::builder_with_provider(roots, provider).build()?;
    config
        .dangerous()
        .set_certificate_verifier(Arc::new(AdminVerifier { chained, trusted }));
    Ok(config)
}

/// See [`admin_tls`].
#[derive(Debug)]
struct AdminVerifier {
    chained: Arc<WebPkiServerVerifier>,
    trusted: Vec<CertificateDer<'static>>,
}

impl ServerCertVerifier for AdminVerifier {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        let chained = self.chained.verify_server_cert(
            end_entity,
            intermediates,
            server_name,
            ocsp_response,
            now,
        );
        match chained {
            // The very certificate the operator handed over: nothing to chain.
            Err(_)
                if self
                    .trusted
                    .iter()
                    .any(|c| c.as_ref() == end_entity.as_ref()) =>
            {
                Ok(ServerCertVerified::assertion())
            }
            chained => chained,
        }
    }

    // The handshake's signatures are checked as always, with the certificate's key.
    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.chained.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.chained.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.chained.supported_verify_schemes()
    }
}

/// One HTTP/1.1 exchange on `io`.
async fn exchange<IO>(
    io: IO,
    request: Request<Full<Bytes>>,
) -> hyper::Result<http::Response<Incoming>>
where
    IO: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let (mut sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(io)).await?;
    tokio::spawn(connection);
    sender.send_request(request).await
}
