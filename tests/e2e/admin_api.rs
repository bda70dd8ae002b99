//! The admin API (`admin = ADDR` in wedge.toml): bearer-token auth, deploying,
//! replacing (under load) and removing apps, what survives a restart, what is
//! refused with 400, and `wedge deploy`.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use support::{Server, curl, example, temp_dir, wedge};

const TOKEN: &str = "test-token-0123456789";

/// A wedge with an admin API and one configured app (`hello` on `/configured`),
/// its data in `data_dir`.
struct Admin {
    server: Server,
    /// `http://127.0.0.1:PORT` (`https://` with TLS)
    url: String,
    dir: PathBuf,
    /// With TLS: the admin API's (self-signed) certificate, for curl's `--cacert`.
    cert: Option<String>,
}

/// Where the admin API is turned on.
#[derive(Clone, Copy, PartialEq)]
enum Set {
    /// `admin` and `admin_token_file` in wedge.toml.
    InConfig,
    /// `--admin` and `--admin-token-file`.
    ByFlags,
}

impl Admin {
    fn start(data_dir: &Path, args: &[&str]) -> Admin {
        Self::start_with(data_dir, Set::InConfig, args)
    }

    fn start_with(data_dir: &Path, set: Set, args: &[&str]) -> Admin {
        Self::start_on(data_dir, set, "127.0.0.1:0", false, args)
    }

    /// On `address`, over TLS with a certificate of its own if `tls`.
    fn start_on(data_dir: &Path, set: Set, address: &str, tls: bool, args: &[&str]) -> Admin {
        let dir = temp_dir("admin");
        std::fs::write(dir.join("token"), format!("{TOKEN}\n")).unwrap();
        let cert = tls.then(|| self_signed(&dir));
        let admin_keys = match (set, &cert) {
            (Set::InConfig, None) => {
                format!("admin = \"{address}\"\nadmin_token_file = \"token\"\n")
            }
            // Relative to the config's directory.
            (Set::InConfig, Some(_)) => format!(
                "admin = \"{address}\"\nadmin_token_file = \"token\"\n\
                 admin_tls_cert = \"admin-cert.pem\"\nadmin_tls_key = \"admin-key.pem\"\n"
            ),
            (Set::ByFlags, _) => String::new(),
        };
        let config = format!(
            "listen = \"127.0.0.1:0\"\n{admin_keys}\n\
             [[app]]\nname = \"configured\"\ncomponent = \"{}\"\nroutes = [\"/configured\"]\n",
            example("hello").display()
        );
        std::fs::write(dir.join("wedge.toml"), config).unwrap();
        let data = data_dir.display().to_string();
        let token = dir.join("token").display().to_string();
        let mut all = vec!["--data-dir", data.as_str()];
        if set == Set::ByFlags {
            all.extend(["--admin", address, "--admin-token-file", &token]);
        }
        let pem = cert.as_ref().map(|(cert, key)| {
            let path = |p: &PathBuf| p.display().to_string();
            (path(cert), path(key))
        });
        if let (Set::ByFlags, Some((cert, key))) = (set, &pem) {
            all.extend(["--admin-tls-cert", cert, "--admin-tls-key", key]);
        }
        all.extend_from_slice(args);
        let server = Server::start_config(&dir.join("wedge.toml"), &all);
        // An unspecified address is reached on loopback.
        let url = server.admin_url().replace("0.0.0.0", "127.0.0.1");
        Admin {
            server,
            url,
            dir,
            cert: pem.map(|(cert, _)| cert),
        }
    }

    /// `curl` against the admin API with `token` (none: no Authorization);
    /// the status and body.
    fn request(&self, token: Option<&str>, args: &[&str], path: &str) -> (u16, String) {
        let auth = token.map(|t| format!("Authorization: Bearer {t}"));
        let mut all: Vec<&str> = vec!["--write-out", "\n%{http_code}"];
        if let Some(cert) = &self.cert {
            all.extend(["--cacert", cert.as_str()]);
        }
        if let Some(auth) = &auth {
            all.extend(["--header", auth.as_str()]);
        }
        all.extend_from_slice(args);
        let url = format!("{}{path}", self.url);
        all.push(&url);
        split(&curl(&all).stdout)
    }

    /// `PUT /apps/{name}` of `component` with settings `config` (TOML text).
    fn deploy(&self, name: &str, component: &Path, config: &str) -> (u16, String) {
        let settings = self.dir.join(format!("{name}.toml"));
        std::fs::write(&settings, config).unwrap();
        let component = format!("component=@{}", component.display());
        let config = format!("config=@{}", settings.display());
        let form = ["--request", "PUT", "--form", &component, "--form", &config];
        self.request(Some(TOKEN), &form, &format!("/apps/{name}"))
    }

    /// `GET path` on the apps' listener: status and body.
    fn get(&self, path: &str) -> (u16, String) {
        let url = format!("{}{path}", self.server.url);
        split(&curl(&["--write-out", "\n%{http_code}", &url]).stdout)
    }
}

