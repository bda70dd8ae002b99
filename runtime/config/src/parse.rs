//! From a parsed `wedge.toml` to a [`Config`], key by key, every problem
//! recorded with its line and key path.

use std::collections::{BTreeMap, HashMap};
use std::net::SocketAddr;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::time::Duration;

use toml::de::DeTable;

use crate::admission::AdmissionLimits;
use crate::compile::Compile;
use crate::executor::Executor;
use crate::keyvalue::{self, Backend, Durability, KeyValue};
use crate::limits::{Limits, Reuse};
use crate::oci::{Reference, SCHEME};
use crate::outbound::{HostPattern, Outbound};
use crate::reader::{Doc, Field, Table};
use crate::routes::{Route, RouteTable};
use crate::schema::{AdminConfig, AppConfig, ComponentSource, Config, PemFiles, TlsConfig};

/// Longest app name: it ends up in URLs, file names and metric labels.
const MAX_NAME: usize = 63;

/// Whether the files a config names must exist now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Files {
    MustExist,
    Unchecked,
}

/// Where relative paths start from and whether their files are checked.
pub(super) struct Paths<'p> {
    pub base: &'p Path,
    pub files: Files,
}

/// The config in `root`; problems go to `doc.errors` (the result is only
/// meaningful when there are none).
pub(super) fn config(doc: &mut Doc, root: &DeTable, paths: &Paths) -> Config {
    let mut root = Table::new(String::new(), 0..0, root);
    let listen = root.take("listen");
    let tls_listen = root.take("tls_listen");
    let tls_cert = root.take("tls_cert");
    let tls_key = root.take("tls_key");
    let admin = root.take("admin");
    let token_file = root.take("admin_token_file");
    let admin_tls_cert = root.take("admin_tls_cert");
    let admin_tls_key = root.take("admin_tls_key");
    let apps = root.take("app");
    let compile = root.take("compile");
    // `wedge dev`'s; checked here too, so that the file is checked as one.
    if let Some(field) = root.take("dev") {
        crate::dev::table(doc, &field, paths.base);
    }
    root.finish(doc);

    if listen.is_none() && tls_listen.is_none() {
        doc.error_in_file("no listener: set `listen` and/or `tls_listen`");
    }
    if apps.is_none() && admin.is_none() {
        doc.error_in_file("no [[app]] and no `admin` to deploy one: nothing to serve");
    }
    Config {
        listen: listen.and_then(|field| field.parse(doc, address)),
        tls: tls_config(doc, tls_listen, tls_cert, tls_key, paths),
        admin: admin_config(
            doc,
            admin,
            token_file,
            (admin_tls_cert, admin_tls_key),
            paths,
        ),
        apps: apps
            .map(|field| app_list(doc, &field, paths))
            .unwrap_or_default(),
        compile: compile.and_then(|field| field.parse(doc, Compile::parse)),
    }
}

fn address(text: &str) -> Result<SocketAddr, String> {
    text.parse()
        .map_err(|_| format!("`{text}` is not an address like 127.0.0.1:8080"))
}

fn tls_config(
    doc: &mut Doc,
    listen: Option<Field>,
    cert: Option<Field>,
    key: Option<Field>,
    paths: &Paths,
) -> Option<TlsConfig> {
    let address = listen.as_ref().and_then(|field| field.parse(doc, address));
    if listen.is_none() {
        for field in cert.iter().chain(key.iter()) {
            field.error(doc, "needs `tls_listen` too");
        }
    }
    let pem = pem_files(doc, (cert, key), ("tls_cert", "tls_key"), paths);
    Some(TlsConfig {
        listen: address?,
        pem,
    })
}

/// A certificate chain and key file, named `names` in the file: both or neither.
fn pem_files(
    doc: &mut Doc,
    (cert, key): (Option<Field>, Option<Field>),
    (cert_name, key_name): (&str, &str),
    paths: &Paths,
) -> Option<PemFiles> {
    match (cert, key) {
        (Some(cert), Some(key)) => {
            let cert = file(doc, &cert, paths);
            let key = file(doc, &key, paths);
            cert.zip(key).map(|(cert, key)| PemFiles { cert, key })
        }
        (Some(field), None) => {
            field.error(doc, format!("needs `{key_name}` too"));
            None
        }
        (None, Some(field)) => {
            field.error(doc, format!("needs `{cert_name}` too"));
            None
        }
        (None, None) => None,
    }
}

