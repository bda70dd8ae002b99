//! `wedge deploy NAME COMPONENT --admin ADDR`: deploys or replaces an app on a
//! running wedge through its admin API (`PUT /apps/NAME`), over http:// or https://.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, anyhow, bail};
use clap::Args;
use http::{Method, StatusCode};

use super::admin_client::{AdminClientArgs, reason};
use crate::admin::upload::{self, File};
use crate::tenancy::Route;

#[derive(Args)]
pub struct DeployArgs {
    /// The app's name: lowercase letters, digits, `-` and `_`, starting with a letter.
    name: String,

    /// The component (.wasm), or an `oci://REGISTRY/REPOSITORY:TAG` (or
    /// `@sha256:…`) reference the server pulls.
    component: PathBuf,

    #[command(flatten)]
    admin: AdminClientArgs,

    /// A route for the app (repeatable): `host/path`, `*.domain/path` or `/path`.
    #[arg(long = "route", value_name = "ROUTE", value_parser = parse_route,
          conflicts_with = "config")]
    routes: Vec<String>,

    /// The app's settings: a TOML file with the keys of a wedge.toml `[[app]]`
    /// table but `name` and `component` (routes, outbound, executor, [limits], [env],
    /// [config], [keyvalue]).
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,

    /// Deploy the app with no route (no request reaches it until it is deployed
    /// again with one); without it, a deploy that gives the app no route is refused.
    #[arg(long, conflicts_with = "routes")]
    no_route: bool,
}

/// A route as wedge.toml takes it, checked before anything is sent.
fn parse_route(text: &str) -> Result<String, String> {
    text.parse::<Route>().map(|_| text.to_string())
}

pub fn run(args: DeployArgs) -> Result<()> {
    // The name goes into the URL as is: `api?x` would deploy `api`.
    crate::config::check_app_name(&args.name).map_err(|reason| anyhow!(reason))?;
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
    let (settings_file, mut config) = match &args.config {
        Some(path) => {
            let text = std::fs::read_to_string(path)
                .with_context(|| format!("cannot read {}", path.display()))?;
            check_settings(&args, path, &text)?;
            (path.display().to_string(), text)
        }
        None if args.routes.is_empty() && !args.no_route => bail!(
            "`{name}` would get no route, so no request would reach it: give it one with \
             --route (e.g. --route /{name}) or `routes` in a --config FILE, or deploy it \
             unrouted with --no-route",
            name = args.name
        ),
        // A JSON list of strings is also a TOML array of basic strings.
        None => (
            "--route".to_string(),
            format!("routes = {}\n", serde_json::json!(args.routes)),
        ),
    };
    if let Some(reference) = reference {
        // A JSON string is also a TOML basic string.
        config.insert_str(
            0,
            &format!("component = {}\n", serde_json::json!(reference.to_string())),
        );
    }
    let client = args.admin.client()?;
    // The parts carry the user's file names: the server's errors name them.
    let component_file = args.component.display().to_string();
    let component = component.as_deref().map(|bytes| File {
        name: &component_file,
        bytes,
    });
    let config = File {
        name: &settings_file,
        bytes: config.as_bytes(),
    };
    let body = upload::form(component, config);
    let path = format!("/apps/{}", args.name);
    let (status, body) = client.send(Method::PUT, &path, Some(body))?;
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
        status => bail!(
            "deploying `{}` failed ({status}): {}",
            args.name,
            reason(&body)
        ),
    }
}

/// Checks the settings file `path` (its `text`) here, where its problems can be
/// named by its own lines: the keys the server would refuse, and a deploy that
/// gives the app no route without `--no-route`.
fn check_settings(args: &DeployArgs, path: &Path, text: &str) -> Result<()> {
    // The settings are checked alone, as for an uploaded file: an oci:// component
    // is added to them when they are sent, and does not change what they say.
    let entry = crate::config::parse_app(
        text,
        &path.display().to_string(),
        &args.name,
        Some(args.component.clone()),
    )?;
    match (entry.routes.is_empty(), args.no_route) {
        (true, false) => bail!(
            "{} gives `{name}` no route, so no request would reach it: add one (e.g. \
             `routes = [\"/{name}\"]`), or deploy it unrouted with --no-route",
            path.display(),
            name = args.name
        ),
        (false, true) => bail!(
            "--no-route, but {} gives `{}` routes: drop one or the other",
            path.display(),
            args.name
        ),
        _ => Ok(()),
    }
}
