//! The Redis / Valkey backend: one multiplexed connection per server (redis-rs's
//! `ConnectionManager`, which reconnects by itself), shared by every app that names
//! the server. Each operation is one round trip: reads are plain commands, writes
//! Lua scripts that check the app's quotas and update its index and totals in the
//! same atomic step, so wedges sharing the server never overshoot a quota together
//! and an increment is Redis' own INCRBY.
//!
//! Every key of app APP is under `wedge:{APP}:` (the braces make Redis Cluster keep
//! an app's keys in one slot, as its scripts need):
//! - `wedge:{APP}:v:BUCKET:KEY` a value;
//! - `wedge:{APP}:i:BUCKET` the bucket's keys, a sorted set listed by `list-keys`;
//! - `wedge:{APP}:t` the app's totals, a hash: `keys`, `bytes`.
//!
//! App and bucket names cannot hold `:` or braces (the config refuses them), so no
//! app's prefix is another's.

use std::hash::{DefaultHasher, Hash, Hasher};
use std::sync::Arc;
use std::time::Duration;

use ::redis::aio::{ConnectionManager, ConnectionManagerConfig};
use ::redis::{AsyncCommands, Script, TlsCertificates};
use async_trait::async_trait;
use rustls::pki_types::CertificateDer;
use rustls::pki_types::pem::PemObject;

use super::{BackendChoice, KeyValue};

use super::backend::{Backend, Bucket, Failure, ListFrom, Outcome, Quota, batch_too_big};

/// How long a connection attempt may take; the operation's own `timeout` bounds
/// the whole.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);

pub(super) struct Redis {
    connection: ConnectionManager,
    scripts: Scripts,
    /// How long the connection waits for an answer (the apps' `timeout`).
    timeout: Duration,
}

struct Scripts {
    get_many: Script,
    set: Script,
    delete: Script,
    increment: Script,
    swap: Script,
}

fn value_key(bucket: Bucket<'_>, key: &str) -> String {
    format!("wedge:{{{}}}:v:{}:{key}", bucket.app, bucket.name)
}

fn index_key(bucket: Bucket<'_>) -> String {
    format!("wedge:{{{}}}:i:{}", bucket.app, bucket.name)
}

fn totals_key(bucket: Bucket<'_>) -> String {
    format!("wedge:{{{}}}:t", bucket.app)
}

fn failed(err: ::redis::RedisError) -> Failure {
    Failure::Backend(err.to_string())
}

impl Redis {
    /// A failed command: no answer within the timeout says so as the store's own
    /// timeout does, whichever fired first.
    fn failed(&self, err: ::redis::RedisError) -> Failure {
        if err.is_timeout() {
            return super::timed_out(self.timeout);
        }
        failed(err)
    }

    /// A script's failure: a refusal it made, or a failed command.
    fn refused(&self, err: ::redis::RedisError) -> Failure {
        if err.is_timeout() {
            return super::timed_out(self.timeout);
        }
        refused(err)
    }
}

/// A script's refusal (an error reply `WEDGEQUOTA why` or `WEDGEVALUE why`), else a
/// fault.
fn refused(err: ::redis::RedisError) -> Failure {
    let text = err.to_string();
    let after = |code: &str| {
        let at = text.find(code)? + code.len();
        Some(
            text[at..]
                .trim_start_matches([':', ' '])
                .trim_end()
                .to_string(),
        )
    };
    match (after("WEDGEQUOTA"), after("WEDGEVALUE")) {
        (Some(why), _) => Failure::Quota(why),
        (_, Some(why)) => Failure::Value(why),
        _ => Failure::Backend(text),
    }
}

/// The certificate authorities of an app's `ca` file (PEM), which a `rediss://`
/// server's certificate must chain to instead of the well-known roots.
#[derive(Clone)]
pub(super) struct TrustedCa(Arc<[u8]>);

impl TrustedCa {
    /// Tells files apart: apps whose `ca` files differ never share a connection.
    pub(super) fn fingerprint(&self) -> u64 {
        let mut hasher = DefaultHasher::new();
        self.0.hash(&mut hasher);
        hasher.finish()
    }
}

