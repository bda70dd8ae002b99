//! `wedge deploy NAME COMPONENT --admin URL`: deploys or replaces an app on a
//! running wedge through its admin API (`PUT /apps/NAME`), over http:// or https://.

use std::path::PathBuf;
use std::sync::Arc;

use anyhow::{Context, Result, anyhow, bail};
use bytes::Bytes;
use clap::Args;
use http::{Request, StatusCode, Uri, header};
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
use crate::admin::{self, upload};
use crate::host::outbound_client;

#[derive(Args)]
pub struct DeployArgs {
    /// The app's name: lowercase letters, digits, `-` and `_`, starting with a letter.
    name: String,

    /// The component (.wasm), or an `oci://REGISTRY/REPOSITORY:TAG` (or
    /// `@sha256:…`) reference the server pulls.
    component: PathBuf,

    /// The admin API, e.g. http://127.0.0.1:9000, or https://… if it serves TLS.
    #[arg(long, value_name = "URL")]
    admin: String,

    /// For an https:// admin API: a PEM file of certificate authorities to trust
    /// besides the webpki roots (Mozilla's list), e.g. the admin's self-signed
    /// certificate itself; repeat for more.
    #[arg(long = "admin-ca", value_name = "FILE", value_parser = parse_ca)]
    admin_ca: Vec<CaFile>,

    /// File holding the admin API's bearer token; else $WEDGE_ADMIN_TOKEN.
    #[arg(long, value_name = "FILE")]
    token_file: Option<PathBuf>,

    /// A route for the app (repeatable): `host/path`, `*.domain/path` or `/path`.
    #[arg(long = "route", value_name = "ROUTE", conflicts_with = "config")]
    routes: Vec<String>,

    /// The app's settings: a TOML file with the keys of a wedge.toml `[[app]]`
    /// table but `name` and `component` (routes, outbound, [limits], [env], [config]).
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
}

pub fn run(args: DeployArgs) -> Result<()> {
    // The name goes into the URL as is: `api?x` would deploy `api`.
    crate::config::check_app_name(&args.name).map_err(|reason| anyhow!(reason))?;
    let token = admin::secret(args.token_file.as_deref())?;
    let reference = args
        .component
        .to_str()
        .filter(|text| text.starts_with(crate::oci::SCHEME))
        .map(|text| crate::oci::Reference::parse(text).map_err(|why| anyhow!(why)))
        .transpose()?;
    let component = match &reference {
        Some(_) => None,
        None => Some(
            std::fs::read(&args.component)
                .with_context(|| format!("cannot read {}", args.component.display()))?,
        ),
    };
    let mut config = match &args.config {
        Some(path) => std::fs::read_to_string(path)
            .with_context(|| format!("cannot read {}", path.display()))?,
        // A JSON list of strings is also a TOML array of basic strings.
        None if !args.routes.is_empty() => format!("routes = {}\n", serde_json::json!(args.routes)),
        None => String::new(),
    };
    if let Some(reference) = reference {
        // A JSON string is also a TOML basic string.
        config.insert_str(
            0,
            &format!("component = {}\n", serde_json::json!(reference.to_string())),
        );
    }
    let url = format!("{}/apps/{}", args.admin.trim_end_matches('/'), args.name);
    let uri: Uri = url.parse().map_err(|_| anyhow!("`{url}` is not a URL"))?;
    let tls = match uri.scheme_str() {
        Some("https") => Some(Arc::new(admin_tls(&args.admin_ca)?)),
        Some("http") if !args.admin_ca.is_empty() => {
            bail!(
                "--admin-ca is for an https:// admin API, not `{}`",
                args.admin
            )
        }
        Some("http") => None,
        _ => bail!(
            "--admin must be an http:// or https:// URL, not `{}`",
            args.admin
        ),
    };
    let (content_type, body) = upload::form(component.as_deref(), &config);
    let authority = uri
        .authority()
        .ok_or_else(|| anyhow!("`{url}` has no host"))?
        .clone();
    let path = uri.path_and_query().map_or("/", |p| p.as_str()).to_string();
    let request = Request::put(path)
        .header(header::HOST, authority.as_str())
        .header(header::AUTHORIZATION, format!("Bearer {token}"))
        .header(header::CONTENT_TYPE, content_type)
        .body(Full::new(body))
        .context("building the request")?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    let (status, body) = runtime.block_on(send(request, &uri, tls, &args.admin))?;
    let reason = String::from_utf8_lossy(&body);
    let reason = reason.trim().lines().collect::<Vec<_>>().join("; ");
    match status {
        StatusCode::OK | StatusCode::CREATED => {
            let answer: serde_json::Value = serde_json::from_slice(&body).unwrap_or_default();
            let digest = answer["digest"].as_str().unwrap_or("?");
            let verb = if status == StatusCode::CREATED {
                "deployed"
            } else {
                "replaced"
            };
            println!("{verb} `{}` (sha256 {digest})", args.name);
            Ok(())
        }
        StatusCode::UNAUTHORIZED => {
            bail!("the admin API at {} refused the token (401)", args.admin)
        }
        status => bail!("deploying `{}` failed ({status}): {reason}", args.name),
    }
}

/// Sends `request` to `uri`'s host over one connection, in TLS with `tls`; the
/// response's status and body.
async fn send(
    request: Request<Full<Bytes>>,
    uri: &Uri,
    tls: Option<Arc<rustls::ClientConfig>>,
    admin: &str,
) -> Result<(StatusCode, Bytes)> {
    let unreachable =
        |err: &dyn std::fmt::Display| anyhow!("cannot reach the admin API at {admin}: {err}");
    let host = uri.host().unwrap_or_default();
    let host = host
        .strip_prefix('[')
        .and_then(|h| h.strip_suffix(']'))
        .unwrap_or(host);
    let port = uri
        .port_u16()
        .unwrap_or(if tls.is_some() { 443 } else { 80 });
    let tcp = TcpStream::connect((host, port))
        .await
        .map_err(|err| unreachable(&err))?;
    let response = match tls {
        None => exchange(tcp, request).await,
        Some(config) => {
            let name = ServerName::try_from(host.to_string())
                .map_err(|err| anyhow!("`{host}` is not a TLS server name: {err}"))?;
            let stream = TlsConnector::from(config)
                .connect(name, tcp)
                .await
                .map_err(|err| {
                    anyhow!(
                        "TLS with the admin API at {admin} failed: {err} (a certificate no \
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
        .with_context(|| format!("reading the admin API's answer from {admin}"))?;
    Ok((status, body.to_bytes()))
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
