//! What a guest crate's build reads: every path package cargo builds it from (the
//! crate, and its path dependencies — the SDK, when the crate uses it by path), each a
//! tree but for cargo's output (`target/`) and hidden entries other than `.cargo`; and
//! the workspace's manifest and lock file when the workspace is elsewhere.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use anyhow::{Context, Result};

use super::tree::Tree;

/// The packages cargo builds `crate_dir` from, as `cargo metadata` says without the
/// network or a change to the lock file; just `crate_dir` when it cannot (no lock
/// file yet, a broken manifest), with false.
pub(super) fn resolve(crate_dir: &Path) -> (Tree, bool) {
    match from_cargo(crate_dir) {
        Ok(tree) => (tree, true),
        Err(err) => {
            tracing::debug!("watching {} alone: {err:#}", crate_dir.display());
            (
                crate_tree(vec![crate_dir.to_path_buf()], Vec::new(), None, crate_dir),
                false,
            )
        }
    }
}

/// A crate's tree: `roots` and `files`, less `target_dir`; `workspace` holds the
/// lock file.
fn crate_tree(
    roots: Vec<PathBuf>,
    files: Vec<PathBuf>,
    target_dir: Option<PathBuf>,
    workspace: &Path,
) -> Tree {
    Tree {
        roots,
        files,
        outputs: target_dir.into_iter().collect(),
        skipped_at_top: &["target"],
        skipped_anywhere: &[],
        hidden_kept: &[".cargo"],
        written_by_build: Some(workspace.join("Cargo.lock")),
        manifest: Some("Cargo.toml"),
    }
}

fn from_cargo(crate_dir: &Path) -> Result<Tree> {
    let target = crate::cli::guest_build::guest_crate(crate_dir)?.target;
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let output = Command::new(cargo)
        .args(["metadata", "--format-version", "1", "--locked", "--offline"])
        .args(["--filter-platform", target.as_str()])
        .arg("--manifest-path")
        .arg(crate_dir.join("Cargo.toml"))
        .current_dir(crate_dir)
        .stdin(Stdio::null())
        .output()
        .context("running cargo metadata")?;
    anyhow::ensure!(
        output.status.success(),
        "cargo metadata: {}",
        String::from_utf8_lossy(&output.stderr).trim()
    );
    let metadata: serde_json::Value =
        serde_json::from_slice(&output.stdout).context("reading cargo metadata")?;
    from_metadata(crate_dir, &metadata)
}

fn from_metadata(crate_dir: &Path, metadata: &serde_json::Value) -> Result<Tree> {
    let path = |value: &serde_json::Value| value.as_str().map(PathBuf::from);
    let workspace = path(&metadata["workspace_root"]).context("no workspace_root")?;
    let mut roots = vec![crate_dir.to_path_buf()];
    for package in metadata["packages"].as_array().context("no packages")? {
        // Path packages have no source (registry, git).
        if !package["source"].is_null() {
            continue;
        }
        let manifest = path(&package["manifest_path"]).context("no manifest_path")?;
        if let Some(dir) = manifest.parent() {
            roots.push(dir.to_path_buf());
        }
    }
    // A package inside another is watched with it.
    roots.sort();
    roots.dedup_by(|inner, outer| inner.starts_with(outer));
    let files = [workspace.join("Cargo.toml"), workspace.join("Cargo.lock")]
        .into_iter()
        .filter(|file| !roots.iter().any(|root| file.starts_with(root)))
        .collect();
    let target_dir = path(&metadata["target_directory"]);
    Ok(crate_tree(roots, files, target_dir, &workspace))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_tree_is_the_path_packages_and_the_workspace_files_outside_them() {
        let metadata = serde_json::json!({
            "workspace_root": "/ws",
            "target_directory": "/ws/target",
            "packages": [
                {"source": null, "manifest_path": "/ws/greeter/Cargo.toml"},
                {"source": null, "manifest_path": "/ws/greeter/inner/Cargo.toml"},
                {"source": null, "manifest_path": "/sdk/Cargo.toml"},
                {"source": "registry+https://github.com/rust-lang/crates.io-index",
                 "manifest_path": "/home/.cargo/registry/src/x/http-1.0.0/Cargo.toml"},
            ],
        });
        let tree = from_metadata(Path::new("/ws/greeter"), &metadata).unwrap();
        assert_eq!(
            tree.roots,
            [PathBuf::from("/sdk"), PathBuf::from("/ws/greeter")]
        );
        assert_eq!(
            tree.files,
            [
                PathBuf::from("/ws/Cargo.toml"),
                PathBuf::from("/ws/Cargo.lock")
            ]
        );
        assert_eq!(tree.outputs, [PathBuf::from("/ws/target")]);
        assert_eq!(
            tree.written_by_build.as_deref(),
            Some(Path::new("/ws/Cargo.lock"))
        );
    }

    #[test]
    fn sources_of_every_root_belong_cargo_output_and_editor_scratch_do_not() {
        let tree = crate_tree(
            vec!["/work/greeter".into(), "/sdk".into()],
            vec!["/ws/Cargo.toml".into(), "/ws/Cargo.lock".into()],
            Some("/ws/target".into()),
            Path::new("/ws"),
        );
        for source in [
            "/work/greeter/src/lib.rs",
            "/work/greeter/Cargo.toml",
            "/work/greeter/build.rs",
            "/work/greeter/.cargo/config.toml",
            "/work/greeter/wit/world.wit",
            "/work/greeter/assets/new/page.html",
            "/work/greeter/src/target/mod.rs",
            "/sdk/src/request.rs",
            "/ws/Cargo.lock",
        ] {
            assert!(tree.belongs(Path::new(source)), "{source}");
        }
        for other in [
            "/work/greeter/target/release/greeter.wasm",
            "/ws/target/debug/x",
            "/work/greeter/src/.lib.rs.swp",
            "/work/greeter/src/lib.rs~",
            "/work/greeter/src/4913",
            "/work/greeter/src/.#lib.rs",
            "/work/greeter/src/#lib.rs#",
            "/work/greeter/src/lib.rs___jb_tmp___",
            "/work/greeter/.git/index",
            "/ws/README.md",
            "/elsewhere/src/lib.rs",
        ] {
            assert!(!tree.belongs(Path::new(other)), "{other}");
        }
        assert!(tree.is_manifest(Path::new("/sdk/Cargo.toml")));
        assert!(tree.is_manifest(Path::new("/ws/Cargo.lock")));
        assert!(!tree.is_manifest(Path::new("/sdk/src/lib.rs")));
    }
}