/// A self-signed certificate for localhost and 127.0.0.1 written to `dir` as
/// `admin-cert.pem` and `admin-key.pem`; their paths. Marked as a CA, as
/// `openssl req -x509` makes one (webpki alone would not take it as a server's).
fn self_signed(dir: &Path) -> (PathBuf, PathBuf) {
    let names = vec!["localhost".to_string(), "127.0.0.1".to_string()];
    let mut params = rcgen::CertificateParams::new(names).unwrap();
    params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    let signing_key = rcgen::KeyPair::generate().unwrap();
    let generated = params.self_signed(&signing_key).unwrap();
    let (cert, key) = (dir.join("admin-cert.pem"), dir.join("admin-key.pem"));
    std::fs::write(&cert, generated.pem()).unwrap();
    std::fs::write(&key, signing_key.serialize_pem()).unwrap();
    (cert, key)
}

fn split(out: &[u8]) -> (u16, String) {
    let text = String::from_utf8_lossy(out);
    let (body, status) = text.rsplit_once('\n').unwrap();
    (status.parse().unwrap_or(0), body.to_string())
}

fn apps(admin: &Admin) -> serde_json::Value {
    let (status, body) = admin.request(Some(TOKEN), &[], "/apps");
    assert_eq!(status, 200, "{body}");
    serde_json::from_str(&body).unwrap()
}

/// App `name` as `GET /apps` lists it.
fn app(admin: &Admin, name: &str) -> serde_json::Value {
    let listed = apps(admin);
    let app = listed
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["name"] == name);
    app.unwrap_or_else(|| panic!("no app {name} in {listed}"))
        .clone()
}

const HELLO: &str = "Hello, world!\n";

#[test]
fn requests_without_the_right_bearer_token_get_401() {
    let admin = Admin::start(&temp_dir("data"), &[]);
    for token in [None, Some("wrong"), Some(&TOKEN[..TOKEN.len() - 1])] {
        let (status, _) = admin.request(token, &[], "/apps");
        assert_eq!(status, 401, "token {token:?}");
    }
    let head = curl(&["--include", &format!("{}/apps", admin.url)]);
    let head = String::from_utf8_lossy(&head.stdout).to_ascii_lowercase();
    assert!(head.contains("www-authenticate: bearer"), "{head}");
    // Nothing was deployed by the refused requests.
    let (status, _) = admin.deploy("x", &example("hello"), "");
    assert_eq!(status, 201);
    let unauthorised = admin.request(None, &["--request", "DELETE"], "/apps/x");
    assert_eq!(unauthorised.0, 401);
    assert_eq!(apps(&admin).as_array().unwrap().len(), 2);
}

#[test]
fn deploy_replace_under_load_and_delete() {
    let admin = Admin::start(&temp_dir("data"), &[]);
    let (status, body) = admin.deploy("hi", &example("hello"), "routes = [\"/hi\"]\n");
    assert_eq!(status, 201, "{body}");
    let answer: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(answer["name"], "hi");
    let first = answer["digest"].as_str().unwrap().to_string();
    assert_eq!(
        first,
        support::sha256(&std::fs::read(example("hello")).unwrap())
    );
    assert_eq!(admin.get("/hi"), (200, HELLO.to_string()));
    let hi = app(&admin, "hi");
    assert_eq!(hi["deployed"], true);
    assert_eq!(hi["routes"], serde_json::json!(["/hi"]));
    assert_eq!(hi["digest"], first.as_str());

    // Replace `hi` (hello → stream, 8 KiB) while a client keeps asking.
    let swapped = Arc::new(AtomicBool::new(false));
    let (before, after) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let url = format!("{}/hi", admin.server.url);
    let client = {
        let (swapped, before, after) = (swapped.clone(), before.clone(), after.clone());
        std::thread::spawn(move || {
            let mut seen = Vec::new();
            let deadline = Instant::now() + Duration::from_secs(120);
            // Until 20 requests were sent after the swap (bounded in count and time).
            while after.load(Ordering::SeqCst) < 20
                && seen.len() < 3000
                && Instant::now() < deadline
            {
                let after_swap = swapped.load(Ordering::SeqCst);
                let (status, body) = split(&curl(&["--write-out", "\n%{http_code}", &url]).stdout);
                seen.push((after_swap, status, body));
                let count = if after_swap { &after } else { &before };
                count.fetch_add(1, Ordering::SeqCst);
            }
            seen
        })
    };
    support::poll_until("requests before the swap", || {
        (before.load(Ordering::SeqCst) >= 5).then_some(())
    });
    let (status, body) = admin.deploy("hi", &example("stream"), "routes = [\"/hi\"]\n");
    assert_eq!(status, 200, "{body}");
    swapped.store(true, Ordering::SeqCst);
    let seen = client.join().unwrap();
    let new_body = |body: &str| body.len() == 8 * 1024;
    for (after_swap, status, body) in &seen {
        assert_eq!(*status, 200, "a request failed across the swap: {body:?}");
        assert!(body == HELLO || new_body(body), "neither version: {body:?}");
        if *after_swap {
            assert!(new_body(body), "the old version answered after the swap");
        }
    }
    assert!(
        seen.iter().any(|(_, _, body)| body == HELLO),
        "no request before the swap"
    );
    assert!(
        seen.iter().any(|(after, _, _)| *after),
        "no request after the swap"
    );

    let (status, _) = admin.request(Some(TOKEN), &["--request", "DELETE"], "/apps/hi");
    assert_eq!(status, 204);
    assert_eq!(admin.get("/hi").0, 404);
    let (status, _) = admin.request(Some(TOKEN), &["--request", "DELETE"], "/apps/hi");
    assert_eq!(status, 404);
    // The configured app is not the admin API's to remove.
    let (status, _) = admin.request(Some(TOKEN), &["--request", "DELETE"], "/apps/configured");
    assert_eq!(status, 404);
    assert_eq!(admin.get("/configured"), (200, HELLO.to_string()));
}

