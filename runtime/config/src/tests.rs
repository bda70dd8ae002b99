use std::path::{Path, PathBuf};
use std::time::Duration;

use super::*;
use crate::admission::AdmissionLimits;
use crate::compile::Compile;
use crate::executor::Executor;
use crate::keyvalue::{Backend, Durability, KeyValue};
use crate::limits::{Limits, Reuse};
use crate::outbound::Outbound;
use crate::routes::Route;

mod random;

fn parse_ok(text: &str) -> Config {
    parse(text, Path::new("/etc/wedge/wedge.toml")).unwrap_or_else(|errors| panic!("{errors}"))
}

/// The errors as displayed, one string per line.
fn errors(text: &str) -> Vec<String> {
    let errors = parse(text, Path::new("wedge.toml")).unwrap_err();
    errors.to_string().lines().map(str::to_string).collect()
}

/// A minimal valid config followed by `app`, the body of one `[[app]]`.
fn with_app(app: &str) -> String {
    format!("listen = \"127.0.0.1:8080\"\n[[app]]\nname = \"a\"\ncomponent = \"a.wasm\"\n{app}")
}

fn routes(texts: &[&str]) -> Vec<Route> {
    texts.iter().map(|text| text.parse().unwrap()).collect()
}

#[test]
fn a_full_config_reads_into_its_types() {
    let config = parse_ok(
        r#"
listen = "127.0.0.1:8080"
tls_listen = "[::1]:8443"
tls_cert = "certs/cert.pem"
tls_key = "/abs/key.pem"
admin = "127.0.0.1:9000"
admin_token_file = "token"
admin_tls_cert = "certs/admin.pem"
admin_tls_key = "certs/admin-key.pem"

[[app]]
name = "api-v2"
component = "apps/api.wasm"
routes = ["api.example.com/", "*.example.com/v2"]
outbound = ["db.internal:5432", "*.example.org"]
[app.limits]
memory = "64MiB"
cpu_time = "250ms"
wall_time = "10s"
max_body = 4096
host_memory = "4MiB"
max_resources = 500
log_rate = "4KiB"
log_burst = 0
max_cgi_head = "2KiB"
cgi_output_buffer = "1MiB"
max_concurrent = 8
queue = 0
queue_timeout = "2s"
max_abandoned_per_connection = 3
outbound_max_concurrent = 4
outbound_connect_timeout = "1s"
instance_reuse = 50
instance_concurrency = 4
instance_idle = "250ms"
[app.env]
MODE = "prod"
[app.config]
"db.url" = "postgres://db"
[app.keyvalue]
backend = "redis://127.0.0.1:6379"
durability = "disk"
buckets = ["default", "sessions"]
max_keys = 10
max_key_size = "64B"
max_value_size = "4KiB"
max_bytes = "1MiB"
max_in_flight = 2
timeout = "250ms"
sync_interval = "5s"
max_write_rate = "64KiB"
max_handles = 20
max_batch = 50
ca = "certs/redis-ca.pem"
"#,
    );
    let base = Path::new("/etc/wedge");
    assert_eq!(config.listen, Some("127.0.0.1:8080".parse().unwrap()));
    assert_eq!(
        config.tls,
        Some(TlsConfig {
            listen: "[::1]:8443".parse().unwrap(),
            pem: Some(PemFiles {
                cert: base.join("certs/cert.pem"),
                key: PathBuf::from("/abs/key.pem"),
            }),
        })
    );
    assert_eq!(
        config.admin,
        Some(AdminConfig {
            listen: "127.0.0.1:9000".parse().unwrap(),
            token_file: Some(base.join("token")),
            tls: Some(PemFiles {
                cert: base.join("certs/admin.pem"),
                key: base.join("certs/admin-key.pem"),
            }),
        })
    );
    let app = AppConfig {
        name: "api-v2".into(),
        component: ComponentSource::File(base.join("apps/api.wasm")),
        routes: routes(&["api.example.com/", "*.example.com/v2"]),
        executor: Executor::WasiHttp,
        limits: Limits {
            memory: 64 * 1024 * 1024,
            cpu_time: Duration::from_millis(250),
            wall_time: Duration::from_secs(10),
            max_body: 4096,
            host_memory: 4 * 1024 * 1024,
            max_resources: 500,
            log_rate: 4096,
            log_burst: 0,
            max_cgi_head: 2048,
            cgi_output_buffer: 1024 * 1024,
            reuse: Reuse {
                requests: Some(50),
                concurrency: 4,
                idle: Duration::from_millis(250),
            },
        },
        admission: AdmissionLimits {
            max_concurrent: 8,
            queue: 0,
            queue_timeout: Duration::from_secs(2),
            max_abandoned_per_connection: 3,
        },
        outbound: Outbound {
            allow: vec![
                "db.internal:5432".parse().unwrap(),
                "*.example.org".parse().unwrap(),
            ],
            connect_timeout: Duration::from_secs(1),
            max_concurrent: 4,
        },
        env: [("MODE".into(), "prod".into())].into(),
        config: [("db.url".into(), "postgres://db".into())].into(),
        keyvalue: KeyValue {
            backend: Backend::parse("redis://127.0.0.1:6379").unwrap(),
            durability: Durability::Disk,
            buckets: vec!["default".into(), "sessions".into()],
            max_keys: 10,
            max_key_size: 64,
            max_value_size: 4096,
            max_bytes: 1 << 20,
            max_in_flight: 2,
            timeout: Duration::from_millis(250),
            sync_interval: Duration::from_secs(5),
            max_write_rate: 64 * 1024,
            max_handles: 20,
            max_batch: 50,
            ca: Some(base.join("certs/redis-ca.pem")),
        },
    };
    assert_eq!(config.apps, [app]);
}

