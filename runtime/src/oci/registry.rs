//! Talking to a registry (through `oci-client`): pull a component's manifest and
//! layer, verify both by digest and keep them in the [`BlobCache`]; push a component
//! in the wasm OCI artifact layout.

use std::time::{Duration, SystemTime};

use anyhow::{Context, Result, anyhow, bail};
use futures_util::StreamExt;
use oci_client::client::{ClientConfig, ClientProtocol};
use oci_client::secrets::RegistryAuth;

use super::auth::{self, Credentials};
use super::cache::BlobCache;
use super::{Digest, Reference};
use super::{MANIFEST_MEDIA_TYPE, WASM_CONFIG_MEDIA_TYPE, WASM_LAYER_MEDIA_TYPE};

/// Largest manifest accepted: a wasm artifact's is well under 1 KiB.
const MAX_MANIFEST: usize = 1 << 20;

/// How registries are reached and what is accepted from them.
#[derive(Debug, Clone)]
pub struct Settings {
    /// `host[:port]` of registries reached over plain HTTP (besides loopback ones).
    pub insecure: Vec<String>,
    /// Largest component pulled, in bytes.
    pub max_size: u64,
    /// Time to connect to a registry, and to wait for each read from it.
    pub timeout: Duration,
    /// Time a whole pull (manifest and component) may take: a registry that keeps
    /// sending a little at a time must not hold a deploy (or the admin API, which
    /// deploys one at a time) for ever.
    pub deadline: Duration,
}

/// A component as pulled (or found in the cache).
pub struct Pulled {
    /// The manifest's digest: what a tag resolved to.
    pub manifest: Digest,
    /// The component's own digest (its layer's).
    pub component: Digest,
    pub wasm: Vec<u8>,
    /// Whether the registry was not asked (a pinned reference found in the cache).
    pub from_cache: bool,
}

/// What the wasm artifact's config says about the component (wkg writes these).
pub struct ComponentInfo {
    pub exports: Vec<String>,
    pub imports: Vec<String>,
}

/// Registries, as `Settings` say, with pulled blobs cached in the data dir.
pub struct Registry {
    settings: Settings,
    cache: BlobCache,
}

/// The component layer a manifest names.
#[derive(Debug, PartialEq, Eq)]
struct Layer {
    digest: Digest,
    size: u64,
}

impl Registry {
    pub fn new(settings: Settings, cache: BlobCache) -> Registry {
        Registry { settings, cache }
    }

    /// Pulls the component `reference` names for app `app` and logs what the
    /// reference resolved to. Errors name the reference.
    pub async fn fetch(&self, app: &str, reference: &Reference) -> Result<Pulled> {
        let deadline = self.settings.deadline;
        let pulled = tokio::time::timeout(deadline, self.pull(reference))
            .await
            .unwrap_or_else(|_| {
                Err(anyhow!(
                    "the pull took longer than --registry-deadline ({})",
                    humantime::format_duration(deadline)
                ))
            })
            .with_context(|| reference.to_string())?;
        tracing::info!(
            "app `{app}`: {reference} resolved to {} (component {}{})",
            pulled.manifest,
            pulled.component,
            if pulled.from_cache {
                ", from the cache"
            } else {
                ""
            }
        );
        Ok(pulled)
    }

    /// The component `reference` names: from the cache when the reference is pinned
    /// to a digest whose manifest and layer are cached, else from the registry.
    async fn pull(&self, reference: &Reference) -> Result<Pulled> {
        if let Some(pinned) = reference.digest()
            && let Some(pulled) = self.cached(pinned)
        {
            return Ok(pulled);
        }
        let client = self.client(reference)?;
        let image = client_reference(reference);
        let auth = registry_auth(reference)?;
        let (manifest, _) = client
            .pull_manifest_raw(&image, &auth, &[MANIFEST_MEDIA_TYPE])
            .await
            .map_err(|err| failed("fetching the manifest", &err))?;
        // oci-client reads a manifest whole before it can be measured (it offers no
        // capped read): a registry sending an endless one is bounded by the pull's
        // deadline in time only, not in memory. Registries are the operator's
        // choice; a capped manifest read would need wedge's own registry client.
        if manifest.len() > MAX_MANIFEST {
            bail!("its manifest is larger than {MAX_MANIFEST} bytes");
        }
        let manifest_digest = Digest::of(&manifest);
        if let Some(pinned) = reference.digest()
            && pinned != manifest_digest
        {
            bail!("the registry's manifest hashes to {manifest_digest}, not the pinned {pinned}");
        }
        let layer = wasm_layer(&manifest).map_err(|why| anyhow!("{why}"))?;
        let wasm = match self.cache.get(&layer.digest) {
            Some(wasm) => wasm,
            None => {
                let wasm = self.download(&client, &image, &layer).await?;
                self.cache.put(&layer.digest, &wasm)?;
                wasm
            }
        };
        self.cache.put(&manifest_digest, &manifest)?;
        Ok(Pulled {
            manifest: manifest_digest,
            component: layer.digest,
            wasm,
            from_cache: false,
        })
    }

