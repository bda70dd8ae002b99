//! How `wedge serve` and `wedge push` reach OCI registries: which may be reached over
//! plain HTTP, the largest component pulled, and the time a registry may take.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use clap::Args;

use super::value_parsers::parse_positive_duration;
use crate::host::limits::parse_size;
use crate::oci::{self, BlobCache, Registry};

#[derive(Args, Debug, Clone)]
#[command(next_help_heading = "OCI registries")]
pub struct RegistryArgs {
    /// A registry reached over plain HTTP instead of HTTPS (repeatable), as
    /// references write it (`host:port`). Loopback registries (localhost,
    /// 127.0.0.0/8, [::1]) always are.
    #[arg(long = "insecure-registry", value_name = "HOST[:PORT]")]
    insecure: Vec<String>,

    /// Largest component pulled from a registry; a larger one is refused.
    #[arg(long, value_name = "SIZE", default_value = oci::DEFAULT_MAX_SIZE, value_parser = parse_size)]
    registry_max_size: u64,

    /// Time to connect to a registry, and to wait for each read from it.
    #[arg(long, value_name = "DURATION", default_value = oci::DEFAULT_TIMEOUT,
          value_parser = parse_positive_duration::<Duration>)]
    registry_timeout: Duration,

    /// Time a whole pull from a registry (manifest and component) may take.
    #[arg(long, value_name = "DURATION", default_value = oci::DEFAULT_DEADLINE,
          value_parser = parse_positive_duration::<Duration>)]
    registry_deadline: Duration,
}

impl RegistryArgs {
    /// Registries as these flags say, caching pulls in `data_dir`.
    pub fn registry(&self, data_dir: &Path) -> Arc<Registry> {
        let settings = oci::Settings {
            insecure: self.insecure.clone(),
            max_size: self.registry_max_size,
            timeout: self.registry_timeout,
            deadline: self.registry_deadline,
        };
        Arc::new(Registry::new(settings, BlobCache::new(data_dir)))
    }
}
