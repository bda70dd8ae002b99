//! Core wasm modules made into components when they are loaded. Toolchains that
//! target WASI preview 1 (`wasm32-wasip1`: Rust, C and Zig through wasi-sdk, Go,
//! TinyGo, older SDKs) produce core modules; wedge runs components. A module that
//! embeds a wasi:http world (wit-bindgen's `component-type` custom sections) becomes
//! a `wasi:http/proxy` component with the preview 1 *reactor* adapter, as
//! `wasm-tools component new --adapt` would make it; a WAGI program (a command module
//! with a `main`) a `wasi:cli/command` with the *command* adapter. Done once per load:
//! the result is compiled and cached like any component, keyed by the module's own
//! bytes and the adapter's.

use anyhow::{Context, Result, bail};
use wasi_preview1_component_adapter_provider::{
    WASI_SNAPSHOT_PREVIEW1_ADAPTER_NAME, WASI_SNAPSHOT_PREVIEW1_COMMAND_ADAPTER,
    WASI_SNAPSHOT_PREVIEW1_REACTOR_ADAPTER,
};
use wit_component::ComponentEncoder;

/// What a `.wasm` file holds, told by its header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Binary {
    Component,
    Module,
}

impl Binary {
    /// What `wasm` is, or why it is not WebAssembly.
    pub(crate) fn of(wasm: &[u8]) -> Result<Binary> {
        const MAGIC: &[u8] = b"\0asm";
        if wasm.len() < 8 || &wasm[..4] != MAGIC {
            bail!("not a WebAssembly file (no `\\0asm` header)");
        }
        // Bytes 4..8: a core module has version 1 and layer 0; a component has layer 1.
        Ok(if wasm[6..8] == [0, 0] {
            Binary::Module
        } else {
            Binary::Component
        })
    }
}

/// The preview 1 adapter a module is componentized with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Adapter {
    /// For a module that exports a world's functions (a wasi:http handler).
    Reactor,
    /// For a program with a `main` (`_start`), which it runs as `wasi:cli/run` (WAGI).
    Command,
}

impl Adapter {
    fn bytes(self) -> &'static [u8] {
        match self {
            Adapter::Reactor => WASI_SNAPSHOT_PREVIEW1_REACTOR_ADAPTER,
            Adapter::Command => WASI_SNAPSHOT_PREVIEW1_COMMAND_ADAPTER,
        }
    }

    /// How the log names it.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Adapter::Reactor => "reactor",
            Adapter::Command => "command",
        }
    }

    /// What, besides a module's bytes, makes the component it becomes: the
    /// precompiled cache keys the result by both.
    pub(crate) fn identity(self) -> &'static [u8] {
        self.bytes()
    }
}

/// Whether `module` embeds a component world (wit-bindgen's `component-type:…`
/// custom sections): it says what it imports and exports, so the adapter can make a
/// component of it.
pub(crate) fn embeds_world(module: &[u8]) -> Result<bool> {
    for payload in wasmparser::Parser::new(0).parse_all(module) {
        let payload = payload.context("not a valid WebAssembly module")?;
        if let wasmparser::Payload::CustomSection(section) = payload
            && section.name().starts_with("component-type")
        {
            return Ok(true);
        }
    }
    Ok(false)
}

/// The component `module` becomes with `adapter` (validated).
pub(crate) fn componentize(module: &[u8], adapter: Adapter) -> Result<Vec<u8>> {
    ComponentEncoder::default()
        .module(module)
        .context("reading the module's embedded component world")?
        .adapter(WASI_SNAPSHOT_PREVIEW1_ADAPTER_NAME, adapter.bytes())
        .context("loading the WASI preview 1 adapter")?
        .validate(true)
        .encode()
        .context("making a component of the module")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The smallest module: the header alone.
    const EMPTY_MODULE: &[u8] = b"\0asm\x01\0\0\0";

    #[test]
    fn the_header_tells_modules_components_and_the_rest_apart() {
        assert_eq!(Binary::of(EMPTY_MODULE).unwrap(), Binary::Module);
        assert_eq!(Binary::of(b"\0asm\x0d\0\x01\0").unwrap(), Binary::Component);
        let err = Binary::of(b"#!/bin/sh\n").unwrap_err();
        assert!(err.to_string().contains("not a WebAssembly file"), "{err}");
    }

    #[test]
    fn only_component_type_sections_embed_a_world() {
        assert!(!embeds_world(EMPTY_MODULE).unwrap());
        let with_section = |name: &str| {
            let mut module = EMPTY_MODULE.to_vec();
            // A custom section (id 0): its size, then the name's length and the name.
            module.push(0);
            module.push(name.len() as u8 + 1);
            module.push(name.len() as u8);
            module.extend_from_slice(name.as_bytes());
            module
        };
        assert!(embeds_world(&with_section("component-type:wit-bindgen:0.57:x")).unwrap());
        assert!(!embeds_world(&with_section("producers")).unwrap());
        assert!(
            embeds_world(b"\0asm\x01\0\0\0\x01").is_err(),
            "a truncated section"
        );
    }
}
