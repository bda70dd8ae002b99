//! A real `wedge serve --config` with the admin API on, for tests that read what the
//! host counted: `GET /metrics`, parsed by the strict reader the registry's own unit
//! tests use.

use std::path::PathBuf;
use std::time::{Duration, Instant};

#[path = "../../runtime/src/metrics/parse_text.rs"]
pub mod parse_text;

use crate::{Server, curl, temp_dir};
use parse_text::{Samples, parse};

/// The admin API's bearer token.
pub const TOKEN: &str = "admin-support-token-0123456789";

/// A server with its data directory (its development certificate is there) and
/// its admin API.
pub struct Admin {
    pub server: Server,
    pub data_dir: PathBuf,
    pub admin_url: String,
}

impl Admin {
    /// Serves `apps` (wedge.toml `[[app]]` tables) on cleartext and TLS (and HTTP/3)
    /// with the admin API, the flags `args`, and `WEDGE_LOG=log`.
    pub fn start(apps: &str, args: &[&str], log: &str) -> Admin {
        let dir = temp_dir("admin-support");
        std::fs::write(dir.join("token"), TOKEN).unwrap();
        let config = format!(
            "listen = \"127.0.0.1:0\"\ntls_listen = \"127.0.0.1:0\"\n\
             admin = \"127.0.0.1:0\"\nadmin_token_file = \"token\"\n\n{apps}"
        );
        std::fs::write(dir.join("wedge.toml"), config).unwrap();
        let data_dir = temp_dir("data");
        let data = data_dir.display().to_string();
        let args = [&["--data-dir", &data][..], args].concat();
        let server = Server::start_config_logging(&dir.join("wedge.toml"), &args, log);
        let admin_url = server.admin_url();
        Admin {
            server,
            data_dir,
            admin_url,
        }
    }

    /// What `GET /metrics` says now.
    pub fn scrape(&self) -> Samples {
        scrape(&self.admin_url, TOKEN)
    }

    /// Scrapes until `ready` holds for the samples (bounded); returns them.
    pub fn scrape_until(&self, what: &str, ready: impl Fn(&Samples) -> bool) -> Samples {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let samples = self.scrape();
            if ready(&samples) {
                return samples;
            }
            assert!(Instant::now() < deadline, "never saw {what}: {samples:?}");
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

/// What `GET /metrics` on the admin API at `admin_url` says now.
pub fn scrape(admin_url: &str, token: &str) -> Samples {
    let auth = format!("Authorization: Bearer {token}");
    let out = curl(&["--fail", "-H", &auth, &format!("{admin_url}/metrics")]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    parse(&String::from_utf8(out.stdout).unwrap())
}