fn admin_config(
    doc: &mut Doc,
    listen: Option<Field>,
    token_file: Option<Field>,
    (tls_cert, tls_key): (Option<Field>, Option<Field>),
    paths: &Paths,
) -> Option<AdminConfig> {
    let address = listen.as_ref().and_then(|field| field.parse(doc, address));
    if listen.is_none() {
        for field in [&token_file, &tls_cert, &tls_key].into_iter().flatten() {
            field.error(doc, "needs `admin` (the admin API's address) too");
        }
        return None;
    }
    let token_file = token_file.and_then(|field| file(doc, &field, paths));
    let tls = pem_files(
        doc,
        (tls_cert, tls_key),
        ("admin_tls_cert", "admin_tls_key"),
        paths,
    );
    Some(AdminConfig {
        listen: address?,
        token_file,
        tls,
    })
}

/// A path relative to the config's directory, checked to be a file if asked.
fn file(doc: &mut Doc, field: &Field, paths: &Paths) -> Option<PathBuf> {
    let text = field.str(doc)?;
    if text.is_empty() {
        field.error(doc, "must not be empty");
        return None;
    }
    let path = paths.base.join(text);
    if paths.files == Files::MustExist && !path.is_file() {
        field.error(doc, format!("no file at {}", path.display()));
        return None;
    }
    Some(path)
}

/// A component: an `oci://` reference, else a file.
fn component(doc: &mut Doc, field: &Field, paths: &Paths) -> Option<ComponentSource> {
    match field.str(doc)? {
        text if text.starts_with(SCHEME) => {
            field.parse(doc, Reference::parse).map(ComponentSource::Oci)
        }
        _ => file(doc, field, paths).map(ComponentSource::File),
    }
}

/// Where a route was claimed, to name both claims of a duplicate.
#[derive(Clone)]
struct RouteSite {
    app: String,
    key: String,
    span: Range<usize>,
}

fn app_list(doc: &mut Doc, field: &Field, paths: &Paths) -> Vec<AppConfig> {
    let mut apps = Vec::new();
    let mut names = HashMap::new();
    let mut routes = Vec::new();
    for entry in field.array(doc).unwrap_or_default() {
        if let Some((app, sites)) = app(doc, &entry, &mut names, paths) {
            let claims = app.routes.iter().cloned().zip(sites);
            routes.extend(claims);
            apps.push(app);
        }
    }
    check_routes(doc, routes);
    apps
}

/// Reports every route claimed twice, naming the first claim.
fn check_routes(doc: &mut Doc, routes: Vec<(Route, RouteSite)>) {
    if let Err(duplicates) = RouteTable::new(routes) {
        for duplicate in duplicates {
            let (first, second) = (&duplicate.first, &duplicate.second);
            let message = format!(
                "route `{}` is already claimed by app `{}` on line {}",
                duplicate.route,
                first.app,
                doc.line(&first.span)
            );
            doc.error(&second.span, &second.key, message);
        }
    }
}

/// One `[[app]]`, and where each of its routes was written; `names` holds
/// the names taken so far and where.
fn app(
    doc: &mut Doc,
    entry: &Field,
    names: &mut HashMap<String, Range<usize>>,
    paths: &Paths,
) -> Option<(AppConfig, Vec<RouteSite>)> {
    let mut table = entry.table(doc)?;
    let name = table.required(doc, "name").and_then(|field| {
        let name = field.parse(doc, app_name)?;
        if let Some(first) = names.get(&name) {
            let line = doc.line(first);
            field.error(
                doc,
                format!("app `{name}` is already defined on line {line}"),
            );
            return None;
        }
        names.insert(name.clone(), field.span());
        Some(name)
    });
    let component = table
        .required(doc, "component")
        .and_then(|field| component(doc, &field, paths));
    let settings = settings(doc, table, paths);
    Some(settings.into_app(name?, component?))
}

