//! `wedge deploy NAME COMPONENT --admin URL`: deploys or replaces an app on a
//! running wedge through its admin API (`PUT /apps/NAME`).

use std::path::PathBuf;

use anyhow::{Context, Result, anyhow, bail};
use bytes::Bytes;
use clap::Args;
use http::{Request, StatusCode, header};
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;

use crate::admin::{self, upload};

#[derive(Args)]
pub struct DeployArgs {
    /// The app's name: lowercase letters, digits, `-` and `_`, starting with a letter.
    name: String,

    /// The component (.wasm), or an `oci://REGISTRY/REPOSITORY:TAG` (or
    /// `@sha256:…`) reference the server pulls.
    component: PathBuf,

    /// The admin API, e.g. http://127.0.0.1:9000.
    #[arg(long, value_name = "URL")]
    admin: String,

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
    let uri: http::Uri = url.parse().map_err(|_| anyhow!("`{url}` is not a URL"))?;
    if uri.scheme_str() != Some("http") {
        bail!("--admin must be an http:// URL, not `{}`", args.admin);
    }
    let (content_type, body) = upload::form(component.as_deref(), &config);
    let request = Request::put(uri)
        .header(header::AUTHORIZATION, format!("Bearer {token}"))
        .header(header::CONTENT_TYPE, content_type)
        .body(Full::new(body))
        .context("building the request")?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    let (status, body) = runtime.block_on(send(request, &args.admin))?;
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

/// Sends `request`; the response's status and body.
async fn send(request: Request<Full<Bytes>>, admin: &str) -> Result<(StatusCode, Bytes)> {
    let client = Client::builder(TokioExecutor::new()).build_http();
    let response = client.request(request).await.map_err(|err| {
        let cause = anyhow::Error::from(err);
        anyhow!(
            "cannot reach the admin API at {admin}: {}",
            cause.root_cause()
        )
    })?;
    let status = response.status();
    let body = response
        .into_body()
        .collect()
        .await
        .with_context(|| format!("reading the admin API's answer from {admin}"))?;
    Ok((status, body.to_bytes()))
}