/// Hostile-tenant review (stop 40): a replaced or removed app version kept its idle
/// WASI 0.3 instances for all of `instance_idle`. A version with other admission
/// limits has places of its own, so an app redeployed now and then held more
/// instances than its `max_concurrent`, and filled the host's pool: other apps got
/// `503`. A retired version's idle instances now go at once.
#[test]
fn a_replaced_or_removed_versions_idle_instances_go_at_once() {
    let admin = Admin::start(&temp_dir("data"), &[]);
    let running = || {
        support::admin::scrape(&admin.url, TOKEN).get("wedge_instances_running", &[("app", "p3")])
    };
    let idle_for_long = "routes = [\"/p3\"]\n[limits]\ninstance_idle = \"10m\"\n";
    let (status, body) = admin.deploy("p3", &example("p3_probe"), idle_for_long);
    assert_eq!(status, 201, "{body}");
    assert_eq!(admin.get("/p3/count"), (200, "served 1\n".to_string()));
    assert_eq!(running(), 1.0, "the first version's instance waits, idle");

    // Replaced by a version with other admission limits (places of its own).
    let limits = format!("{idle_for_long}max_concurrent = 3\n");
    let (status, body) = admin.deploy("p3", &example("p3_probe"), &limits);
    assert_eq!(status, 200, "{body}");
    support::poll_until("the replaced version's idle instance gone", || {
        (running() == 0.0).then_some(())
    });
    assert_eq!(admin.get("/p3/count"), (200, "served 1\n".to_string()));
    assert_eq!(running(), 1.0);

    let (status, _) = admin.request(Some(TOKEN), &["--request", "DELETE"], "/apps/p3");
    assert_eq!(status, 204);
    support::poll_until("the removed app's idle instance gone", || {
        (running() == 0.0).then_some(())
    });
}

/// Hostile-tenant review (stop 40): a version with other admission limits got slots
/// and places of its own, so each redeploy that changed a limit let the app run and
/// keep up to `max_concurrent` more instances while the old ones lingered: at
/// `max_concurrent = 2`, 4 of a `--max-instances 6` pool, and another app got `503`
/// until their wall time. The versions now share them, resized to the new limit.
#[test]
fn a_version_with_other_limits_shares_its_apps_instance_places() {
    one_place_across(|_| {});
}

/// The same across a removal: an app deployed again under the name of one removed
/// while its instances still lingered had places of its own beside theirs.
#[test]
fn an_app_deployed_again_after_its_removal_shares_its_instance_places() {
    one_place_across(|admin| {
        let (status, _) = admin.request(Some(TOKEN), &["--request", "DELETE"], "/apps/p3");
        assert_eq!(status, 204);
    });
}

