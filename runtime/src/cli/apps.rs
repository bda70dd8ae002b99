//! `wedge apps` (`GET /apps`) and `wedge rm NAME` (`DELETE /apps/NAME`) against a
//! running wedge's admin API.

use anyhow::{Result, anyhow, bail};
use clap::Args;
use http::{Method, StatusCode};

use super::admin_client::{AdminClientArgs, reason};

#[derive(Args)]
pub struct AppsArgs {
    #[command(flatten)]
    admin: AdminClientArgs,

    /// Print the admin API's answer as it is (JSON, digests in full).
    #[arg(long)]
    json: bool,
}

#[derive(Args)]
pub struct RmArgs {
    /// The deployed app to remove (apps of the config file are the file's).
    name: String,

    /// Remove the app's key-value data too (without it, the data stays for a later
    /// deploy of the same name).
    #[arg(long)]
    purge: bool,

    #[command(flatten)]
    admin: AdminClientArgs,
}

/// Hex digits of a digest the table shows, as `docker images` does.
const SHORT_DIGEST: usize = 12;

pub fn list(args: AppsArgs) -> Result<()> {
    let (status, body) = args.admin.client()?.send(Method::GET, "/apps", None)?;
    if status != StatusCode::OK {
        bail!("listing the apps failed ({status}): {}", reason(&body));
    }
    if args.json {
        print!("{}", String::from_utf8_lossy(&body));
        return Ok(());
    }
    let apps: Vec<serde_json::Value> = serde_json::from_slice(&body)
        .map_err(|err| anyhow!("the admin API's list of apps is not JSON: {err}"))?;
    print!("{}", table(&apps));
    Ok(())
}

/// One line per app, in columns: name, where it comes from, status, digest, routes.
fn table(apps: &[serde_json::Value]) -> String {
    let mut rows = vec![[
        "NAME".to_string(),
        "SOURCE".to_string(),
        "STATUS".to_string(),
        "DIGEST".to_string(),
        "ROUTES".to_string(),
    ]];
    for app in apps {
        let text = |key: &str| app[key].as_str().unwrap_or("-").to_string();
        let source = if app["deployed"] == true {
            "deployed"
        } else {
            "config"
        };
        let mut status = text("status");
        let (running, waiting) = (&app["running"], &app["waiting"]);
        if running.as_u64().unwrap_or(0) > 0 || waiting.as_u64().unwrap_or(0) > 0 {
            status.push_str(&format!(" ({running} running, {waiting} waiting)"));
        }
        let mut digest = text("digest");
        digest.truncate(SHORT_DIGEST);
        let routes: Vec<&str> = app["routes"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|route| route.as_str())
            .collect();
        let routes = match routes.is_empty() {
            true => "(none)".to_string(),
            false => routes.join(" "),
        };
        rows.push([text("name"), source.to_string(), status, digest, routes]);
    }
    let widths: Vec<usize> = (0..4)
        .map(|column| rows.iter().map(|row| row[column].len()).max().unwrap_or(0))
        .collect();
    let mut out = String::new();
    for row in rows {
        for (cell, width) in row.iter().zip(&widths) {
            out.push_str(&format!("{cell:width$}  "));
        }
        out.push_str(&row[4]);
        out.push('\n');
    }
    out
}

pub fn remove(args: RmArgs) -> Result<()> {
    // The name goes into the URL as is: `api?x` would remove `api`.
    crate::config::check_app_name(&args.name).map_err(|reason| anyhow!(reason))?;
    let query = if args.purge { "?purge=true" } else { "" };
    let path = format!("/apps/{}{query}", args.name);
    let (status, body) = args.admin.client()?.send(Method::DELETE, &path, None)?;
    match status {
        StatusCode::NO_CONTENT | StatusCode::OK => {
            let purged = if args.purge {
                " and its key-value data"
            } else {
                ""
            };
            println!("removed `{}`{purged}", args.name);
            Ok(())
        }
        status => bail!(
            "removing `{}` failed ({status}): {}",
            args.name,
            reason(&body)
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_lines_up_its_columns() {
        let apps = serde_json::json!([
            {"name": "configured", "status": "serving", "digest": "4075b9aa29af9ea6427a",
             "routes": ["/configured"], "deployed": false, "running": 0, "waiting": 0},
            {"name": "hi", "status": "serving", "digest": "ab12", "routes": ["/hi", "x.example/"],
             "deployed": true, "running": 2, "waiting": 1},
            {"name": "lost", "status": "not restored", "digest": null, "routes": [],
             "deployed": true, "running": 0, "waiting": 0},
        ]);
        let table = table(apps.as_array().unwrap());
        let expected = "\
NAME        SOURCE    STATUS                          DIGEST        ROUTES
configured  config    serving                         4075b9aa29af  /configured
hi          deployed  serving (2 running, 1 waiting)  ab12          /hi x.example/
lost        deployed  not restored                    -             (none)
";
        assert_eq!(table, expected);
    }
}