/// What an app table says besides its name and component: an `[[app]]` of
/// the file, or the config of an app deployed through the admin API.
struct Settings {
    /// Each route with its key and where it was written.
    routes: Vec<(Route, String, Range<usize>)>,
    executor: Executor,
    limits: Limits,
    admission: AdmissionLimits,
    outbound: Outbound,
    env: BTreeMap<String, String>,
    config: BTreeMap<String, String>,
    keyvalue: KeyValue,
}

/// The settings keys of `table`, files named relative to `paths`; any other key
/// left in it is reported unknown.
fn settings(doc: &mut Doc, mut table: Table, paths: &Paths) -> Settings {
    let routes = list(doc, table.take("routes"), |field, doc| {
        let route = field.parse(doc, str::parse::<Route>)?;
        Some((route, field.key.clone(), field.span()))
    });
    let executor = table
        .take("executor")
        .and_then(|field| field.parse(doc, Executor::parse))
        .unwrap_or_default();
    let (limits, admission, mut outbound) = limits(doc, table.take("limits"));
    outbound.allow = list(doc, table.take("outbound"), |field, doc| {
        field.parse(doc, str::parse::<HostPattern>)
    });
    let env = strings(doc, table.take("env"), env_name);
    let config = strings(doc, table.take("config"), config_key);
    let keyvalue = keyvalue(doc, table.take("keyvalue"), paths);
    table.finish(doc);
    Settings {
        routes,
        executor,
        limits,
        admission,
        outbound,
        env,
        config,
        keyvalue,
    }
}

impl Settings {
    /// The app, and where each of its routes was written.
    fn into_app(self, name: String, component: ComponentSource) -> (AppConfig, Vec<RouteSite>) {
        let (routes, sites) = self
            .routes
            .into_iter()
            .map(|(route, key, span)| {
                let app = name.clone();
                (route, RouteSite { app, key, span })
            })
            .unzip();
        let app = AppConfig {
            name,
            component,
            routes,
            executor: self.executor,
            limits: self.limits,
            admission: self.admission,
            outbound: self.outbound,
            env: self.env,
            config: self.config,
            keyvalue: self.keyvalue,
        };
        (app, sites)
    }
}

/// A deployed app named `name`, whose settings are the whole of `root`, serving
/// `uploaded` or else the `oci://` reference `root` names as `component`.
pub(super) fn deployed_app(
    doc: &mut Doc,
    root: &DeTable,
    name: &str,
    uploaded: Option<PathBuf>,
) -> AppConfig {
    let mut table = Table::new(String::new(), 0..0, root);
    let named = table.take("component");
    let component = match (uploaded, named) {
        (Some(path), None) => ComponentSource::File(path),
        (None, Some(field)) => match field.str(doc) {
            Some(text) if text.starts_with(SCHEME) => field
                .parse(doc, Reference::parse)
                .map(ComponentSource::Oci)
                .unwrap_or(ComponentSource::File(PathBuf::new())),
            Some(_) => {
                field.error(
                    doc,
                    format!(
                        "a deployed app's component is uploaded (the form's `component` \
                         part) or an `{SCHEME}` reference, not a path on the server"
                    ),
                );
                ComponentSource::File(PathBuf::new())
            }
            None => ComponentSource::File(PathBuf::new()),
        },
        (Some(path), Some(field)) => {
            field.error(
                doc,
                "the deploy also uploads a component: give one or the other",
            );
            ComponentSource::File(path)
        }
        (None, None) => {
            doc.error_in_file(&format!(
                "no component: the form has no `component` part (the .wasm) and the \
                 settings no `component = \"{SCHEME}REGISTRY/REPOSITORY:TAG\"`"
            ));
            ComponentSource::File(PathBuf::new())
        }
    };
    // The files a deploy names (the key-value `ca`) are the server's, from its root.
    let server = Paths {
        base: Path::new("/"),
        files: Files::MustExist,
    };
    let settings = settings(doc, table, &server);
    let name = app_name(name).unwrap_or_else(|message| {
        doc.error_in_file(&message);
        String::new()
    });
    let (app, sites) = settings.into_app(name, component);
    check_routes(doc, app.routes.iter().cloned().zip(sites).collect());
    app
}