/// An app with `max_concurrent = 1` whose first version's instance lingers; then
/// `between`, and a second version with another `queue_timeout`, whose first request
/// needs an instance: it waits for the app's one place, and the app never holds two.
fn one_place_across(between: impl Fn(&Admin)) {
    let admin = Admin::start(&temp_dir("data"), &[]);
    let running = || {
        support::admin::scrape(&admin.url, TOKEN).get("wedge_instances_running", &[("app", "p3")])
    };
    let limits = |queue_timeout: &str| {
        format!(
            "routes = [\"/p3\"]\n[limits]\nmax_concurrent = 1\nwall_time = \"30s\"\n\
             queue_timeout = \"{queue_timeout}\"\n"
        )
    };
    let (status, body) = admin.deploy("p3", &example("p3_probe"), &limits("5s"));
    assert_eq!(status, 201, "{body}");
    // Answered at once; its instance lives on (busy, not idle) for 20 s more.
    let lingering = (200, "lingering 20000\n".to_string());
    assert_eq!(admin.get("/p3/linger?ms=20000"), lingering);
    between(&admin);
    let (status, body) = admin.deploy("p3", &example("p3_probe"), &limits("6s"));
    assert!(status == 200 || status == 201, "{status}: {body}");
    assert_eq!(running(), 1.0, "the first version's instance lingers still");
    let most = std::thread::scope(|scope| {
        let counted = scope.spawn(|| admin.get("/p3/count"));
        let mut most: f64 = 0.0;
        for _ in 0..3000 {
            most = most.max(running());
            if counted.is_finished() {
                break;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        assert_eq!(counted.join().unwrap(), (200, "served 1\n".to_string()));
        // Its instance now waits, idle, for a second (`instance_idle`).
        most.max(running())
    });
    assert_eq!(
        most, 1.0,
        "the two versions held more instances than the app's one"
    );
}

/// A version that raises `max_concurrent` gets the new slots once it serves
/// (`Loaded::commit_limits` resizes the slots its app's versions share): with the
/// first version's one slot held by a sleeping request, the second version's
/// request is served, not refused after its queue timeout.
#[test]
fn a_version_with_a_larger_max_concurrent_has_its_slots_once_it_serves() {
    let admin = Admin::start(&temp_dir("data"), &[]);
    let limits = |most: u32| {
        format!(
            "routes = [\"/sleep\"]\n[limits]\nmax_concurrent = {most}\n\
             queue_timeout = \"1s\"\nwall_time = \"60s\"\n"
        )
    };
    let (status, body) = admin.deploy("slow", &example("faults"), &limits(1));
    assert_eq!(status, 201, "{body}");
    std::thread::scope(|scope| {
        let held = scope.spawn(|| admin.get("/sleep?ms=20000"));
        admin.server.wait_for_log("sleeping 20000 ms");
        let (status, body) = admin.deploy("slow", &example("faults"), &limits(2));
        assert!(status == 200 || status == 201, "{status}: {body}");
        assert_eq!(admin.get("/sleep?ms=0"), (200, "slept 0\n".to_string()));
        assert!(
            !held.is_finished(),
            "the first request no longer held its slot: the test proved nothing"
        );
        assert_eq!(held.join().unwrap(), (200, "slept 20000\n".to_string()));
    });
}

/// A `wasm32-wasip1` module that embeds the wasi:http world deploys like a
/// component: made one as the deploy loads it (see tests/e2e/core_modules.rs).
#[test]
fn a_wasip1_module_deploys_as_a_component() {
    let admin = Admin::start(&temp_dir("data"), &[]);
    let module = example("wasip1_handler");
    let (status, body) = admin.deploy("module", &module, "routes = [\"/module\"]\n");
    assert_eq!(status, 201, "{body}");
    let answer: serde_json::Value = serde_json::from_str(&body).unwrap();
    // The digest is the module's own: what was deployed.
    assert_eq!(
        answer["digest"],
        support::sha256(&std::fs::read(&module).unwrap())
    );
    let hello = "Hello from a wasm32-wasip1 module!\n".to_string();
    assert_eq!(admin.get("/module"), (200, hello));
    admin
        .server
        .wait_for_log("compiled app `module` (a wasm module, componentized");
}

#[test]
fn what_does_not_load_gets_400_and_the_old_version_keeps_serving() {
    let admin = Admin::start(&temp_dir("data"), &[]);
    let routes = "routes = [\"/hi\"]\n";
    assert_eq!(admin.deploy("hi", &example("hello"), routes).0, 201);
    let digest = |admin: &Admin| app(admin, "hi")["digest"].clone();
    let before = digest(&admin);

    let text = admin.dir.join("text.wasm");
    std::fs::write(&text, "not a component\n").unwrap();
    // The smallest core module: a module, not a component.
    let core = admin.dir.join("core.wasm");
    std::fs::write(&core, b"\0asm\x01\0\0\0").unwrap();
    let refused = [
        (text.as_path(), routes, "hi"),
        (core.as_path(), routes, "hi"),
        (
            &example("stream"),
            "routes = [\"/hi\"]\nmemroy = 1\n",
            "unknown key `memroy`",
        ),
        (
            &example("stream"),
            "routes = [\"/configured\"]\n",
            "/configured",
        ),
    ];
    for (component, config, reason) in refused {
        let (status, body) = admin.deploy("hi", component, config);
        assert_eq!(status, 400, "{component:?} {config:?}: {body}");
        assert!(body.contains(reason), "{reason:?} not in {body:?}");
        assert_eq!(admin.get("/hi"), (200, HELLO.to_string()));
        assert_eq!(digest(&admin), before);
    }
    let (status, body) = admin.deploy("Bad.Name", &example("hello"), "");
    assert_eq!(status, 400);
    assert!(body.contains("is not an app name"), "{body}");
    // A form without a component, whose settings name none either.
    let (status, body) = admin.request(
        Some(TOKEN),
        &[
            "--request",
            "PUT",
            "--form-string",
            "config=routes = [\"/x\"]",
        ],
        "/apps/hi",
    );
    assert_eq!(status, 400);
    assert!(body.contains("no `component` part"), "{body}");
    assert_eq!(admin.get("/hi"), (200, HELLO.to_string()));
}

#[test]
fn deployed_apps_are_back_after_a_restart_and_removed_ones_are_not() {
    let data = temp_dir("data");
    let admin = Admin::start(&data, &[]);
    assert_eq!(
        admin
            .deploy("hi", &example("hello"), "routes = [\"/hi\"]\n")
            .0,
        201
    );
    assert_eq!(
        admin
            .deploy("st", &example("stream"), "routes = [\"/st\"]\n")
            .0,
        201
    );
    drop(admin);

    let admin = Admin::start(&data, &[]);
    assert_eq!(admin.get("/hi"), (200, HELLO.to_string()));
    assert_eq!(admin.get("/st").1.len(), 8 * 1024);
    let (status, _) = admin.request(Some(TOKEN), &["--request", "DELETE"], "/apps/st");
    assert_eq!(status, 204);
    drop(admin);

    let admin = Admin::start(&data, &[]);
    assert_eq!(admin.get("/hi"), (200, HELLO.to_string()));
    assert_eq!(admin.get("/st").0, 404);
    let names: Vec<_> = apps(&admin)
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["name"].clone())
        .collect();
    assert_eq!(names, ["configured", "hi"]);
}

#[test]
fn names_that_are_not_app_names_never_reach_the_data_dir() {
    let data = temp_dir("data");
    let admin = Admin::start(&data, &[]);
    let routes = "routes = [\"/hi\"]\n";
    assert_eq!(admin.deploy("hi", &example("hello"), routes).0, 201);
    // `DELETE /apps/..` would name the data dir itself: with a `current` file
    // there, the store would take it for an app and remove the whole dir.
    std::fs::write(data.join("current"), "keep\n").unwrap();
    for path in ["/apps/..", "/apps/.", "/apps/", "/apps/%2e%2e"] {
        let args = ["--path-as-is", "--request", "DELETE"];
        let (status, body) = admin.request(Some(TOKEN), &args, path);
        assert_eq!(status, 400, "{path}: {body}");
        assert!(body.contains("is not an app name"), "{path}: {body}");
    }
    assert!(data.join("current").is_file());
    assert!(data.join("apps/hi/current").is_file());
    assert_eq!(admin.get("/hi"), (200, HELLO.to_string()));
}

#[test]
fn an_upload_past_admin_max_upload_gets_413() {
    let admin = Admin::start(&temp_dir("data"), &["--admin-max-upload", "4KiB"]);
    let (status, body) = admin.deploy("hi", &example("hello"), "");
    assert_eq!(status, 413, "{body}");
    assert!(body.contains("--admin-max-upload"), "{body}");
    assert_eq!(admin.get("/hi").0, 404);
}

#[test]
fn the_admin_api_does_not_start_without_a_token() {
    let dir = temp_dir("admin");
    let config = dir.join("wedge.toml");
    std::fs::write(
        &config,
        "listen = \"127.0.0.1:0\"\nadmin = \"127.0.0.1:0\"\n",
    )
    .unwrap();
    // Bounded: a wedge that did start is killed at the deadline.
    let path = config.display().to_string();
    let out = wedge(&["serve", "--config", &path], &temp_dir("data"));
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(stderr.contains("the admin API needs a token"), "{stderr}");
}

#[test]
fn the_flags_turn_the_admin_api_on() {
    let admin = Admin::start_with(&temp_dir("data"), Set::ByFlags, &[]);
    assert_eq!(admin.request(Some("wrong"), &[], "/apps").0, 401);
    assert_eq!(
        admin
            .deploy("hi", &example("hello"), "routes = [\"/hi\"]")
            .0,
        201
    );
    assert_eq!(admin.get("/hi"), (200, HELLO.to_string()));
}

/// `wedge serve TARGET` has no admin API: its admin flags are refused, not
/// ignored (clap's `requires = "config_file"` let them through, and wedge
/// served without an admin listener and said nothing).
#[test]
fn admin_flags_without_an_admin_api_are_refused_and_say_what_to_do() {
    let dir = temp_dir("admin-refused");
    std::fs::write(dir.join("token"), format!("{TOKEN}\n")).unwrap();
    let token = dir.join("token").display().to_string();
    let (cert, key) = self_signed(&dir);
    let (cert, key) = (cert.display().to_string(), key.display().to_string());
    let flag_sets: [&[&str]; 4] = [
        &["--admin", "127.0.0.1:0"],
        &["--admin-token-file", &token],
        &["--admin-tls-cert", &cert, "--admin-tls-key", &key],
        &["--admin-max-upload", "1MiB"],
    ];
    for flags in flag_sets {
        let (status, log) = match Server::start_or_exit(&example("hello"), flags) {
            Err(exited) => exited,
            Ok(server) => panic!(
                "`wedge serve hello.wasm {}` was accepted; log:\n{}",
                flags.join(" "),
                server.log()
            ),
        };
        assert_eq!(status.code(), Some(2), "{log}");
        assert_eq!(log.lines().count(), 1, "{log}");
        assert!(
            log.contains(&format!("{} needs --config", flags[0])),
            "{log}"
        );
        assert!(
            log.contains("`wedge serve --config wedge.toml --admin ADDR`"),
            "{log}"
        );
    }

    // With a config that turns no admin API on, the flags for one are refused too.
    let config = dir.join("wedge.toml");
    let app = format!(
        "listen = \"127.0.0.1:0\"\n[[app]]\nname = \"a\"\ncomponent = \"{}\"\n",
        example("hello").display()
    );
    std::fs::write(&config, app).unwrap();
    let config = config.display().to_string();
    for flags in &flag_sets[1..] {
        let args = [&["serve", "--config", &config][..], flags].concat();
        let out = wedge(&args, &temp_dir("data"));
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{flags:?}: {stderr}");
        assert_eq!(stderr.lines().count(), 1, "{stderr}");
        let says = format!("{} is given but the admin API is off", flags[0]);
        assert!(stderr.contains(&says), "{says:?} not in {stderr}");
    }

    // `wedge dev` has no admin API and no admin flags.
    let out = wedge(&["dev", ".", "--admin", "127.0.0.1:0"], &temp_dir("data"));
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("unexpected argument '--admin'"), "{stderr}");
}