#[test]
fn sizes_take_a_unit_but_zero_and_toml_integers_need_none() {
    use crate::limits::parse_size;
    assert_eq!(parse_size("12MiB"), Ok(12 << 20));
    assert_eq!(parse_size("12 KiB"), Ok(12 << 10));
    assert_eq!(parse_size("4096B"), Ok(4096));
    assert_eq!(parse_size("0"), Ok(0));
    for bare in ["12", "1.5", " 7 "] {
        let err = parse_size(bare).unwrap_err();
        assert!(err.contains("needs a unit, e.g. "), "{bare:?}: {err}");
    }
    assert_eq!(
        parse_size("12"),
        Err("`12` needs a unit, e.g. 12MiB (or 12B for bytes)".into())
    );
    // A TOML integer is typed as a number of bytes.
    let config = parse_ok(&with_app("[app.limits]\nmax_body = 4096"));
    assert_eq!(config.apps[0].limits.max_body, 4096);
}

#[test]
fn keys_left_out_take_their_defaults() {
    let config = parse_ok(&with_app(""));
    assert_eq!(config.tls, None);
    assert_eq!(config.admin, None);
    let app = &config.apps[0];
    assert!(app.routes.is_empty());
    assert_eq!(app.limits, Limits::default());
    assert_eq!(app.admission, AdmissionLimits::default());
    assert_eq!(app.outbound, Outbound::default());
    assert!(app.env.is_empty() && app.config.is_empty());
    assert_eq!(app.keyvalue, KeyValue::default());
    assert_eq!(app.keyvalue.backend, Backend::Embedded);
    let underscored = parse_ok(&with_app("limits.queue = 1_000\nlimits.max_body = 0x10"));
    assert_eq!(underscored.apps[0].admission.queue, 1000);
    assert_eq!(underscored.apps[0].limits.max_body, 16);
    let tls_only = parse_ok("tls_listen = \"127.0.0.1:8443\"\nadmin = \"127.0.0.1:9000\"");
    assert_eq!(tls_only.tls.unwrap().pem, None);
    assert!(tls_only.apps.is_empty());
}

