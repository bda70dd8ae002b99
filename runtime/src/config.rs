//! `wedge.toml` and the admin API's app settings: the parser and its types live in
//! the wedge-config crate (no wasmtime, so it builds for fuzzing in seconds).

pub use wedge_config::{
    AdminConfig, AppConfig, ComponentSource, Config, ConfigError, ConfigErrors, PemFiles,
    TlsConfig, check_app_name, load, parse, parse_app, parse_dev,
};