const CLEARTEXT_WARNING: &str = "without TLS: off a loopback address its bearer token crosses \
                                 the network in cleartext; give it a certificate with \
                                 --admin-tls-cert/--admin-tls-key";

#[test]
fn an_admin_api_off_loopback_without_tls_is_warned_about_at_start() {
    for set in [Set::InConfig, Set::ByFlags] {
        let admin = Admin::start_on(&temp_dir("data"), set, "0.0.0.0:0", false, &[]);
        let log = admin.server.wait_for_log("admin API on http://0.0.0.0:");
        let port = admin.url.rsplit_once(':').unwrap().1;
        let warning = format!("WARN admin API on 0.0.0.0:{port} {CLEARTEXT_WARNING}");
        assert_eq!(
            log.matches(&warning).count(),
            1,
            "{warning:?} not in\n{log}"
        );
        assert_eq!(admin.request(Some(TOKEN), &[], "/apps").0, 200);
    }
    // On loopback, or with TLS, there is nothing to warn about.
    let local = Admin::start(&temp_dir("data"), &[]);
    let with_tls = Admin::start_on(&temp_dir("data"), Set::InConfig, "0.0.0.0:0", true, &[]);
    for admin in [local, with_tls] {
        assert_eq!(admin.request(Some(TOKEN), &[], "/apps").0, 200);
        let log = admin.server.log();
        assert!(log.contains("admin API on "), "{log}");
        assert!(!log.contains("cleartext"), "{log}");
    }
}

