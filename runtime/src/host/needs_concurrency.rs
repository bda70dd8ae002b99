//! Which engine a component needs, told from its imports and exports before it is
//! compiled: a component that exports the WASI 0.3 handler, or imports what only the
//! engine with component-model concurrency links (WASI 0.3, Spin's async key-value:
//! `app::link`'s `p3` part), can only run there; any other wasi:http component may
//! run on the engine without (see `engine`). Deciding first compiles it once, where
//! it runs, rather than once for the engine it fails to link on and again.

use wasmparser::{Parser, Payload};

/// The export a p3 (WASI 0.3) HTTP handler provides; any 0.3.x is accepted.
pub(super) const HANDLER_P3: &str = "wasi:http/handler@0.3.";

/// Whether `component` (its bytes) can run only on the engine with component-model
/// concurrency. Bytes that do not parse are left for `Component::new` to report.
pub(crate) fn needs_concurrency(component: &[u8]) -> bool {
    // Only the outer component's imports and exports are the host's business; nested
    // modules and components start a level deeper and end with an `End` of their own.
    let mut depth = 0usize;
    for payload in Parser::new(0).parse_all(component) {
        let Ok(payload) = payload else {
            return false;
        };
        match payload {
            Payload::ModuleSection { .. } | Payload::ComponentSection { .. } => depth += 1,
            Payload::End(_) => depth = depth.saturating_sub(1),
            Payload::ComponentImportSection(imports) if depth == 0 => {
                for import in imports.into_iter().flatten() {
                    if linked_with_concurrency_only(import.name.name) {
                        return true;
                    }
                }
            }
            Payload::ComponentExportSection(exports) if depth == 0 => {
                for export in exports.into_iter().flatten() {
                    if export.name.name.starts_with(HANDLER_P3) {
                        return true;
                    }
                }
            }
            _ => {}
        }
    }
    false
}

/// An import wedge links only on the engine with concurrency: any WASI 0.3
/// interface, and Spin's `spin:key-value` (async functions).
fn linked_with_concurrency_only(import: &str) -> bool {
    let wasi_p3 = import.starts_with("wasi:") && import.contains("@0.3.");
    wasi_p3 || import.starts_with("spin:key-value/")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A component importing an (empty) instance as `import`, and exporting it again
    /// as `export`, encoded by hand and checked by wasmparser's validator.
    fn component(import: &str, export: Option<&str>) -> Vec<u8> {
        fn section(id: u8, payload: &[u8]) -> Vec<u8> {
            [&[id, payload.len() as u8][..], payload].concat()
        }
        fn name(text: &str) -> Vec<u8> {
            [&[0x00, text.len() as u8][..], text.as_bytes()].concat()
        }
        let mut bytes = b"\0asm\x0d\0\x01\0".to_vec();
        // One type: an instance type declaring nothing.
        bytes.extend(section(7, &[1, 0x42, 0]));
        // The import: an instance of type 0.
        bytes.extend(section(10, &[&[1][..], &name(import), &[0x05, 0]].concat()));
        if let Some(export) = export {
            // The export: instance 0, no type ascribed.
            bytes.extend(section(
                11,
                &[&[1][..], &name(export), &[0x05, 0, 0]].concat(),
            ));
        }
        wasmparser::Validator::new()
            .validate_all(&bytes)
            .expect("a valid component");
        bytes
    }

    #[test]
    fn wasi_0_2_imports_run_without_concurrency() {
        let p2 = component(
            "wasi:http/types@0.2.6",
            Some("wasi:http/incoming-handler@0.2.6"),
        );
        assert!(!needs_concurrency(&p2));
        assert!(!needs_concurrency(&component(
            "wasi:keyvalue/store@0.2.0-draft2",
            None
        )));
    }

    #[test]
    fn wasi_0_3_imports_and_spin_key_value_need_concurrency() {
        assert!(needs_concurrency(&component(
            "wasi:http/types@0.3.0-rc-2025-09-16",
            None
        )));
        assert!(needs_concurrency(&component(
            "spin:key-value/key-value@3.0.0",
            None
        )));
    }

    #[test]
    fn the_wasi_0_3_handler_export_needs_concurrency() {
        let p3 = component(
            "wasi:cli/stdout@0.2.6",
            Some("wasi:http/handler@0.3.0-rc-2025-09-16"),
        );
        assert!(needs_concurrency(&p3));
    }

    #[test]
    fn bytes_that_do_not_parse_are_left_to_the_compiler() {
        assert!(!needs_concurrency(b"\0asm\x0d\0\x01\0\x0a\x05"));
    }
}