pub(super) fn app_name(text: &str) -> Result<String, String> {
    let mut chars = text.chars();
    let starts_well = chars.next().is_some_and(|c| c.is_ascii_lowercase());
    let rest_ok =
        chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(c, '-' | '_'));
    if starts_well && rest_ok && text.len() <= MAX_NAME {
        Ok(text.to_string())
    } else {
        Err(format!(
            "`{text}` is not an app name: use lowercase letters, digits, `-` and `_`, \
             starting with a letter, at most {MAX_NAME} characters"
        ))
    }
}

/// The items of a list field that `item` accepts; absent → empty.
fn list<T>(
    doc: &mut Doc,
    field: Option<Field>,
    item: impl Fn(&Field, &mut Doc) -> Option<T>,
) -> Vec<T> {
    let items = field.and_then(|field| field.array(doc)).unwrap_or_default();
    items.iter().filter_map(|field| item(field, doc)).collect()
}

/// `[app.limits]`: the per-request limits, admission and outbound limits;
/// each key not given keeps its default.
fn limits(doc: &mut Doc, field: Option<Field>) -> (Limits, AdmissionLimits, Outbound) {
    let (limits, admission, outbound) = Default::default();
    let Some(mut table) = field.and_then(|field| field.table(doc)) else {
        return (limits, admission, outbound);
    };
    let mut take = |name| table.take(name);
    let limits = Limits {
        memory: take("memory")
            .and_then(|f| f.size(doc).filter(|n| positive(doc, &f, *n > 0)))
            .unwrap_or(limits.memory),
        cpu_time: take("cpu_time")
            .and_then(|f| positive_duration(doc, &f))
            .unwrap_or(limits.cpu_time),
        wall_time: take("wall_time")
            .and_then(|f| positive_duration(doc, &f))
            .unwrap_or(limits.wall_time),
        max_body: take("max_body")
            .and_then(|f| f.size(doc))
            .unwrap_or(limits.max_body),
        host_memory: take("host_memory")
            .and_then(|f| f.size(doc).filter(|n| positive(doc, &f, *n > 0)))
            .unwrap_or(limits.host_memory),
        max_resources: take("max_resources")
            .and_then(|f| f.count(doc, 1))
            .unwrap_or(limits.max_resources),
        log_rate: take("log_rate")
            .and_then(|f| f.size(doc))
            .unwrap_or(limits.log_rate),
        log_burst: take("log_burst")
            .and_then(|f| f.size(doc))
            .unwrap_or(limits.log_burst),
        max_cgi_head: take("max_cgi_head")
            .and_then(|f| f.size(doc).filter(|n| positive(doc, &f, *n > 0)))
            .unwrap_or(limits.max_cgi_head),
        cgi_output_buffer: take("cgi_output_buffer")
            .and_then(|f| f.size(doc).filter(|n| positive(doc, &f, *n > 0)))
            .unwrap_or(limits.cgi_output_buffer),
        reuse: Reuse {
            requests: take("instance_reuse")
                .and_then(|f| f.count(doc, 1))
                .or(limits.reuse.requests),
            concurrency: take("instance_concurrency")
                .and_then(|f| f.count(doc, 1))
                .unwrap_or(limits.reuse.concurrency),
            idle: take("instance_idle")
                .and_then(|f| positive_duration(doc, &f))
                .unwrap_or(limits.reuse.idle),
        },
    };
    let admission = AdmissionLimits {
        max_concurrent: take("max_concurrent")
            .and_then(|f| f.count(doc, 1))
            .unwrap_or(admission.max_concurrent),
        queue: take("queue")
            .and_then(|f| f.count(doc, 0))
            .unwrap_or(admission.queue),
        queue_timeout: take("queue_timeout")
            .and_then(|f| f.duration(doc))
            .unwrap_or(admission.queue_timeout),
        max_abandoned_per_connection: take("max_abandoned_per_connection")
            .and_then(|f| f.count(doc, 1))
            .unwrap_or(admission.max_abandoned_per_connection),
    };
    let outbound = Outbound {
        max_concurrent: take("outbound_max_concurrent")
            .and_then(|f| f.count(doc, 1))
            .unwrap_or(outbound.max_concurrent),
        connect_timeout: take("outbound_connect_timeout")
            .and_then(|f| positive_duration(doc, &f))
            .unwrap_or(outbound.connect_timeout),
        ..outbound
    };
    table.finish(doc);
    (limits, admission, outbound)
}

