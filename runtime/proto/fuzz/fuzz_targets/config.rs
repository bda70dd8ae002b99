//! The config parser: any text, read as a whole `wedge.toml`, as a deployed app's
//! settings (with and without an uploaded component) and as a guest crate's
//! `Cargo.toml` (its `[package.metadata.wedge]`), comes out a config or errors shown
//! one per line (`FILE:LINE: key: message`), each on a line of the text; never a panic.
//! No disk IO: `parse` and `parse_app` check no files (only `load` reads them).

#![no_main]

use std::path::{Path, PathBuf};

use libfuzzer_sys::fuzz_target;
use wedge_config::ConfigErrors;

fuzz_target!(|data: &[u8]| {
    // wedge reads its config as UTF-8; lossy so that every input reaches the parser.
    let text = String::from_utf8_lossy(data);
    if let Err(errors) = wedge_config::parse(&text, Path::new("wedge.toml")) {
        check(&text, &errors);
    }
    for uploaded in [None, Some(PathBuf::from("/data/app.wasm"))] {
        if let Err(errors) = wedge_config::parse_app(&text, "settings", "app", uploaded) {
            check(&text, &errors);
        }
    }
    if let Err(errors) = wedge_config::parse_guest_crate(&text, "Cargo.toml") {
        check(&text, &errors);
    }
});

/// A rejection says why, one line an error, at lines the text has.
fn check(text: &str, errors: &ConfigErrors) {
    assert!(!errors.errors().is_empty(), "rejected without a reason");
    let shown = errors.to_string();
    assert_eq!(shown.lines().count(), errors.errors().len(), "{shown}");
    let last_line = text.lines().count() + 1;
    for line in errors.errors().iter().filter_map(|error| error.line) {
        assert!((1..=last_line).contains(&line), "line {line}: {shown}");
    }
}
