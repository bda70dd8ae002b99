//! `[dev]`: how `wedge dev` builds a project that another toolchain builds (a
//! build command and the component it writes), and what it watches.

use std::path::{Path, PathBuf};

use crate::reader::{Doc, Field};

/// A `[dev]` table. Paths are resolved against the file's directory; a key left
/// out may still come from `wedge dev`'s flags.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DevConfig {
    /// `build`: a shell command run in the project's directory (`npm run build`).
    pub build: Option<String>,
    /// `component`: the component file the build writes.
    pub component: Option<PathBuf>,
    /// `watch`: the files and directories whose changes rebuild; `None` → the
    /// project's directory (without its outputs).
    pub watch: Option<Vec<PathBuf>>,
}

/// The `[dev]` table in `field`; problems go to `doc`.
pub(super) fn table(doc: &mut Doc, field: &Field, base: &Path) -> DevConfig {
    let Some(mut table) = field.table(doc) else {
        return DevConfig::default();
    };
    let build = table.take("build").and_then(|field| text(doc, &field));
    let component = table
        .take("component")
        .and_then(|field| text(doc, &field))
        .map(|path| base.join(path));
    let watch = table.take("watch").map(|field| {
        let items = field.array(doc).unwrap_or_default();
        if items.is_empty() {
            field.error(doc, "must name at least one file or directory");
        }
        items
            .iter()
            .filter_map(|item| text(doc, item).map(|path| base.join(path)))
            .collect()
    });
    table.finish(doc);
    DevConfig {
        build,
        component,
        watch,
    }
}

/// A string that is not empty.
fn text(doc: &mut Doc, field: &Field) -> Option<String> {
    let text = field.str(doc)?;
    if text.trim().is_empty() {
        field.error(doc, "must not be empty");
        return None;
    }
    Some(text.to_string())
}