#[test]
fn with_a_certificate_the_admin_api_serves_https_only() {
    for set in [Set::InConfig, Set::ByFlags] {
        let admin = Admin::start_on(&temp_dir("data"), set, "127.0.0.1:0", true, &[]);
        assert!(admin.url.starts_with("https://127.0.0.1:"), "{}", admin.url);
        admin
            .server
            .wait_for_log(&format!("admin API on {}/", admin.url));
        assert_eq!(admin.request(None, &[], "/healthz"), (200, "ok\n".into()));
        assert_eq!(admin.request(Some("wrong"), &[], "/apps").0, 401);
        let (status, body) = admin.deploy("hi", &example("hello"), "routes = [\"/hi\"]\n");
        assert_eq!(status, 201, "{body}");
        assert_eq!(admin.get("/hi"), (200, HELLO.to_string()));
        // Cleartext gets no answer, and a client that does not trust the
        // certificate refuses it.
        let plain = admin.url.replace("https://", "http://");
        let out = curl(&["--max-time", "10", &format!("{plain}/healthz")]);
        assert!(
            !out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stdout)
        );
        let out = curl(&[&format!("{}/healthz", admin.url)]);
        assert_eq!(out.status.code(), Some(60), "curl: {:?}", out.status);
    }
}

#[test]
fn wedge_deploy_reaches_an_https_admin_api_that_admin_ca_vouches_for() {
    let admin = Admin::start_on(&temp_dir("data"), Set::InConfig, "127.0.0.1:0", true, &[]);
    let token = admin.dir.join("token").display().to_string();
    let hello = example("hello").display().to_string();
    let cert = admin.cert.clone().unwrap();
    let deploy = |url: &str, ca: &[&str]| {
        let args = [
            &[
                "deploy",
                "hi",
                &hello,
                "--admin",
                url,
                "--token-file",
                &token,
            ][..],
            &["--route", "/hi"],
            ca,
        ]
        .concat();
        wedge(&args, &temp_dir("cli"))
    };
    let out = deploy(&admin.url, &["--admin-ca", &cert]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.starts_with("deployed `hi` (sha256 "), "{stdout}");
    assert_eq!(admin.get("/hi"), (200, HELLO.to_string()));

    let plain = admin.url.replace("https://", "http://");
    let cases = [
        (
            deploy(&admin.url, &[]),
            "TLS with the admin API at https://",
        ),
        (deploy(&admin.url, &[]), "trust it with --admin-ca FILE"),
        (
            deploy(&plain, &["--admin-ca", &cert]),
            "--admin-ca is for an https:// admin API",
        ),
    ];
    for (out, reason) in cases {
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{stderr}");
        assert_eq!(stderr.lines().count(), 1, "{stderr}");
        assert!(stderr.contains(reason), "{reason:?} not in {stderr:?}");
    }
}

#[test]
fn wedge_deploy_deploys_and_says_why_not() {
    let admin = Admin::start(&temp_dir("data"), &[]);
    let token = admin.dir.join("token").display().to_string();
    let hello = example("hello").display().to_string();
    let data = temp_dir("cli");
    let deploy = |name: &str, component: &str, token: &str, url: &str| {
        wedge(
            &[
                "deploy",
                name,
                component,
                "--admin",
                url,
                "--token-file",
                token,
                "--route",
                "/hi",
            ],
            &data,
        )
    };
    let out = deploy("hi", &hello, &token, &admin.url);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.starts_with("deployed `hi` (sha256 "), "{stdout}");
    assert_eq!(admin.get("/hi"), (200, HELLO.to_string()));
    let out = deploy("hi", &hello, &token, &admin.url);
    assert!(String::from_utf8_lossy(&out.stdout).starts_with("replaced `hi`"));

    let wrong = admin.dir.join("wrong");
    std::fs::write(&wrong, "nope\n").unwrap();
    let text = admin.dir.join("text.wasm");
    std::fs::write(&text, "not a component\n").unwrap();
    let cases = [
        (
            deploy("hi", &hello, &wrong.display().to_string(), &admin.url),
            "refused the token (401)",
        ),
        (
            deploy("hi", &text.display().to_string(), &token, &admin.url),
            "(400 Bad Request)",
        ),
        (
            deploy("hi", &hello, &token, "http://127.0.0.1:1"),
            "cannot reach the admin API",
        ),
        // Not sent: as a URL it would be `PUT /apps/hi?x`, replacing `hi`.
        (
            deploy("hi?x", &hello, &token, &admin.url),
            "`hi?x` is not an app name",
        ),
    ];
    for (out, reason) in cases {
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{stderr}");
        assert_eq!(stderr.lines().count(), 1, "{stderr}");
        assert!(stderr.contains(reason), "{reason:?} not in {stderr:?}");
    }
    assert_eq!(admin.get("/hi"), (200, HELLO.to_string()));
}