#[test]
fn each_kind_of_mistake_is_reported_with_its_line_and_key() {
    let cases: &[(&str, &str)] = &[
        (
            "bogus = 1",
            "wedge.toml:5: app[0].bogus: unknown key `bogus`; known keys: name, component, routes, executor, limits, outbound, env, config, keyvalue",
        ),
        (
            "routes = \"/x\"",
            "wedge.toml:5: app[0].routes: must be a list like [\"a\", \"b\"]",
        ),
        (
            "routes = [\"nope\"]",
            "wedge.toml:5: app[0].routes[0]: `nope` is not a route (no path; add one, e.g. `/`); use host/path, *.domain/path or /path",
        ),
        (
            "outbound = [\"a b\"]",
            "wedge.toml:5: app[0].outbound[0]: `a b` is not an outbound host pattern (not a host name or IP address); use host, host:port or *.domain",
        ),
        (
            "limits.memory = \"12XB\"",
            "wedge.toml:5: app[0].limits.memory: `12XB` is not a size like 128MiB",
        ),
        (
            "limits.memory = \"12\"",
            "wedge.toml:5: app[0].limits.memory: `12` needs a unit, e.g. 12MiB (or 12B for bytes)",
        ),
        (
            "limits.memory = 0",
            "wedge.toml:5: app[0].limits.memory: must be more than zero",
        ),
        (
            "limits.host_memory = 0",
            "wedge.toml:5: app[0].limits.host_memory: must be more than zero",
        ),
        (
            "limits.max_resources = 0",
            "wedge.toml:5: app[0].limits.max_resources: `0` is not a whole number of at least 1",
        ),
        (
            "limits.cpu_time = \"soon\"",
            "wedge.toml:5: app[0].limits.cpu_time: `soon` is not a duration like 1s or 500ms",
        ),
        (
            "limits.wall_time = \"0s\"",
            "wedge.toml:5: app[0].limits.wall_time: must be more than zero",
        ),
        (
            "limits.queue_timeout = 5",
            "wedge.toml:5: app[0].limits.queue_timeout: must be a string (in quotes)",
        ),
        (
            "limits.max_concurrent = 0",
            "wedge.toml:5: app[0].limits.max_concurrent: `0` is not a whole number of at least 1",
        ),
        (
            "limits.queue = -1",
            "wedge.toml:5: app[0].limits.queue: `-1` is not a whole number of at least 0",
        ),
        (
            "limits.queue = 1.5",
            "wedge.toml:5: app[0].limits.queue: must be a whole number",
        ),
        (
            "limits.outbound_max_concurrent = 0",
            "wedge.toml:5: app[0].limits.outbound_max_concurrent: `0` is not a whole number of at least 1",
        ),
        (
            "limits.outbound_connect_timeout = \"0ms\"",
            "wedge.toml:5: app[0].limits.outbound_connect_timeout: must be more than zero",
        ),
        (
            "limits.instance_reuse = 0",
            "wedge.toml:5: app[0].limits.instance_reuse: `0` is not a whole number of at least 1",
        ),
        (
            "limits.instance_concurrency = 0",
            "wedge.toml:5: app[0].limits.instance_concurrency: `0` is not a whole number of at least 1",
        ),
        (
            "limits.instance_idle = \"0s\"",
            "wedge.toml:5: app[0].limits.instance_idle: must be more than zero",
        ),
        (
            "limits.cpu = \"1s\"",
            "wedge.toml:5: app[0].limits.cpu: unknown key `cpu`; known keys: memory, cpu_time, wall_time, max_body, host_memory, max_resources, log_rate, log_burst, max_cgi_head, cgi_output_buffer, instance_reuse, instance_concurrency, instance_idle, max_concurrent, queue, queue_timeout, max_abandoned_per_connection, outbound_max_concurrent, outbound_connect_timeout",
        ),
        ("limits = 5", "wedge.toml:5: app[0].limits: must be a table"),
        (
            "env.\"A=B\" = \"x\"",
            "wedge.toml:5: app[0].env.A=B: `A=B` is not an environment variable name",
        ),
        (
            "env.PORT = 8080",
            "wedge.toml:5: app[0].env.PORT: must be a string (in quotes)",
        ),
        (
            "config.\"\" = \"x\"",
            "wedge.toml:5: app[0].config.: a config key must not be empty",
        ),
        (
            "keyvalue.backend = \"sqlite\"",
            "wedge.toml:5: app[0].keyvalue.backend: `sqlite` is not a key-value backend",
        ),
        (
            "keyvalue.durability = \"fsync\"",
            "wedge.toml:5: app[0].keyvalue.durability: `fsync` is not a durability",
        ),
        (
            "keyvalue.buckets = [\"a:b\"]",
            "wedge.toml:5: app[0].keyvalue.buckets[0]: `a:b` is not a bucket name",
        ),
        (
            "keyvalue.max_in_flight = 0",
            "wedge.toml:5: app[0].keyvalue.max_in_flight: `0` is not a whole number of at least 1",
        ),
        (
            "keyvalue.max_key_size = 0",
            "wedge.toml:5: app[0].keyvalue.max_key_size: must be more than zero",
        ),
        (
            "keyvalue.timeout = \"0s\"",
            "wedge.toml:5: app[0].keyvalue.timeout: must be more than zero",
        ),
        (
            "keyvalue.sync_interval = \"0s\"",
            "wedge.toml:5: app[0].keyvalue.sync_interval: must be more than zero",
        ),
        (
            "keyvalue.max_write_rate = 0",
            "wedge.toml:5: app[0].keyvalue.max_write_rate: must be more than zero",
        ),
        (
            "keyvalue.max_handles = 0",
            "wedge.toml:5: app[0].keyvalue.max_handles: `0` is not a whole number of at least 1",
        ),
        (
            "keyvalue.max_batch = 0",
            "wedge.toml:5: app[0].keyvalue.max_batch: `0` is not a whole number of at least 1",
        ),
        (
            "keyvalue.max_bytes = \"12\"",
            "wedge.toml:5: app[0].keyvalue.max_bytes: `12` needs a unit",
        ),
        (
            "keyvalue.quota = 1",
            "wedge.toml:5: app[0].keyvalue.quota: unknown key `quota`; known keys: backend, durability, buckets, max_keys, max_key_size, max_value_size, max_bytes, max_in_flight, timeout, sync_interval, max_write_rate, max_handles, max_batch, ca",
        ),
        (
            "config.k = \"a\\u0000b\"",
            "wedge.toml:5: app[0].config.k: must not contain a NUL character",
        ),
    ];
    for (app, expected) in cases {
        let found = errors(&with_app(app));
        assert_eq!(found.len(), 1, "{app}: {found:?}");
        assert!(
            found[0].starts_with(expected),
            "{app}:\n  {}\n  {expected}",
            found[0]
        );
    }
}

