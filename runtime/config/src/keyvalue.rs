//! An app's key-value store (`[app.keyvalue]`, `--kv`): which backend holds its
//! data, which buckets its guest may open, and its quotas. The runtime's
//! `host::keyvalue` enforces them.

use std::fmt;
use std::path::PathBuf;
use std::time::Duration;

/// Default keys one app may keep, all its buckets together.
pub const DEFAULT_MAX_KEYS: u64 = 100_000;
/// Default longest key, in bytes.
pub const DEFAULT_MAX_KEY_SIZE: u64 = 1024;
/// Default largest value, in bytes.
pub const DEFAULT_MAX_VALUE_SIZE: u64 = 1024 * 1024;
/// Default bytes (keys and values) one app may keep, all its buckets together.
pub const DEFAULT_MAX_BYTES: u64 = 100 * 1024 * 1024;
/// Default operations of one app in flight at once, all its instances together.
pub const DEFAULT_MAX_IN_FLIGHT: u32 = 64;
/// Default time one operation may take before the guest gets an error.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(5);
/// Default time between two syncs of an embedded file written with `durability =
/// "os"`: the most a power cut may lose.
pub const DEFAULT_SYNC_INTERVAL: Duration = Duration::from_secs(1);
/// Default bytes of keys and values one app may write a second, averaged.
pub const DEFAULT_MAX_WRITE_RATE: u64 = 4 * 1024 * 1024;
/// Default key-value handles (open buckets, compare-and-swap handles) one
/// instance may hold at once.
pub const DEFAULT_MAX_HANDLES: u32 = 1000;
/// Default keys one batch operation may name.
pub const DEFAULT_MAX_BATCH: u32 = 1000;
/// The bucket a guest may open unless the app names others (Spin's default label).
pub const DEFAULT_BUCKET: &str = "default";
/// Longest bucket name: it becomes part of every key the backend stores.
const MAX_BUCKET_NAME: usize = 64;

/// When the embedded backend acknowledges a write (`durability`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Hash)]
pub enum Durability {
    /// Once the OS has it: it survives a crash or `kill -9` of wedge; a power cut
    /// or a crash of the machine may lose the writes of the last `sync_interval`
    /// (the file is synced that often), never the file's consistency.
    #[default]
    Os,
    /// Once an fsync has put it on disk: it survives a power cut too.
    Disk,
}

impl Durability {
    /// `os` or `disk`.
    pub fn parse(text: &str) -> Result<Durability, String> {
        match text {
            "os" => Ok(Durability::Os),
            "disk" => Ok(Durability::Disk),
            other => Err(format!(
                "`{other}` is not a durability: use `os` (a write is acknowledged once \
                 the OS has it) or `disk` (once it is on disk)"
            )),
        }
    }
}

impl fmt::Display for Durability {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Durability::Os => "os",
            Durability::Disk => "disk",
        })
    }
}

/// Where an app's keys live.
#[derive(Clone, PartialEq, Eq, Default)]
pub enum Backend {
    /// A crash-safe file per app in the data dir (the default).
    #[default]
    Embedded,
    /// A Redis or Valkey server (`redis://` or `rediss://`), keys prefixed by app.
    Redis(RedisUrl),
    /// No store: every `open` is refused.
    None,
    /// `env:NAME`: the backend is what wedge's environment variable NAME says when
    /// the app loads (a Redis URL with its password, from a Kubernetes Secret).
    Env(String),
}

impl Backend {
    /// `embedded`, `none`, a `redis://` / `rediss://` URL, or `env:NAME`.
    pub fn parse(text: &str) -> Result<Backend, String> {
        match text {
            "embedded" => Ok(Backend::Embedded),
            "none" => Ok(Backend::None),
            url if url.starts_with("redis://") || url.starts_with("rediss://") => {
                RedisUrl::parse(url).map(Backend::Redis)
            }
            named if named.starts_with("env:") => match &named[4..] {
                name if !name.is_empty() && !name.contains(['=', '\0']) => {
                    Ok(Backend::Env(name.to_string()))
                }
                _ => Err(format!("`{named}` names no environment variable")),
            },
            other => Err(format!(
                "`{other}` is not a key-value backend: use `embedded`, `none`, a \
                 `redis://HOST:PORT` / `rediss://HOST:PORT` URL, or `env:NAME`"
            )),
        }
    }