/// `GET path` on the admin listener with no token: status and body.
fn probe(admin: &Admin, path: &str) -> (u16, String) {
    admin.request(None, &[], path)
}

#[test]
fn the_probes_answer_without_a_token_and_name_nothing() {
    let admin = Admin::start(&temp_dir("data"), &[]);
    assert_eq!(probe(&admin, "/healthz"), (200, "ok\n".to_string()));
    assert_eq!(probe(&admin, "/readyz"), (200, "ready\n".to_string()));
    // A token, right or wrong, changes nothing: the probes never look at it.
    assert_eq!(admin.request(Some("wrong"), &[], "/readyz").0, 200);
    assert_eq!(admin.request(Some(TOKEN), &[], "/healthz").0, 200);
    let head = curl(&["--include", &format!("{}/readyz", admin.url)]);
    let head = String::from_utf8_lossy(&head.stdout).to_ascii_lowercase();
    assert!(head.contains("cache-control: no-store"), "{head}");
    let (status, _) = admin.request(None, &["--request", "POST"], "/readyz");
    assert_eq!(status, 405);
    // Only those two paths are open: the API next to them still needs the token.
    for path in ["/apps", "/metrics", "/healthz/x", "/readyz/"] {
        assert_eq!(probe(&admin, path).0, 401, "{path}");
    }
}

#[test]
fn readyz_is_503_while_a_deployed_app_did_not_restore_until_it_is_deployed_again() {
    let data = temp_dir("data");
    let admin = Admin::start(&data, &[]);
    let routes = "routes = [\"/hi\"]\n";
    assert_eq!(admin.deploy("secretname", &example("hello"), routes).0, 201);
    drop(admin);
    // The stored component no longer loads (a disk fault, a hand edit).
    let app_dir = data.join("apps/secretname");
    let version = std::fs::read_to_string(app_dir.join("current")).unwrap();
    std::fs::write(app_dir.join(format!("{}.wasm", version.trim())), "not wasm").unwrap();

    let admin = Admin::start(&data, &[]);
    assert_eq!(probe(&admin, "/healthz"), (200, "ok\n".to_string()));
    let (status, body) = probe(&admin, "/readyz");
    assert_eq!(status, 503, "{body}");
    assert!(body.contains("1 deployed app(s) did not restore"), "{body}");
    assert!(!body.contains("secretname"), "readyz named the app: {body}");
    assert_eq!(admin.get("/configured"), (200, HELLO.to_string()));
    // Behind the token, the list says which.
    let lost = app(&admin, "secretname");
    assert_eq!(lost["status"], "not restored", "{lost}");
    assert_eq!(app(&admin, "configured")["status"], "serving");

    // A new version settles it (the same bytes again would find the damaged file
    // under their version's name: the store keeps a version it already has).
    assert_eq!(
        admin.deploy("secretname", &example("stream"), routes).0,
        201
    );
    assert_eq!(probe(&admin, "/readyz"), (200, "ready\n".to_string()));
}

#[test]
fn readyz_is_503_once_a_shutdown_begins_while_requests_drain() {
    let admin = Admin::start(&temp_dir("data"), &["--drain-timeout", "60s"]);
    assert_eq!(
        admin
            .deploy("echo", &example("echo"), "routes = [\"/echo\"]\n")
            .0,
        201
    );
    let parked = support::Parked::open(&admin.server, "/echo");
    support::sigterm(admin.server.pid());
    // The parked request holds the process in its drain; readyz says so.
    let body = support::poll_until("readyz 503", || {
        let (status, body) = probe(&admin, "/readyz");
        (status == 503).then_some(body)
    });
    assert_eq!(body, "not ready: draining (shutting down)\n");
    assert_eq!(probe(&admin, "/healthz"), (200, "ok\n".to_string()));
    parked.finish();
    let (status, log) = admin.server.wait_exit(Duration::from_secs(60));
    assert!(status.success(), "{log}");
}

/// `wedge ARGS --admin ADDR --token-file FILE` against `admin`'s API (`ADDR` as
/// given, e.g. without a scheme).
fn admin_cli(admin: &Admin, address: &str, args: &[&str]) -> std::process::Output {
    let token = admin.dir.join("token").display().to_string();
    let all = [args, &["--admin", address, "--token-file", &token]].concat();
    wedge(&all, &temp_dir("cli"))
}

/// The one line a failed `wedge` printed (exit status 2).
fn refusal(out: &std::process::Output) -> String {
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    stderr
}