#[test]
fn top_level_mistakes_are_reported() {
    let app = "[[app]]\nname = \"a\"\ncomponent = \"a.wasm\"\n";
    let cases: &[(&str, &str)] = &[
        (
            "",
            "wedge.toml: no listener: set `listen` and/or `tls_listen`",
        ),
        (
            "listen = \"localhost\"",
            "wedge.toml:1: listen: `localhost` is not an address like 127.0.0.1:8080",
        ),
        (
            "tls_listen = \"127.0.0.1:1\"\ntls_key = \"k.pem\"",
            "wedge.toml:2: tls_key: needs `tls_cert` too",
        ),
        (
            "listen = \"127.0.0.1:1\"\nadmin_token_file = \"t\"",
            "wedge.toml:2: admin_token_file: needs `admin` (the admin API's address) too",
        ),
        (
            "listen = \"127.0.0.1:1\"\nadmin = \":9000\"",
            "wedge.toml:2: admin: `:9000` is not an address like 127.0.0.1:8080",
        ),
        (
            "listen = \"127.0.0.1:1\"\nadmin = \"127.0.0.1:9000\"\nadmin_tls_cert = \"c.pem\"",
            "wedge.toml:3: admin_tls_cert: needs `admin_tls_key` too",
        ),
        (
            "listen = \"127.0.0.1:1\"\nadmin = \"127.0.0.1:9000\"\nadmin_tls_key = \"k.pem\"",
            "wedge.toml:3: admin_tls_key: needs `admin_tls_cert` too",
        ),
        (
            "listen = \"127.0.0.1:1\"\nadmin_tls_key = \"k.pem\"",
            "wedge.toml:2: admin_tls_key: needs `admin` (the admin API's address) too",
        ),
        (
            "listen = \"127.0.0.1:1\"\nport = 80",
            "wedge.toml:2: port: unknown key `port`; known keys: listen, tls_listen",
        ),
    ];
    for (top, expected) in cases {
        let found = errors(&format!("{top}\n{app}"));
        assert_eq!(found.len(), 1, "{top}: {found:?}");
        assert!(
            found[0].starts_with(expected),
            "{top}:\n  {}\n  {expected}",
            found[0]
        );
    }
    let pem_without_listener =
        "listen = \"127.0.0.1:1\"\ntls_cert = \"c.pem\"\ntls_key = \"k.pem\"";
    assert_eq!(
        errors(&format!("{pem_without_listener}\n{app}")),
        [
            "wedge.toml:2: tls_cert: needs `tls_listen` too",
            "wedge.toml:3: tls_key: needs `tls_listen` too"
        ]
    );
    assert_eq!(
        errors("listen = \"127.0.0.1:1\"\n[app]\nname = \"a\"\ncomponent = \"a.wasm\""),
        ["wedge.toml:2: app: must be a list like [\"a\", \"b\"]"]
    );
    assert_eq!(
        errors("listen = \"127.0.0.1:1\""),
        ["wedge.toml: no [[app]] and no `admin` to deploy one: nothing to serve"]
    );
}