/// The `ca` file of `settings`, read and checked now (when the app loads): a file
/// of PEM certificates for a `rediss://` backend, or why not.
pub(super) fn trusted_ca(settings: &KeyValue) -> Result<Option<TrustedCa>, String> {
    let Some(path) = &settings.ca else {
        return Ok(None);
    };
    let tls = matches!(&settings.backend, BackendChoice::Redis(url) if url.as_str().starts_with("rediss://"));
    if !tls {
        return Err(format!(
            "{} is for a `rediss://` backend, not `{}`",
            path.display(),
            settings.backend
        ));
    }
    let pem =
        std::fs::read(path).map_err(|err| format!("cannot read {}: {err}", path.display()))?;
    let certs = CertificateDer::pem_slice_iter(&pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|err| {
            format!(
                "{} is not a PEM file of certificates: {err}",
                path.display()
            )
        })?;
    if certs.is_empty() {
        return Err(format!("{} holds no PEM certificate", path.display()));
    }
    let mut roots = rustls::RootCertStore::empty();
    let (_, unusable) = roots.add_parsable_certificates(certs);
    if unusable > 0 {
        return Err(format!(
            "{} holds {unusable} certificate(s) that are not usable as a CA",
            path.display()
        ));
    }
    Ok(Some(TrustedCa(pem.into())))
}

impl Redis {
    /// Connects to `url` (`redis://` or `rediss://`, trusting `ca` if given); an
    /// answer not back within `timeout` fails its command, and frees what it held
    /// in the connection.
    pub(super) async fn open(
        url: &str,
        timeout: Duration,
        ca: Option<&TrustedCa>,
    ) -> Outcome<Arc<dyn Backend>> {
        // `rediss://`: rustls with the provider wedge uses everywhere (set once).
        let _ = rustls::crypto::ring::default_provider().install_default();
        let client = match ca {
            None => ::redis::Client::open(url),
            Some(ca) => ::redis::Client::build_with_tls(
                url,
                TlsCertificates {
                    client_tls: None,
                    root_cert: Some(ca.0.to_vec()),
                },
            ),
        };
        let client = client.map_err(failed)?;
        let config = ConnectionManagerConfig::new()
            .set_connection_timeout(Some(CONNECT_TIMEOUT.min(timeout)))
            .set_response_timeout(Some(timeout))
            .set_number_of_retries(1);
        let connection = ConnectionManager::new_with_config(client, config)
            .await
            .map_err(failed)?;
        Ok(Arc::new(Redis {
            timeout,
            connection,
            scripts: Scripts {
                get_many: Script::new(GET_MANY),
                set: Script::new(&format!("{PRELUDE}{SET}")),
                delete: Script::new(&format!("{PRELUDE}{DELETE}")),
                increment: Script::new(&format!("{PRELUDE}{INCREMENT}")),
                swap: Script::new(&format!("{PRELUDE}{SWAP}")),
            },
        }))
    }

    fn connection(&self) -> ConnectionManager {
        self.connection.clone()
    }
}

/// Shared by the write scripts: `KEYS[1]` the totals, `KEYS[2]` the index; ARGV[1]
/// max_keys, ARGV[2] max_bytes. `admit(dkeys, dbytes)` refuses a write that adds
/// keys or bytes past a quota; `account` records it.
const PRELUDE: &str = r#"
local totals, index = KEYS[1], KEYS[2]
local max_keys, max_bytes = tonumber(ARGV[1]), tonumber(ARGV[2])
local keys = tonumber(redis.call('HGET', totals, 'keys') or '0')
local bytes = tonumber(redis.call('HGET', totals, 'bytes') or '0')
local function admit(dkeys, dbytes)
  if dkeys > 0 and keys + dkeys > max_keys then
    return redis.error_reply('WEDGEQUOTA the app keeps at most ' .. ARGV[1] .. ' keys (max_keys)')
  end
  if dbytes > 0 and bytes + dbytes > max_bytes then
    return redis.error_reply('WEDGEQUOTA the app keeps at most ' .. ARGV[2] .. ' bytes of keys and values (max_bytes)')
  end
  return nil
end
local function account(dkeys, dbytes)
  if dkeys ~= 0 then redis.call('HINCRBY', totals, 'keys', dkeys) end
  if dbytes ~= 0 then redis.call('HINCRBY', totals, 'bytes', dbytes) end
end
local function size(key, name)
  if redis.call('EXISTS', key) == 0 then return nil end
  return #name + redis.call('STRLEN', key)
end
"#;

/// KEYS the values' keys; ARGV[1] the most bytes they may come to: sized on the
/// server first, so that an answer past it is never sent (a read, no prelude).
const GET_MANY: &str = r#"
local bytes = 0
for i = 1, #KEYS do bytes = bytes + redis.call('STRLEN', KEYS[i]) end
if bytes > tonumber(ARGV[1]) then return redis.error_reply('WEDGEQUOTA batch') end
return redis.call('MGET', unpack(KEYS))
"#;