#[test]
fn wedge_deploy_takes_host_port_as_wedge_toml_writes_it() {
    let admin = Admin::start(&temp_dir("data"), &[]);
    let host_port = admin.url.trim_start_matches("http://").to_string();
    let hello = example("hello").display().to_string();
    let out = admin_cli(
        &admin,
        &host_port,
        &["deploy", "hi", &hello, "--route", "/hi"],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(admin.get("/hi"), (200, HELLO.to_string()));
    for address in ["not an address", "ftp://127.0.0.1:21"] {
        let out = admin_cli(&admin, address, &["deploy", "hi", &hello, "--route", "/hi"]);
        let stderr = refusal(&out);
        assert!(stderr.contains("--admin takes HOST:PORT"), "{stderr}");
    }
}

#[test]
fn a_deploy_that_gives_the_app_no_route_is_refused_unless_no_route() {
    let admin = Admin::start(&temp_dir("data"), &[]);
    let url = admin.url.clone();
    let hello = example("hello").display().to_string();
    let stderr = refusal(&admin_cli(&admin, &url, &["deploy", "hi", &hello]));
    assert!(stderr.contains("`hi` would get no route"), "{stderr}");
    assert!(stderr.contains("--no-route"), "{stderr}");
    let settings = admin.dir.join("unrouted.toml");
    std::fs::write(&settings, "[limits]\nmemory = \"64MiB\"\n").unwrap();
    let settings = settings.display().to_string();
    let out = admin_cli(
        &admin,
        &url,
        &["deploy", "hi", &hello, "--config", &settings],
    );
    let stderr = refusal(&out);
    assert!(
        stderr.contains(&format!("{settings} gives `hi` no route")),
        "{stderr}"
    );
    assert_eq!(
        apps(&admin).as_array().unwrap().len(),
        1,
        "nothing deployed"
    );

    let out = admin_cli(&admin, &url, &["deploy", "hi", &hello, "--no-route"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(app(&admin, "hi")["routes"], serde_json::json!([]));
    let out = admin_cli(
        &admin,
        &url,
        &["deploy", "hi", &hello, "--config", &settings, "--no-route"],
    );
    assert!(out.status.success());
}

#[test]
fn a_bad_upload_is_named_by_the_users_own_file() {
    let data = temp_dir("data");
    let admin = Admin::start(&data, &[]);
    let url = admin.url.clone();
    let text = admin.dir.join("text.wasm");
    std::fs::write(&text, "not a component\n").unwrap();
    let text = text.display().to_string();
    let hello = example("hello").display().to_string();
    let stored = data.display().to_string();

    let stderr = refusal(&admin_cli(
        &admin,
        &url,
        &["deploy", "hi", &text, "--route", "/hi"],
    ));
    assert!(
        stderr.contains(&format!("{text}: not a WebAssembly file")),
        "{stderr}"
    );
    assert!(!stderr.contains(&stored), "names the data dir: {stderr}");
    let settings = admin.dir.join("bad.toml");
    std::fs::write(
        &settings,
        "routes = [\"/hi\"]\n[limits]\nmemory = \"lots\"\n",
    )
    .unwrap();
    let settings = settings.display().to_string();
    let out = admin_cli(
        &admin,
        &url,
        &["deploy", "hi", &hello, "--config", &settings],
    );
    let stderr = refusal(&out);
    assert!(
        stderr.contains(&format!("{settings}:3: limits.memory: `lots`")),
        "{stderr}"
    );

    // curl names the parts by their files' names too.
    let (status, body) = admin.deploy("hi", Path::new(&text), "routes = [\"/hi\"]\n");
    assert_eq!(status, 400, "{body}");
    assert!(body.contains("text.wasm: not a WebAssembly file"), "{body}");
    assert!(!body.contains(&stored), "names the data dir: {body}");
    let (status, body) = admin.deploy("bad", &example("hello"), "[limits]\nmemory = \"lots\"\n");
    assert_eq!(status, 400, "{body}");
    assert!(body.starts_with("bad.toml:2: limits.memory:"), "{body}");
}

#[test]
fn wedge_apps_lists_the_apps_and_wedge_rm_removes_a_deployed_one() {
    let admin = Admin::start(&temp_dir("data"), &[]);
    let url = admin.url.clone();
    let hello = example("hello");
    let digest = support::sha256(&std::fs::read(&hello).unwrap());
    let hello = hello.display().to_string();
    let out = admin_cli(&admin, &url, &["deploy", "hi", &hello, "--route", "/hi"]);
    assert!(out.status.success());

    let out = admin_cli(&admin, &url, &["apps"]);
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let rows: Vec<Vec<&str>> = stdout
        .lines()
        .map(|l| l.split_whitespace().collect())
        .collect();
    let short = &digest[..12];
    assert_eq!(
        rows,
        [
            vec!["NAME", "SOURCE", "STATUS", "DIGEST", "ROUTES"],
            vec!["configured", "config", "serving", short, "/configured"],
            vec!["hi", "deployed", "serving", short, "/hi"],
        ],
        "{stdout}"
    );
    let out = admin_cli(&admin, &url, &["apps", "--json"]);
    let listed: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(listed[1]["digest"], digest.as_str());
    assert_eq!(listed[1]["status"], "serving");

    let out = admin_cli(&admin, &url, &["rm", "hi"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(String::from_utf8_lossy(&out.stdout), "removed `hi`\n");
    assert_eq!(admin.get("/hi").0, 404);
    assert_eq!(apps(&admin).as_array().unwrap().len(), 1);
    let cases = [
        ("hi", "no app `hi` was deployed"),
        ("configured", "`configured` is an app of the config file"),
        ("Hi", "`Hi` is not an app name"),
    ];
    for (name, reason) in cases {
        let stderr = refusal(&admin_cli(&admin, &url, &["rm", name]));
        assert!(stderr.contains(reason), "{reason:?} not in {stderr:?}");
    }
    assert_eq!(admin.get("/configured"), (200, HELLO.to_string()));
}