    /// The backend itself: for `env:NAME`, what the environment variable says now.
    pub fn resolve(&self) -> Result<Backend, String> {
        let Backend::Env(name) = self else {
            return Ok(self.clone());
        };
        let text = std::env::var(name)
            .map_err(|_| format!("`env:{name}`: the environment variable {name} is not set"))?;
        match Backend::parse(text.trim()) {
            Ok(Backend::Env(_)) => Err(format!("`env:{name}`: {name} names another variable")),
            Ok(backend) => Ok(backend),
            // Its text may be a URL with a password: not repeated.
            Err(_) => Err(format!(
                "`env:{name}`: {name} holds no key-value backend (embedded, none, \
                 redis://… or rediss://…)"
            )),
        }
    }
}

/// Never prints a password: configs and their errors end up in logs.
impl fmt::Display for Backend {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Backend::Embedded => f.write_str("embedded"),
            Backend::None => f.write_str("none"),
            Backend::Redis(url) => write!(f, "{url}"),
            Backend::Env(name) => write!(f, "env:{name}"),
        }
    }
}

impl fmt::Debug for Backend {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

/// A Redis URL as given (credentials included), shown without its password.
#[derive(Clone, PartialEq, Eq)]
pub struct RedisUrl(String);

impl RedisUrl {
    fn parse(text: &str) -> Result<RedisUrl, String> {
        let (_, rest) = text.split_once("://").unwrap_or_default();
        let authority = rest.split(['/', '?', '#']).next().unwrap_or_default();
        let host = authority.rsplit('@').next().unwrap_or_default();
        if host.is_empty() || host.starts_with(':') {
            return Err(format!(
                "`{}` names no host: write redis://HOST:PORT",
                RedisUrl(text.to_string())
            ));
        }
        Ok(RedisUrl(text.to_string()))
    }

    /// The URL with its credentials, to connect with.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for RedisUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let Some((scheme, rest)) = self.0.split_once("://") else {
            return f.write_str(&self.0);
        };
        match rest.split_once('@') {
            Some((user_info, host)) if user_info.contains(':') => {
                let user = user_info.split(':').next().unwrap_or_default();
                write!(f, "{scheme}://{user}:***@{host}")
            }
            _ => f.write_str(&self.0),
        }
    }
}

/// An app's key-value settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyValue {
    /// `backend`: where its keys live.
    pub backend: Backend,
    /// `durability`: when the embedded backend acknowledges a write.
    pub durability: Durability,
    /// `buckets`: the names its guest may `open`; `*` allows any name.
    pub buckets: Vec<String>,
    /// `max_keys`: keys kept, all buckets together.
    pub max_keys: u64,
    /// `max_key_size`: the longest key, in bytes.
    pub max_key_size: u64,
    /// `max_value_size`: the largest value, in bytes.
    pub max_value_size: u64,
    /// `max_bytes`: keys and values kept, in bytes, all buckets together.
    pub max_bytes: u64,
    /// `max_in_flight`: operations at once, all the app's instances together; more
    /// fail at once.
    pub max_in_flight: u32,
    /// `timeout`: how long one operation may take before it fails.
    pub timeout: Duration,
    /// `sync_interval`: how often an embedded file written with `durability = "os"`
    /// is synced to disk: the most a power cut may lose.
    pub sync_interval: Duration,
    /// `max_write_rate`: bytes of keys and values the app may write a second,
    /// averaged, all its instances together; more fail until it has written less.
    pub max_write_rate: u64,
    /// `max_handles`: key-value handles (open buckets, compare-and-swap handles)
    /// one instance may hold at once.
    pub max_handles: u32,
    /// `max_batch`: keys one batch operation (get-many, set-many, delete-many) may
    /// name.
    pub max_batch: u32,
    /// `ca`: a PEM file of the certificate authorities a `rediss://` server's
    /// certificate must chain to, instead of the well-known roots (a Redis behind a
    /// private CA).
    pub ca: Option<PathBuf>,
}

impl Default for KeyValue {
    fn default() -> Self {
        KeyValue {
            backend: Backend::default(),
            durability: Durability::default(),
            buckets: vec![DEFAULT_BUCKET.to_string()],
            max_keys: DEFAULT_MAX_KEYS,
            max_key_size: DEFAULT_MAX_KEY_SIZE,
            max_value_size: DEFAULT_MAX_VALUE_SIZE,
            max_bytes: DEFAULT_MAX_BYTES,
            max_in_flight: DEFAULT_MAX_IN_FLIGHT,
            timeout: DEFAULT_TIMEOUT,
            sync_interval: DEFAULT_SYNC_INTERVAL,
            max_write_rate: DEFAULT_MAX_WRITE_RATE,
            max_handles: DEFAULT_MAX_HANDLES,
            max_batch: DEFAULT_MAX_BATCH,
            ca: None,
        }
    }
}