/// KEYS[3..] the values' keys; ARGV[3..] pairs of (key name, value). A key given
/// twice counts once, its last value winning.
const SET: &str = r#"
local last = {}
for i = 3, #KEYS do last[KEYS[i]] = i end
local dkeys, dbytes = 0, 0
for i = 3, #KEYS do
  if last[KEYS[i]] == i then
    local name, value = ARGV[2 * i - 3], ARGV[2 * i - 2]
    local old = size(KEYS[i], name)
    if old == nil then dkeys = dkeys + 1; old = 0 end
    dbytes = dbytes + #name + #value - old
  end
end
local refusal = admit(dkeys, dbytes)
if refusal then return refusal end
for i = 3, #KEYS do
  redis.call('SET', KEYS[i], ARGV[2 * i - 2])
  redis.call('ZADD', index, 0, ARGV[2 * i - 3])
end
account(dkeys, dbytes)
return 1
"#;

/// KEYS[3..] the values' keys; ARGV[3..] their key names.
const DELETE: &str = r#"
local dkeys, dbytes = 0, 0
for i = 3, #KEYS do
  local old = size(KEYS[i], ARGV[i])
  if old ~= nil then
    redis.call('DEL', KEYS[i])
    redis.call('ZREM', index, ARGV[i])
    dkeys = dkeys - 1
    dbytes = dbytes - old
  end
end
account(dkeys, dbytes)
return 1
"#;

/// KEYS[3] the value's key; ARGV[3] its name, ARGV[4] the delta. INCRBY does the
/// arithmetic (64-bit; Lua's numbers are doubles, so the sum is returned as the
/// text stored); a sum past a quota is undone before anyone can see it.
const INCREMENT: &str = r#"
local key, name = KEYS[3], ARGV[3]
local old = redis.call('GET', key)
local sum = redis.pcall('INCRBY', key, ARGV[4])
if type(sum) == 'table' and sum.err then
  return redis.error_reply('WEDGEVALUE the value is not a decimal number, or the sum overflows a 64-bit integer')
end
local text = redis.call('GET', key)
local dkeys, dbytes = 0, #name + #text
if old == false then dkeys = 1 else dbytes = dbytes - #name - #old end
local refusal = admit(dkeys, dbytes)
if refusal then
  if old == false then redis.call('DEL', key) else redis.call('SET', key, old) end
  return refusal
end
redis.call('ZADD', index, 0, name)
account(dkeys, dbytes)
return text
"#;

/// KEYS[3] the value's key; ARGV[3] its name, ARGV[4] the new value, ARGV[5] `1` if
/// a value is expected (then ARGV[6] is it) or `0` if the key is to be absent.
const SWAP: &str = r#"
local key, name, value = KEYS[3], ARGV[3], ARGV[4]
local old = redis.call('GET', key)
if ARGV[5] == '1' then
  if old == false or old ~= ARGV[6] then return 0 end
elseif old ~= false then
  return 0
end
local dkeys, dbytes = 0, #name + #value
if old == false then dkeys = 1 else dbytes = dbytes - #name - #old end
local refusal = admit(dkeys, dbytes)
if refusal then return refusal end
redis.call('SET', key, value)
redis.call('ZADD', index, 0, name)
account(dkeys, dbytes)
return 1
"#;

/// A write script's invocation: its keys (totals, index, then `values`) and
/// arguments (the quota, then `args`).
fn invocation<'s>(
    script: &'s Script,
    bucket: Bucket<'_>,
    quota: Quota,
) -> ::redis::ScriptInvocation<'s> {
    let mut invocation = script.key(totals_key(bucket));
    invocation
        .key(index_key(bucket))
        .arg(quota.max_keys)
        .arg(quota.max_bytes);
    invocation
}

#[async_trait]
impl Backend for Redis {
    async fn get(&self, bucket: Bucket<'_>, key: &str) -> Outcome<Option<Vec<u8>>> {
        let mut connection = self.connection();
        connection
            .get(value_key(bucket, key))
            .await
            .map_err(|e| self.failed(e))
    }

    async fn get_many(
        &self,
        bucket: Bucket<'_>,
        keys: &[String],
        max_bytes: u64,
    ) -> Outcome<Vec<Option<Vec<u8>>>> {
        if keys.is_empty() {
            return Ok(Vec::new());
        }
        let mut invocation = self.scripts.get_many.prepare_invoke();
        for key in keys {
            invocation.key(value_key(bucket, key));
        }
        invocation.arg(max_bytes);
        let mut connection = self.connection();
        invocation
            .invoke_async(&mut connection)
            .await
            .map_err(|e| match self.refused(e) {
                Failure::Quota(_) => batch_too_big(max_bytes),
                other => other,
            })
    }