#[test]
fn apps_need_a_valid_unique_name_and_a_component() {
    let text = r#"listen = "127.0.0.1:1"
[[app]]
name = "a"
component = "a.wasm"
[[app]]
component = "b.wasm"
[[app]]
name = "Bad Name"
[[app]]
name = "a"
component = "c.wasm"
[[app]]
name = "d"
component = ""
"#;
    assert_eq!(
        errors(text),
        [
            "wedge.toml:5: app[1]: missing `name`",
            "wedge.toml:7: app[2]: missing `component`",
            "wedge.toml:8: app[2].name: `Bad Name` is not an app name: use lowercase letters, \
             digits, `-` and `_`, starting with a letter, at most 63 characters",
            "wedge.toml:10: app[3].name: app `a` is already defined on line 3",
            "wedge.toml:14: app[4].component: must not be empty",
        ]
    );
}

#[test]
fn a_route_claimed_twice_names_the_first_claim() {
    let text = r#"listen = "127.0.0.1:1"
[[app]]
name = "a"
component = "a.wasm"
routes = ["api.example.com/v1", "/shared"]
[[app]]
name = "b"
component = "b.wasm"
routes = [
  "/other",
  "API.example.com/v1/",
]
[[app]]
name = "c"
component = "c.wasm"
routes = ["/shared", "/shared/"]
"#;
    assert_eq!(
        errors(text),
        [
            "wedge.toml:11: app[1].routes[1]: route `api.example.com/v1` is already claimed by app `a` on line 5",
            "wedge.toml:16: app[2].routes[0]: route `/shared` is already claimed by app `a` on line 5",
            "wedge.toml:16: app[2].routes[1]: route `/shared` is already claimed by app `a` on line 5",
        ]
    );
}

#[test]
fn every_error_is_reported_in_line_order() {
    let text = r#"listen = "127.0.0.1"
[[app]]
name = "a"
component = "a.wasm"
routes = ["/ok", "bad"]
[app.limits]
memory = "12XB"
wall_time = "forever"
[[app]]
name = "b"
component = "b.wasm"
colour = "blue"
[app.limits]
queue = -3
"#;
    let found = errors(text);
    let lines: Vec<&str> = found
        .iter()
        .map(|e| e.split(": ").next().unwrap())
        .collect();
    assert_eq!(
        lines,
        [
            "wedge.toml:1",
            "wedge.toml:5",
            "wedge.toml:7",
            "wedge.toml:8",
            "wedge.toml:12",
            "wedge.toml:14"
        ],
        "{found:#?}"
    );
    assert!(found[2].starts_with("wedge.toml:7: app[0].limits.memory: `12XB` is not a size"));
    assert!(found[4].starts_with("wedge.toml:12: app[1].colour: unknown key `colour`"));
}

#[test]
fn syntax_errors_are_reported_alone_with_their_lines() {
    let text = "listen = \"127.0.0.1:1\"\n[[app]]\nname = \"a\"\nname = \"b\"\nmemory = 12XB\n";
    let found = errors(text);
    assert_eq!(found.len(), 2, "{found:?}");
    assert!(
        found[0].starts_with("wedge.toml:4: duplicate key"),
        "{found:?}"
    );
    assert!(found[1].starts_with("wedge.toml:5: "), "{found:?}");
}

/// A scratch directory for files a config names, removed afterwards.
struct Scratch(PathBuf);

impl Scratch {
    fn new(name: &str) -> Self {
        let dir = std::env::temp_dir().join(format!("wedge-config-{}-{name}", std::process::id()));
        std::fs::create_dir_all(dir.join("apps")).unwrap();
        Scratch(dir)
    }

