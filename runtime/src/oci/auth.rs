//! Registry credentials: `$WEDGE_REGISTRY_USER` and `$WEDGE_REGISTRY_PASSWORD` (for
//! every registry), else the registry's entry in a Docker-style config file
//! (`$DOCKER_CONFIG/config.json`, else `~/.docker/config.json`: `auths` with `auth`
//! (base64 `user:password`) or `username` and `password`), else anonymous. Credential
//! helpers (`credsStore`, `credHelpers`) are not run.

use std::path::PathBuf;

use anyhow::{Result, anyhow, bail};
use base64::Engine as _;

/// The user for every registry (with [`PASSWORD_ENV`]).
pub const USER_ENV: &str = "WEDGE_REGISTRY_USER";
/// The password or token for every registry (with [`USER_ENV`]).
pub const PASSWORD_ENV: &str = "WEDGE_REGISTRY_PASSWORD";

/// A user name and password, or none (anonymous).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Credentials {
    Anonymous,
    Basic { user: String, password: String },
}

/// The credentials for `registry` (`host[:port]`) from the environment or the
/// Docker config file; errors name the variable or file at fault.
pub fn credentials(registry: &str) -> Result<Credentials> {
    let user = std::env::var(USER_ENV).ok().filter(|v| !v.is_empty());
    let password = std::env::var(PASSWORD_ENV).ok().filter(|v| !v.is_empty());
    match (user, password) {
        (Some(user), Some(password)) => return Ok(Credentials::Basic { user, password }),
        (None, None) => {}
        _ => bail!("set both {USER_ENV} and {PASSWORD_ENV}, or neither"),
    }
    let Some(path) = docker_config_path() else {
        return Ok(Credentials::Anonymous);
    };
    let text = match std::fs::read_to_string(&path) {
        Ok(text) => text,
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => {
            return Ok(Credentials::Anonymous);
        }
        Err(err) => bail!("cannot read {}: {err}", path.display()),
    };
    from_docker_config(&text, registry).map_err(|why| anyhow!("{}: {why}", path.display()))
}

/// `$DOCKER_CONFIG/config.json`, else `~/.docker/config.json`.
fn docker_config_path() -> Option<PathBuf> {
    if let Some(dir) = std::env::var_os("DOCKER_CONFIG").filter(|d| !d.is_empty()) {
        return Some(PathBuf::from(dir).join("config.json"));
    }
    let home = std::env::var_os("HOME").filter(|d| !d.is_empty())?;
    Some(PathBuf::from(home).join(".docker/config.json"))
}

/// The credentials a Docker config file (`text`) holds for `registry`.
fn from_docker_config(text: &str, registry: &str) -> Result<Credentials, String> {
    let config: serde_json::Value =
        serde_json::from_str(text).map_err(|err| format!("not JSON: {err}"))?;
    let Some(auths) = config.get("auths").and_then(|a| a.as_object()) else {
        return Ok(Credentials::Anonymous);
    };
    let wanted = canonical(registry);
    let Some((key, entry)) = auths.iter().find(|(key, _)| canonical(key) == wanted) else {
        return Ok(Credentials::Anonymous);
    };
    let field = |name: &str| {
        entry
            .get(name)
            .and_then(|v| v.as_str())
            .filter(|v| !v.is_empty())
    };
    if let Some(encoded) = field("auth") {
        let decoded = base64::engine::general_purpose::STANDARD
            .decode(encoded)
            .ok()
            .and_then(|bytes| String::from_utf8(bytes).ok())
            .ok_or_else(|| format!("auths.\"{key}\".auth is not base64 of `user:password`"))?;
        let (user, password) = decoded
            .split_once(':')
            .ok_or_else(|| format!("auths.\"{key}\".auth is not base64 of `user:password`"))?;
        return Ok(Credentials::Basic {
            user: user.to_string(),
            password: password.to_string(),
        });
    }
    match (field("username"), field("password")) {
        (Some(user), Some(password)) => Ok(Credentials::Basic {
            user: user.to_string(),
            password: password.to_string(),
        }),
        _ => Ok(Credentials::Anonymous),
    }
}

/// A registry as `auths` keys may write it (`https://host/v1/`, `host`), reduced to
/// `host[:port]`; Docker Hub's names are one.
fn canonical(key: &str) -> String {
    let key = key
        .strip_prefix("https://")
        .or_else(|| key.strip_prefix("http://"))
        .unwrap_or(key);
    let host = key.split('/').next().unwrap_or(key).to_ascii_lowercase();
    match host.as_str() {
        "index.docker.io" | "registry-1.docker.io" => "docker.io".to_string(),
        _ => host,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn basic(user: &str, password: &str) -> Credentials {
        Credentials::Basic {
            user: user.into(),
            password: password.into(),
        }
    }

    #[test]
    fn reads_the_registrys_entry() {
        // base64("alice:s3cr:et") — a password may hold a colon.
        let config = r#"{"auths": {
            "https://registry.example.com/v1/": {"auth": "YWxpY2U6czNjcjpldA=="},
            "localhost:5000": {"username": "bob", "password": "pw"},
            "https://index.docker.io/v1/": {"auth": "aHViOmh1Yg=="}
        }}"#;
        let read = |registry| from_docker_config(config, registry).unwrap();
        assert_eq!(read("registry.example.com"), basic("alice", "s3cr:et"));
        assert_eq!(read("localhost:5000"), basic("bob", "pw"));
        assert_eq!(read("docker.io"), basic("hub", "hub"));
        assert_eq!(read("localhost:5001"), Credentials::Anonymous);
        assert_eq!(read("example.com"), Credentials::Anonymous);
    }

    #[test]
    fn no_auths_or_a_helper_only_is_anonymous() {
        for config in [
            r#"{}"#,
            r#"{"credsStore": "desktop"}"#,
            r#"{"auths": {"r": {}}}"#,
        ] {
            assert_eq!(from_docker_config(config, "r"), Ok(Credentials::Anonymous));
        }
    }

    #[test]
    fn a_broken_file_is_an_error_saying_where() {
        let err = from_docker_config("{", "r").unwrap_err();
        assert!(err.contains("not JSON"), "{err}");
        let err = from_docker_config(r#"{"auths": {"r": {"auth": "!!"}}}"#, "r").unwrap_err();
        assert!(err.contains("auths.\"r\".auth"), "{err}");
        // base64("nocolon")
        let err =
            from_docker_config(r#"{"auths": {"r": {"auth": "bm9jb2xvbg=="}}}"#, "r").unwrap_err();
        assert!(err.contains("user:password"), "{err}");
    }
}