impl KeyValue {
    /// Whether a guest may open the bucket `name`.
    pub fn allows_bucket(&self, name: &str) -> bool {
        self.buckets.iter().any(|b| b == "*" || b == name)
    }
}

/// A bucket name (`buckets`, `--kv-bucket`): letters, digits, `-`, `_` and `.`, at
/// most 64 of them, or `*` for any name. Backends put the name in their keys, so
/// nothing that could separate one from another may pass.
pub fn bucket_name(text: &str) -> Result<String, String> {
    let ok = text == "*"
        || (!text.is_empty()
            && text.len() <= MAX_BUCKET_NAME
            && text
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.')));
    if ok {
        Ok(text.to_string())
    } else {
        Err(format!(
            "`{text}` is not a bucket name: use letters, digits, `-`, `_` and `.`, at \
             most {MAX_BUCKET_NAME} characters (or `*` for any name)"
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backends_parse_and_never_show_a_password() {
        assert_eq!(Backend::parse("embedded"), Ok(Backend::Embedded));
        assert_eq!(Backend::parse("none"), Ok(Backend::None));
        let redis = Backend::parse("redis://app:s3cret@10.0.0.1:6379/2").unwrap();
        assert_eq!(redis.to_string(), "redis://app:***@10.0.0.1:6379/2");
        assert!(!format!("{redis:?}").contains("s3cret"));
        let Backend::Redis(url) = &redis else {
            panic!("not redis: {redis}")
        };
        assert_eq!(url.as_str(), "redis://app:s3cret@10.0.0.1:6379/2");
        assert!(Backend::parse("rediss://cache.example.net").is_ok());
        let no_host = Backend::parse("redis://:pw@:6379").unwrap_err();
        assert!(
            no_host.contains("names no host") && !no_host.contains("pw"),
            "{no_host}"
        );
        assert!(
            Backend::parse("sqlite")
                .unwrap_err()
                .contains("not a key-value backend")
        );
    }

    #[test]
    fn durabilities_parse_and_os_is_the_default() {
        assert_eq!(Durability::parse("os"), Ok(Durability::Os));
        assert_eq!(Durability::parse("disk"), Ok(Durability::Disk));
        assert_eq!(KeyValue::default().durability, Durability::Os);
        let why = Durability::parse("fsync").unwrap_err();
        assert!(why.contains("`fsync` is not a durability"), "{why}");
    }

    #[test]
    fn an_env_backend_is_what_its_variable_says() {
        assert!(
            Backend::parse("env:")
                .unwrap_err()
                .contains("names no environment variable")
        );
        let named = Backend::parse("env:WEDGE_TEST_KV_BACKEND_UNSET").unwrap();
        assert_eq!(named.to_string(), "env:WEDGE_TEST_KV_BACKEND_UNSET");
        let unset = named.resolve().unwrap_err();
        assert!(
            unset.contains("WEDGE_TEST_KV_BACKEND_UNSET is not set"),
            "{unset}"
        );
        // PATH is set and is no backend: named, its value (maybe a secret) not shown.
        let path = Backend::Env("PATH".into()).resolve().unwrap_err();
        assert!(
            path.contains("PATH holds no key-value backend") && !path.contains("/usr"),
            "{path}"
        );
        assert_eq!(Backend::Embedded.resolve(), Ok(Backend::Embedded));
    }

    #[test]
    fn bucket_names_are_plain_words_or_a_star() {
        for ok in ["default", "sessions", "a.b-c_1", "*"] {
            assert_eq!(bucket_name(ok).as_deref(), Ok(ok));
        }
        for bad in ["", "a:b", "a b", "a*", "é", &"x".repeat(65)] {
            assert!(bucket_name(bad).is_err(), "{bad:?}");
        }
        let settings = KeyValue::default();
        assert!(settings.allows_bucket("default") && !settings.allows_bucket("other"));
        let any = KeyValue {
            buckets: vec!["*".into()],
            ..KeyValue::default()
        };
        assert!(any.allows_bucket("other"));
    }
}