    fn write(&self, path: &str, text: &str) -> PathBuf {
        let path = self.0.join(path);
        std::fs::write(&path, text).unwrap();
        path
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

#[test]
fn load_resolves_paths_against_the_config_directory_and_checks_files() {
    let dir = Scratch::new("paths");
    let wasm = dir.write("apps/a.wasm", "");
    let absolute = dir.write("key.pem", "");
    dir.write("cert.pem", "");
    let config = format!(
        "tls_listen = \"127.0.0.1:1\"\ntls_cert = \"cert.pem\"\ntls_key = \"{}\"\n\
         [[app]]\nname = \"a\"\ncomponent = \"apps/a.wasm\"\n",
        absolute.display()
    );
    let path = dir.write("wedge.toml", &config);
    let loaded = load(&path).unwrap_or_else(|errors| panic!("{errors}"));
    assert_eq!(loaded.apps[0].component, ComponentSource::File(wasm));
    let pem = loaded.tls.unwrap().pem.unwrap();
    assert_eq!((pem.cert, pem.key), (dir.0.join("cert.pem"), absolute));

    let missing = config.replace("apps/a.wasm", "apps/gone.wasm");
    let path = dir.write("wedge.toml", &missing);
    let error = load(&path).unwrap_err().to_string();
    let expected = format!(
        "{}:6: app[0].component: no file at {}",
        path.display(),
        dir.0.join("apps/gone.wasm").display()
    );
    assert_eq!(error, expected);
    // Without the existence check the same text is fine.
    assert!(parse(&missing, &path).is_ok());

    let error = load(&dir.0.join("absent.toml")).unwrap_err().to_string();
    assert!(error.contains("absent.toml: cannot read: "), "{error}");
}

#[test]
fn the_sample_config_is_accepted_and_shows_the_defaults() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/wedge.toml");
    let text = std::fs::read_to_string(&path).unwrap();
    let config = parse(&text, &path).unwrap_or_else(|errors| panic!("{errors}"));
    let names: Vec<&str> = config.apps.iter().map(|app| app.name.as_str()).collect();
    assert_eq!(names, ["hello", "echo"]);
    let hello = &config.apps[0];
    assert!(matches!(&hello.component, ComponentSource::File(path)
        if path.ends_with("examples/target/wasm32-wasip2/release/hello.wasm")));
    // Its comment says the limits shown are the defaults.
    assert_eq!(hello.limits, Limits::default());
    assert_eq!(hello.admission, AdmissionLimits::default());
    let outbound_defaults = Outbound {
        allow: hello.outbound.allow.clone(),
        ..Outbound::default()
    };
    assert_eq!(hello.outbound, outbound_defaults);
    assert!(hello.outbound.allows("api.example.com", 443));
    assert_eq!(hello.config["feature.beta"], "on");
    assert_eq!(hello.keyvalue, KeyValue::default());
}

/// README says the sample shows every key: each key the parser takes (from its
/// source, so a key added later is caught) is written there, set or commented out.
#[test]
fn the_sample_config_shows_every_key_the_parser_reads() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/wedge.toml");
    let sample = std::fs::read_to_string(&path).unwrap();
    let lines: Vec<&str> = sample
        .lines()
        .map(|line| line.trim_start_matches(['#', ' ']))
        .collect();
    let source = [include_str!("parse.rs"), include_str!("dev.rs")].concat();
    let keys: Vec<&str> = source
        .split("take(\"")
        .skip(1)
        .filter_map(|rest| rest.split_once("\")").map(|(key, _)| key))
        .collect();
    assert!(keys.len() > 40, "{keys:?}");
    let missing: Vec<&&str> = keys
        .iter()
        .filter(|key| {
            !lines.iter().any(|line| {
                line.starts_with(&format!("{key} ="))
                    || line.starts_with(&format!("[{key}]"))
                    || line.starts_with(&format!("[[{key}]]"))
                    || (line.starts_with('[') && line.contains(&format!(".{key}]")))
            })
        })
        .collect();
    assert!(
        missing.is_empty(),
        "examples/wedge.toml leaves out {missing:?}"
    );
}