    /// The component of the cached manifest `pinned`, if it and its layer are
    /// cached (each checked against its digest on reading).
    fn cached(&self, pinned: Digest) -> Option<Pulled> {
        let manifest = self.cache.get(&pinned)?;
        let layer = wasm_layer(&manifest).ok()?;
        let wasm = self.cache.get(&layer.digest)?;
        Some(Pulled {
            manifest: pinned,
            component: layer.digest,
            wasm,
            from_cache: true,
        })
    }

    /// The layer's bytes, at most `max_size` of them, checked against its digest.
    async fn download(
        &self,
        client: &oci_client::Client,
        image: &oci_client::Reference,
        layer: &Layer,
    ) -> Result<Vec<u8>> {
        let max = self.settings.max_size;
        let too_big = |size: u64| {
            anyhow!("the component is {size} bytes, more than --registry-max-size ({max} bytes)")
        };
        if layer.size > max {
            return Err(too_big(layer.size));
        }
        let digest = layer.digest.to_string();
        let mut stream = client
            .pull_blob_stream(image, digest.as_str())
            .await
            .map_err(|err| failed("fetching the component", &err))?;
        if let Some(length) = stream.content_length.filter(|&length| length > max) {
            return Err(too_big(length));
        }
        let mut wasm = Vec::with_capacity(layer.size.min(max) as usize);
        while let Some(chunk) = stream.next().await {
            let chunk = chunk.map_err(|err| failed("fetching the component", &err))?;
            if (wasm.len() + chunk.len()) as u64 > max {
                return Err(too_big((wasm.len() + chunk.len()) as u64));
            }
            wasm.extend_from_slice(&chunk);
        }
        let actual = Digest::of(&wasm);
        if actual != layer.digest {
            bail!(
                "the component's bytes hash to {actual}, not the {} its manifest names",
                layer.digest
            );
        }
        Ok(wasm)
    }

    /// Pushes `wasm` (a component described by `info`) to `reference` as a wasm OCI
    /// artifact: an OCI manifest with a `application/vnd.wasm.config.v0+json` config
    /// and one `application/wasm` layer. Returns the manifest's digest.
    pub async fn push(
        &self,
        reference: &Reference,
        wasm: Vec<u8>,
        info: &ComponentInfo,
    ) -> Result<Digest> {
        let client = self.client(reference)?;
        let image = client_reference(reference);
        let auth = registry_auth(reference)?;
        client
            .store_auth_if_needed(image.resolve_registry(), &auth)
            .await;
        let layer = Digest::of(&wasm);
        let config = serde_json::to_vec(&serde_json::json!({
            "created": humantime::format_rfc3339_seconds(SystemTime::now()).to_string(),
            "architecture": "wasm",
            "os": "wasip2",
            "layerDigests": [layer.to_string()],
            "component": {
                "exports": info.exports,
                "imports": info.imports,
                "target": null,
            },
        }))?;
        let config_digest = Digest::of(&config);
        let manifest = serde_json::to_vec(&serde_json::json!({
            "schemaVersion": 2,
            "mediaType": MANIFEST_MEDIA_TYPE,
            "config": {
                "mediaType": WASM_CONFIG_MEDIA_TYPE,
                "digest": config_digest.to_string(),
                "size": config.len(),
            },
            "layers": [{
                "mediaType": WASM_LAYER_MEDIA_TYPE,
                "digest": layer.to_string(),
                "size": wasm.len(),
            }],
        }))?;
        client
            .push_blob(&image, wasm, &layer.to_string())
            .await
            .map_err(|err| failed("pushing the component", &err))?;
        client
            .push_blob(&image, config, &config_digest.to_string())
            .await
            .map_err(|err| failed("pushing the config", &err))?;
        let manifest_digest = Digest::of(&manifest);
        client
            .push_manifest_raw(
                &image,
                manifest,
                http::HeaderValue::from_static(MANIFEST_MEDIA_TYPE),
            )
            .await
            .map_err(|err| failed("pushing the manifest", &err))?;
        Ok(manifest_digest)
    }