/// `[app.keyvalue]`: the app's store and its quotas; each key not given keeps its
/// default.
fn keyvalue(doc: &mut Doc, field: Option<Field>, paths: &Paths) -> KeyValue {
    let defaults = KeyValue::default();
    let Some(mut table) = field.and_then(|field| field.table(doc)) else {
        return defaults;
    };
    let backend = table.take("backend");
    let durability = table.take("durability");
    let buckets = table.take("buckets");
    let mut take = |name| table.take(name);
    let settings = KeyValue {
        backend: backend
            .and_then(|f| f.parse(doc, Backend::parse))
            .unwrap_or(defaults.backend),
        durability: durability
            .and_then(|f| f.parse(doc, Durability::parse))
            .unwrap_or(defaults.durability),
        buckets: match buckets {
            Some(field) => list(doc, Some(field), |item, doc| {
                item.parse(doc, keyvalue::bucket_name)
            }),
            None => defaults.buckets,
        },
        max_keys: take("max_keys")
            .and_then(|f| f.count(doc, 0))
            .unwrap_or(defaults.max_keys),
        max_key_size: take("max_key_size")
            .and_then(|f| f.size(doc).filter(|n| positive(doc, &f, *n > 0)))
            .unwrap_or(defaults.max_key_size),
        max_value_size: take("max_value_size")
            .and_then(|f| f.size(doc))
            .unwrap_or(defaults.max_value_size),
        max_bytes: take("max_bytes")
            .and_then(|f| f.size(doc))
            .unwrap_or(defaults.max_bytes),
        max_in_flight: take("max_in_flight")
            .and_then(|f| f.count(doc, 1))
            .unwrap_or(defaults.max_in_flight),
        timeout: take("timeout")
            .and_then(|f| positive_duration(doc, &f))
            .unwrap_or(defaults.timeout),
        sync_interval: take("sync_interval")
            .and_then(|f| positive_duration(doc, &f))
            .unwrap_or(defaults.sync_interval),
        max_write_rate: take("max_write_rate")
            .and_then(|f| f.size(doc).filter(|n| positive(doc, &f, *n > 0)))
            .unwrap_or(defaults.max_write_rate),
        max_handles: take("max_handles")
            .and_then(|f| f.count(doc, 1))
            .unwrap_or(defaults.max_handles),
        max_batch: take("max_batch")
            .and_then(|f| f.count(doc, 1))
            .unwrap_or(defaults.max_batch),
        ca: take("ca").and_then(|field| file(doc, &field, paths)),
    };
    table.finish(doc);
    settings
}

fn positive_duration(doc: &mut Doc, field: &Field) -> Option<Duration> {
    field
        .duration(doc)
        .filter(|duration| positive(doc, field, !duration.is_zero()))
}

/// Reports a zero where only more is allowed; passes `is_positive` on.
fn positive(doc: &mut Doc, field: &Field, is_positive: bool) -> bool {
    if !is_positive {
        field.error(doc, "must be more than zero");
    }
    is_positive
}

/// A table of strings (`[app.env]`, `[app.config]`) whose keys `check_key` accepts.
fn strings(
    doc: &mut Doc,
    field: Option<Field>,
    check_key: fn(&str) -> Result<(), String>,
) -> BTreeMap<String, String> {
    let Some(table) = field.and_then(|field| field.table(doc)) else {
        return BTreeMap::new();
    };
    let mut values = BTreeMap::new();
    for (name, field) in table.entries() {
        if let Err(message) = check_key(name) {
            field.error(doc, message);
            continue;
        }
        if let Some(value) = field.str(doc) {
            if value.contains('\0') {
                field.error(doc, "must not contain a NUL character");
                continue;
            }
            values.insert(name.to_string(), value.to_string());
        }
    }
    values
}

fn env_name(name: &str) -> Result<(), String> {
    if name.is_empty() || name.contains(['=', '\0']) {
        return Err(format!("`{name}` is not an environment variable name"));
    }
    Ok(())
}

fn config_key(name: &str) -> Result<(), String> {
    if name.is_empty() {
        return Err("a config key must not be empty".to_string());
    }
    Ok(())
}