#[test]
fn a_deployed_apps_settings_read_like_an_app_table_without_name_and_component() {
    let text = "routes = [\"/a\", \"a.example.com/\"]\noutbound = [\"api.example.com\"]\n\
                executor = \"wagi\"\n[limits]\nmax_concurrent = 3\n[env]\nMODE = \"x\"\n\
                [keyvalue]\nbackend = \"redis://kv:6379\"\nmax_keys = 7\n";
    let app = parse_app(text, "config", "api", Some(PathBuf::from("/data/a.wasm"))).unwrap();
    assert_eq!(app.name, "api");
    assert_eq!(app.executor, Executor::Wagi);
    assert_eq!(
        app.component,
        ComponentSource::File(PathBuf::from("/data/a.wasm"))
    );
    assert_eq!(app.routes, routes(&["/a", "a.example.com/"]));
    assert_eq!(app.admission.max_concurrent, 3);
    assert_eq!(app.env["MODE"], "x");
    assert_eq!(app.keyvalue.backend.to_string(), "redis://kv:6379");
    assert_eq!(app.keyvalue.max_keys, 7);
    let empty = parse_app("", "config", "api", Some(PathBuf::from("a.wasm"))).unwrap();
    assert!(empty.routes.is_empty());
    assert_eq!(empty.executor, Executor::WasiHttp);
}

#[test]
fn an_unknown_executor_is_refused_naming_the_known_ones() {
    assert_eq!(
        errors(&with_app("executor = \"cgi\"\n")),
        ["wedge.toml:5: app[0].executor: `cgi` is not an executor: `wasi-http` or `wagi`"]
    );
}

#[test]
fn a_deployed_apps_settings_are_checked_like_an_app_table() {
    let errors = |text: &str, name: &str| {
        let errors = parse_app(text, "config", name, Some(PathBuf::from("a.wasm"))).unwrap_err();
        errors.to_string()
    };
    assert_eq!(
        errors("routes = [\"/a\", \"/a\"]\n", "api"),
        "config:1: routes[1]: route `/a` is already claimed by app `api` on line 1"
    );
    let text = errors("name = \"x\"\ncomponent = \"b.wasm\"\n", "api");
    assert!(
        text.starts_with("config:1: name: unknown key `name`"),
        "{text}"
    );
    assert!(
        text.contains("config:2: component: the deploy also uploads a component"),
        "{text}"
    );
    assert!(errors("", "Api").contains("`Api` is not an app name"));
    assert!(errors("routes = [", "api").starts_with("config:1:"));
}

#[test]
fn a_component_may_be_an_oci_reference() {
    let config = parse_ok(
        "listen = \"127.0.0.1:8080\"\n[[app]]\nname = \"a\"\n\
         component = \"oci://ghcr.io/acme/hello:v1\"\n",
    );
    let reference = crate::oci::Reference::parse("oci://ghcr.io/acme/hello:v1").unwrap();
    assert_eq!(config.apps[0].component, ComponentSource::Oci(reference));
    // A reference is not a file: `load` does not look for one.
    let bad = errors(
        "listen = \"127.0.0.1:8080\"\n[[app]]\nname = \"a\"\ncomponent = \"oci://ghcr.io/Hello\"\n",
    );
    assert_eq!(bad.len(), 1, "{bad:?}");
    assert!(
        bad[0].starts_with(
            "wedge.toml:4: app[0].component: `oci://ghcr.io/Hello` is not an OCI reference"
        ),
        "{bad:?}"
    );
}

#[test]
fn a_deployed_app_names_an_oci_reference_or_uploads_a_file() {
    let app = parse_app(
        "component = \"oci://127.0.0.1:5000/hello@sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855\"\nroutes = [\"/\"]\n",
        "config",
        "hello",
        None,
    )
    .unwrap();
    assert!(
        matches!(app.component, ComponentSource::Oci(ref r) if r.registry() == "127.0.0.1:5000")
    );
    let errors = |text: &str| {
        parse_app(text, "config", "api", None)
            .unwrap_err()
            .to_string()
    };
    assert!(
        errors("").contains("config: no component: the form has no `component` part"),
        "{}",
        errors("")
    );
    let path = errors("component = \"/etc/passwd\"\n");
    assert!(
        path.contains("config:1: component: a deployed app's component is uploaded"),
        "{path}"
    );
    let malformed = errors("component = \"oci://x\"\n");
    assert!(
        malformed.contains("`oci://x` is not an OCI reference"),
        "{malformed}"
    );
}