    /// A client for `reference`'s registry: plain HTTP for a loopback registry or
    /// one named insecure, HTTPS (rustls, the system's roots) otherwise.
    fn client(&self, reference: &Reference) -> Result<oci_client::Client> {
        // oci-client's rustls has no crypto provider of its own: use wedge's (ring).
        let _ = rustls::crypto::ring::default_provider().install_default();
        let plain = reference.is_loopback()
            || self
                .settings
                .insecure
                .iter()
                .any(|insecure| insecure.eq_ignore_ascii_case(reference.registry()));
        let config = ClientConfig {
            protocol: if plain {
                ClientProtocol::Http
            } else {
                ClientProtocol::Https
            },
            connect_timeout: Some(self.settings.timeout),
            read_timeout: Some(self.settings.timeout),
            // A component artifact is one manifest: an image index is refused.
            platform_resolver: None,
            ..ClientConfig::default()
        };
        oci_client::Client::try_from(config).map_err(|err| failed("setting up the client", &err))
    }
}

/// `reference` as oci-client names it (by digest when pinned).
fn client_reference(reference: &Reference) -> oci_client::Reference {
    let (registry, repository) = (
        reference.registry().to_string(),
        reference.repository().to_string(),
    );
    match (reference.digest(), reference.tag()) {
        (Some(digest), _) => {
            oci_client::Reference::with_digest(registry, repository, digest.to_string())
        }
        (None, tag) => {
            oci_client::Reference::with_tag(registry, repository, tag.unwrap_or("latest").into())
        }
    }
}

fn registry_auth(reference: &Reference) -> Result<RegistryAuth> {
    Ok(match auth::credentials(reference.registry())? {
        Credentials::Anonymous => RegistryAuth::Anonymous,
        Credentials::Basic { user, password } => RegistryAuth::Basic(user, password),
    })
}