    async fn exists(&self, bucket: Bucket<'_>, key: &str) -> Outcome<bool> {
        let mut connection = self.connection();
        connection
            .exists(value_key(bucket, key))
            .await
            .map_err(|e| self.failed(e))
    }

    async fn list_keys(
        &self,
        bucket: Bucket<'_>,
        from: ListFrom,
        limit: usize,
    ) -> Outcome<Vec<String>> {
        let mut connection = self.connection();
        let index = index_key(bucket);
        let mut command = ::redis::cmd("ZRANGE");
        command.arg(&index);
        match from {
            ListFrom::Start => command
                .arg("-")
                .arg("+")
                .arg("BYLEX")
                .arg("LIMIT")
                .arg(0)
                .arg(limit),
            ListFrom::After(key) => command
                .arg(format!("({key}"))
                .arg("+")
                .arg("BYLEX")
                .arg("LIMIT")
                .arg(0)
                .arg(limit),
            ListFrom::Offset(skip) => command
                .arg("-")
                .arg("+")
                .arg("BYLEX")
                .arg("LIMIT")
                .arg(skip.min(i64::MAX as u64))
                .arg(limit),
        };
        command
            .query_async(&mut connection)
            .await
            .map_err(|e| self.failed(e))
    }

    async fn set_many(
        &self,
        bucket: Bucket<'_>,
        pairs: Vec<(String, Vec<u8>)>,
        quota: Quota,
    ) -> Outcome<()> {
        if pairs.is_empty() {
            return Ok(());
        }
        let mut invocation = invocation(&self.scripts.set, bucket, quota);
        for (key, value) in &pairs {
            invocation
                .key(value_key(bucket, key))
                .arg(key)
                .arg(value.as_slice());
        }
        let mut connection = self.connection();
        invocation
            .invoke_async::<i64>(&mut connection)
            .await
            .map(drop)
            .map_err(|e| self.refused(e))
    }

    async fn delete_many(&self, bucket: Bucket<'_>, keys: Vec<String>) -> Outcome<()> {
        if keys.is_empty() {
            return Ok(());
        }
        let unlimited = Quota {
            max_keys: u64::MAX,
            max_bytes: u64::MAX,
        };
        let mut invocation = invocation(&self.scripts.delete, bucket, unlimited);
        for key in &keys {
            invocation.key(value_key(bucket, key)).arg(key);
        }
        let mut connection = self.connection();
        invocation
            .invoke_async::<i64>(&mut connection)
            .await
            .map(drop)
            .map_err(|e| self.refused(e))
    }

    async fn increment(
        &self,
        bucket: Bucket<'_>,
        key: String,
        delta: i64,
        quota: Quota,
    ) -> Outcome<i64> {
        let mut invocation = invocation(&self.scripts.increment, bucket, quota);
        invocation.key(value_key(bucket, &key)).arg(&key).arg(delta);
        let mut connection = self.connection();
        let sum: String = invocation
            .invoke_async(&mut connection)
            .await
            .map_err(|e| self.refused(e))?;
        sum.parse()
            .map_err(|_| Failure::Backend(format!("INCRBY stored `{sum}`")))
    }

    async fn swap(
        &self,
        bucket: Bucket<'_>,
        key: String,
        expected: Option<Vec<u8>>,
        value: Vec<u8>,
        quota: Quota,
    ) -> Outcome<bool> {
        let mut invocation = invocation(&self.scripts.swap, bucket, quota);
        invocation.key(value_key(bucket, &key)).arg(&key).arg(value);
        match expected {
            Some(expected) => invocation.arg(1).arg(expected),
            None => invocation.arg(0),
        };
        let mut connection = self.connection();
        let swapped: i64 = invocation
            .invoke_async(&mut connection)
            .await
            .map_err(|e| self.refused(e))?;
        Ok(swapped == 1)
    }

    /// SCAN for the app's prefix and UNLINK what it finds, a page at a time.
    async fn purge(&self, app: &str) -> Outcome<()> {
        let mut connection = self.connection();
        let pattern = format!("wedge:{{{app}}}:*");
        let mut cursor = 0u64;
        loop {
            let (next, keys): (u64, Vec<String>) = ::redis::cmd("SCAN")
                .arg(cursor)
                .arg("MATCH")
                .arg(&pattern)
                .arg("COUNT")
                .arg(1000)
                .query_async(&mut connection)
                .await
                .map_err(|e| self.failed(e))?;
            if !keys.is_empty() {
                ::redis::cmd("UNLINK")
                    .arg(keys)
                    .query_async::<()>(&mut connection)
                    .await
                    .map_err(|e| self.failed(e))?;
            }
            if next == 0 {
                return Ok(());
            }
            cursor = next;
        }
    }
}
