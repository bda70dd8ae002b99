//! `[package.metadata.wedge]` in a guest crate's `Cargo.toml`: what `wedge serve DIR`
//! and `wedge dev` build the crate for. Cargo ignores the table; every other key of
//! the manifest is cargo's, so only this table is checked.

use std::fmt;

use toml::de::DeTable;

use crate::executor::Executor;
use crate::reader::{Doc, Table};

/// The target a guest crate is built for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum WasmTarget {
    /// A component (`wasm32-wasip2`): the default.
    #[default]
    Wasip2,
    /// A core module (`wasm32-wasip1`), made a component when it is loaded.
    Wasip1,
}

impl WasmTarget {
    pub fn as_str(self) -> &'static str {
        match self {
            WasmTarget::Wasip2 => "wasm32-wasip2",
            WasmTarget::Wasip1 => "wasm32-wasip1",
        }
    }

    fn parse(text: &str) -> Result<WasmTarget, String> {
        [WasmTarget::Wasip2, WasmTarget::Wasip1]
            .into_iter()
            .find(|target| target.as_str() == text)
            .ok_or_else(|| {
                format!("`{text}` is not a target wedge builds: `wasm32-wasip2` or `wasm32-wasip1`")
            })
    }
}

impl fmt::Display for WasmTarget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What a guest crate's `[package.metadata.wedge]` says (its defaults without one).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct GuestCrate {
    /// `target`; `wasm32-wasip1` by default for a WAGI program.
    pub target: WasmTarget,
    /// `executor`: how the app it builds runs.
    pub executor: Executor,
}

/// The `[package.metadata.wedge]` of the manifest in `root`.
pub(super) fn guest_crate(doc: &mut Doc, root: &DeTable) -> GuestCrate {
    let mut table = Table::new(String::new(), 0..0, root);
    // Cargo checks everything else; a `package` that is not a table is its to refuse.
    for name in ["package", "metadata", "wedge"] {
        let Some(field) = table.take(name) else {
            return GuestCrate::default();
        };
        let Some(inner) = field.table(doc) else {
            return GuestCrate::default();
        };
        table = inner;
    }
    let target = table
        .take("target")
        .and_then(|f| f.parse(doc, WasmTarget::parse));
    let executor = table
        .take("executor")
        .and_then(|f| f.parse(doc, Executor::parse))
        .unwrap_or_default();
    table.finish(doc);
    // A WAGI program is a WASI preview 1 command module.
    let for_executor = match executor {
        Executor::WasiHttp => WasmTarget::Wasip2,
        Executor::Wagi => WasmTarget::Wasip1,
    };
    GuestCrate {
        target: target.unwrap_or(for_executor),
        executor,
    }
}
