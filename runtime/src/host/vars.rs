//! The values an app hands its guest: environment variables (wasi:cli/environment)
//! and config values (wasi:config/store). Nothing of the host's own environment is
//! ever passed on. Built once per app; each request's store shares them.

use std::collections::BTreeMap;
use std::sync::Arc;

use wasmtime_wasi_config::WasiConfigVariables;

/// An app's environment variables and config values (both empty by default).
#[derive(Clone, Default)]
pub struct GuestVars {
    pub(crate) env: Arc<[(String, String)]>,
    pub(crate) config: Arc<WasiConfigVariables>,
}

impl GuestVars {
    pub(crate) fn set_env(&mut self, env: impl IntoIterator<Item = (String, String)>) {
        self.env = last_wins(env).into_iter().collect();
    }

    pub(crate) fn set_config(&mut self, config: impl IntoIterator<Item = (String, String)>) {
        self.config = Arc::new(last_wins(config).into_iter().collect());
    }
}

/// One entry per key, the last given winning: WASI would otherwise show a guest
/// a repeated environment variable twice.
fn last_wins(pairs: impl IntoIterator<Item = (String, String)>) -> BTreeMap<String, String> {
    pairs.into_iter().collect()
}