/// `what` failed, with every cause of `err` (e.g. the refused connection).
fn failed(what: &str, err: &(dyn std::error::Error + 'static)) -> anyhow::Error {
    let mut causes = vec![err.to_string()];
    let mut source = err.source();
    while let Some(cause) = source {
        let text = cause.to_string();
        if !causes.iter().any(|c| c.contains(&text)) {
            causes.push(text);
        }
        source = cause.source();
    }
    anyhow!("{what} failed: {}", causes.join(": "))
}

/// The one `application/wasm` layer of `manifest`; else why it is not a wasm
/// component artifact.
fn wasm_layer(manifest: &[u8]) -> Result<Layer, String> {
    let manifest: serde_json::Value = serde_json::from_slice(manifest)
        .map_err(|err| format!("its manifest is not JSON: {err}"))?;
    let media_type = manifest["mediaType"]
        .as_str()
        .unwrap_or(MANIFEST_MEDIA_TYPE);
    if media_type != MANIFEST_MEDIA_TYPE {
        return Err(format!(
            "its manifest is `{media_type}`, not an OCI image manifest holding a component"
        ));
    }
    let layers = manifest["layers"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default();
    let wasm: Vec<&serde_json::Value> = layers
        .iter()
        .filter(|layer| layer["mediaType"] == WASM_LAYER_MEDIA_TYPE)
        .collect();
    let [layer] = wasm.as_slice() else {
        let types: Vec<&str> = layers
            .iter()
            .map(|layer| layer["mediaType"].as_str().unwrap_or("?"))
            .collect();
        return Err(format!(
            "not a wasm component artifact: it needs one `{WASM_LAYER_MEDIA_TYPE}` layer, \
             its layers are [{}]",
            types.join(", ")
        ));
    };
    let digest = layer["digest"]
        .as_str()
        .ok_or("its component layer has no digest")
        .and_then(|text| {
            Digest::parse(text).map_err(|_| "its component layer's digest is not sha256")
        })
        .map_err(str::to_string)?;
    let size = layer["size"]
        .as_u64()
        .ok_or("its component layer has no size")?;
    Ok(Layer { digest, size })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn manifest(layers: serde_json::Value) -> Vec<u8> {
        serde_json::to_vec(&serde_json::json!({
            "schemaVersion": 2,
            "mediaType": MANIFEST_MEDIA_TYPE,
            "config": {"mediaType": WASM_CONFIG_MEDIA_TYPE, "digest": "sha256:00", "size": 2},
            "layers": layers,
        }))
        .unwrap()
    }

    #[test]
    fn finds_the_one_wasm_layer() {
        let digest = Digest::of(b"wasm");
        let layers = serde_json::json!([
            {"mediaType": WASM_LAYER_MEDIA_TYPE, "digest": digest.to_string(), "size": 4},
        ]);
        assert_eq!(wasm_layer(&manifest(layers)), Ok(Layer { digest, size: 4 }));
    }

    #[test]
    fn refuses_what_is_not_one_component() {
        let digest = Digest::of(b"wasm").to_string();
        let tar = "application/vnd.oci.image.layer.v1.tar+gzip";
        let cases = [
            (
                serde_json::json!([{"mediaType": tar, "digest": digest, "size": 1}]),
                tar,
            ),
            (serde_json::json!([]), "needs one `application/wasm` layer"),
            (
                serde_json::json!([
                    {"mediaType": WASM_LAYER_MEDIA_TYPE, "digest": digest, "size": 1},
                    {"mediaType": WASM_LAYER_MEDIA_TYPE, "digest": digest, "size": 1},
                ]),
                "needs one",
            ),
            (
                serde_json::json!([{"mediaType": WASM_LAYER_MEDIA_TYPE, "digest": "md5:x", "size": 1}]),
                "not sha256",
            ),
        ];
        for (layers, why) in cases {
            let err = wasm_layer(&manifest(layers.clone())).unwrap_err();
            assert!(err.contains(why), "{layers}: {err}");
        }
        let index = br#"{"mediaType": "application/vnd.oci.image.index.v1+json", "manifests": []}"#;
        assert!(wasm_layer(index).unwrap_err().contains("image.index"));
        assert!(wasm_layer(b"<html>").unwrap_err().contains("not JSON"));
    }

    #[test]
    fn a_pinned_reference_is_served_from_the_cache_only_if_both_blobs_verify() {
        let dir = std::env::temp_dir().join(format!("wedge-oci-registry-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let cache = BlobCache::new(&dir);
        let wasm = b"\0asm component".to_vec();
        let layer = Digest::of(&wasm);
        let layers = serde_json::json!([
            {"mediaType": WASM_LAYER_MEDIA_TYPE, "digest": layer.to_string(), "size": wasm.len()},
        ]);
        let manifest = manifest(layers);
        let pinned = Digest::of(&manifest);
        let settings = Settings {
            insecure: Vec::new(),
            max_size: 1 << 20,
            timeout: Duration::from_secs(1),
            deadline: Duration::from_secs(1),
        };
        let registry = Registry::new(settings, cache.clone());
        assert!(registry.cached(pinned).is_none(), "nothing cached yet");
        cache.put(&pinned, &manifest).unwrap();
        assert!(
            registry.cached(pinned).is_none(),
            "the layer is not cached yet"
        );
        cache.put(&layer, &wasm).unwrap();
        let pulled = registry.cached(pinned).unwrap();
        assert_eq!((pulled.manifest, pulled.component), (pinned, layer));
        assert_eq!(pulled.wasm, wasm);
        assert!(pulled.from_cache);
        // A component changed on disk is not served.
        std::fs::write(cache.path(&layer), b"\0asm other").unwrap();
        assert!(registry.cached(pinned).is_none());
        let _ = std::fs::remove_dir_all(dir);
    }
}