#[test]
fn a_dev_table_names_a_build_command_its_component_and_what_to_watch() {
    let path = Path::new("/src/app/wedge.toml");
    let dev = |text: &str| parse_dev(text, path).unwrap_or_else(|errors| panic!("{errors}"));
    assert_eq!(dev("listen = \"127.0.0.1:8080\"\n"), None, "no [dev]");
    let full = dev(
        "[dev]\nbuild = \"npm run build\"\ncomponent = \"dist/app.wasm\"\nwatch = [\"src\", \"/abs/lib\"]\n",
    )
    .unwrap();
    assert_eq!(full.build.as_deref(), Some("npm run build"));
    assert_eq!(
        full.component,
        Some(PathBuf::from("/src/app/dist/app.wasm"))
    );
    assert_eq!(
        full.watch,
        Some(vec![
            PathBuf::from("/src/app/src"),
            PathBuf::from("/abs/lib")
        ])
    );
    // Keys left out may come from flags; the rest of the file is wedge serve's.
    let partial = dev("[[app]]\nbogus = 1\n[dev]\nbuild = \"make\"\n").unwrap();
    assert_eq!(partial.component, None);
    assert_eq!(partial.watch, None);
}

#[test]
fn a_bad_dev_table_is_reported_with_its_lines_by_wedge_dev_and_wedge_serve() {
    let text = "[dev]\nbuild = \"\"\ncomponent = 3\nwatch = []\nwach = [\"src\"]\n";
    let dev = parse_dev(text, Path::new("wedge.toml"))
        .unwrap_err()
        .to_string();
    let expected = [
        "wedge.toml:2: dev.build: must not be empty",
        "wedge.toml:3: dev.component: must be a string (in quotes)",
        "wedge.toml:4: dev.watch: must name at least one file or directory",
        "wedge.toml:5: dev.wach: unknown key `wach`; known keys: build, component, watch",
    ];
    assert_eq!(dev.lines().collect::<Vec<_>>(), expected, "{dev}");
    let serve = errors(&with_app("[dev]\nbuild = \"\"\n"));
    assert!(
        serve
            .iter()
            .any(|line| line.ends_with("dev.build: must not be empty")),
        "{serve:?}"
    );
    // A good one is no problem for wedge serve.
    parse_ok(&with_app(
        "[dev]\nbuild = \"make\"\ncomponent = \"a.wasm\"\n",
    ));
}

#[test]
fn a_guest_crate_without_wedge_metadata_builds_for_wasip2() {
    let manifest =
        "[package]\nname = \"greeter\"\nversion = \"0.1.0\"\n[package.metadata.docs]\nx = 1\n";
    let parsed = parse_guest_crate(manifest, "Cargo.toml").unwrap();
    assert_eq!(parsed.target, guest_crate::WasmTarget::Wasip2);
    assert_eq!(
        parse_guest_crate("[workspace]\n", "Cargo.toml").unwrap(),
        parsed
    );
}

#[test]
fn a_guest_crate_names_its_target_in_wedge_metadata() {
    let manifest =
        "[package]\nname = \"m\"\n[package.metadata.wedge]\ntarget = \"wasm32-wasip1\"\n";
    let parsed = parse_guest_crate(manifest, "Cargo.toml").unwrap();
    assert_eq!(parsed.target, guest_crate::WasmTarget::Wasip1);
}

#[test]
fn wedge_metadata_problems_name_their_key_and_line() {
    let manifest = "[package]\nname = \"m\"\n[package.metadata.wedge]\ntarget = \"wasm32-unknown\"\ncolour = 1\n";
    let errors = parse_guest_crate(manifest, "Cargo.toml")
        .unwrap_err()
        .to_string();
    let lines: Vec<&str> = errors.lines().collect();
    assert_eq!(lines.len(), 2, "{errors}");
    assert!(
        lines[0].starts_with("Cargo.toml:4: package.metadata.wedge.target: `wasm32-unknown`"),
        "{errors}"
    );
    assert!(
        lines[1].starts_with("Cargo.toml:5: package.metadata.wedge.colour: unknown key"),
        "{errors}"
    );
}

#[test]
fn compile_says_how_uncached_components_are_compiled_and_is_left_to_the_flag_when_absent() {
    assert_eq!(parse_ok(&with_app("")).compile, None);
    let text = format!("compile = \"optimized\"\n{}", with_app(""));
    assert_eq!(parse_ok(&text).compile, Some(Compile::Optimized));
    let text = format!("compile = \"tiered\"\n{}", with_app(""));
    assert_eq!(parse_ok(&text).compile, Some(Compile::Tiered));
    let text = format!("compile = \"fast\"\n{}", with_app(""));
    assert_eq!(
        errors(&text),
        ["wedge.toml:1: compile: `fast` is no compile mode: `tiered` or `optimized`"]
    );
}
