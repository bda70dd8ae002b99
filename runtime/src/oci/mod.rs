//! Components in OCI registries: `oci://REGISTRY/REPOSITORY:TAG` or `@sha256:…`
//! references ([`Reference`]), pulled and verified by digest ([`Registry`]), kept
//! in the data dir by digest ([`BlobCache`]), pushed by `wedge push`.
//!
//! The artifact layout is the one the wasm ecosystem uses (`wkg oci push`, the CNCF
//! wasm OCI artifact): an OCI image manifest whose config is
//! `application/vnd.wasm.config.v0+json` and whose one layer is the component,
//! `application/wasm`.
//!
//! A tag is resolved to a manifest digest each time an app is loaded (start, reload,
//! deploy), and the component that digest names is what runs; a reference pinned to a
//! digest is served from the cache without asking the registry once pulled. Every
//! blob is checked against its digest when pulled and when read from the cache.

mod auth;
mod cache;
mod registry;

pub use auth::{PASSWORD_ENV, USER_ENV};
pub use cache::BlobCache;
pub use registry::{ComponentInfo, Pulled, Registry, Settings};
// References and digests are plain values the config parser reads too.
pub use wedge_config::oci::{Digest, Reference, SCHEME};

/// The manifest media type of a wasm artifact.
pub const MANIFEST_MEDIA_TYPE: &str = "application/vnd.oci.image.manifest.v1+json";
/// The config media type of a wasm artifact.
pub const WASM_CONFIG_MEDIA_TYPE: &str = "application/vnd.wasm.config.v0+json";
/// The media type of the layer holding the component.
pub const WASM_LAYER_MEDIA_TYPE: &str = "application/wasm";

/// Default of `--registry-max-size`: the largest component pulled.
pub const DEFAULT_MAX_SIZE: &str = "100MiB";
/// Default of `--registry-timeout`: to connect, and for each read.
pub const DEFAULT_TIMEOUT: &str = "30s";
/// Default of `--registry-deadline`: for a whole pull.
pub const DEFAULT_DEADLINE: &str = "5m";
