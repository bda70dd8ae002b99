//! How components the precompiled cache does not hold are compiled (`--compile`, or
//! `compile` in wedge.toml).

use std::fmt;
use std::str::FromStr;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Compile {
    /// `tiered`: by Winch, wasmtime's baseline compiler, and served at once; then by
    /// Cranelift in the background, whose code takes over.
    Tiered,
    /// `optimized`: by Cranelift before the app serves. The default.
    #[default]
    Optimized,
}

impl Compile {
    pub fn as_str(self) -> &'static str {
        match self {
            Compile::Tiered => "tiered",
            Compile::Optimized => "optimized",
        }
    }

    pub fn parse(text: &str) -> Result<Compile, String> {
        [Compile::Tiered, Compile::Optimized]
            .into_iter()
            .find(|mode| mode.as_str() == text)
            .ok_or_else(|| format!("`{text}` is no compile mode: `tiered` or `optimized`"))
    }
}

impl FromStr for Compile {
    type Err = String;

    fn from_str(text: &str) -> Result<Compile, String> {
        Compile::parse(text)
    }
}

impl fmt::Display for Compile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}
