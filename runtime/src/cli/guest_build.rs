//! Builds a guest crate directory into a component (or a module wedge makes one)
//! with cargo, for the target its `[package.metadata.wedge]` names.

use std::io::{BufRead, BufReader, IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use anyhow::{Context, Result, bail};

use wedge_config::guest_crate::GuestCrate;

use crate::host::{Executor, ansi};

/// A component (or module) built from a guest crate.
pub struct Built {
    pub name: String,
    pub wasm: PathBuf,
    /// How the crate's metadata says it runs.
    pub executor: Executor,
}

/// A build that produced no component, with what the build said about it.
#[derive(Debug)]
pub struct BuildFailed {
    /// One line for the log and the command line.
    pub summary: String,
    /// The compiler's (and cargo's) error messages, in their colours (ANSI escapes).
    pub errors: String,
}

impl std::fmt::Display for BuildFailed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.summary)
    }
}

impl std::error::Error for BuildFailed {}

impl BuildFailed {
    pub(crate) fn new(summary: String) -> Self {
        BuildFailed {
            errors: summary.clone(),
            summary,
        }
    }
}

/// Runs `cargo build --release --target TARGET` in `dir` (`wasm32-wasip2` unless
/// the crate's `[package.metadata.wedge]` names another), showing cargo's progress
/// and the compiler's messages on stderr as they come, and returns the component it
/// produced, or the errors it printed.
pub fn build(dir: &Path) -> Result<Built, BuildFailed> {
    let manifest = dir.join("Cargo.toml");
    if !manifest.is_file() {
        return Err(BuildFailed::new(format!(
            "{} is a directory without a Cargo.toml (expected a guest crate)",
            dir.display()
        )));
    }
    let manifest = manifest
        .canonicalize()
        .map_err(|err| BuildFailed::new(format!("cannot resolve {}: {err}", manifest.display())))?;
    let settings = guest_crate(dir).map_err(|err| BuildFailed::new(format!("{err:#}")))?;
    let target = settings.target.as_str();
    ensure_wasm_target(target).map_err(|err| BuildFailed::new(format!("{err:#}")))?;
    eprintln!("wedge: building {} for {target}", dir.display());
    run_cargo(dir, &manifest, &settings)
}

/// What the `Cargo.toml` in `dir` says in `[package.metadata.wedge]`.
pub(crate) fn guest_crate(dir: &Path) -> Result<GuestCrate> {
    let manifest = dir.join("Cargo.toml");
    let text = std::fs::read_to_string(&manifest)
        .with_context(|| format!("cannot read {}", manifest.display()))?;
    wedge_config::parse_guest_crate(&text, &manifest.display().to_string())
        .map_err(|errors| anyhow::anyhow!("{errors}"))
}

fn run_cargo(dir: &Path, manifest: &Path, settings: &GuestCrate) -> Result<Built, BuildFailed> {
    // Diagnostics come back as JSON so they can be both shown and kept for the
    // error page, which shows rustc's colours; so does cargo's own output. Shown on
    // stderr, they keep their colours on a terminal only.
    let colour = std::io::stderr().is_terminal();
    let format = "--message-format=json-diagnostic-rendered-ansi";
    let mut child = Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()))
        .args([
            "build",
            "--release",
            "--target",
            settings.target.as_str(),
            format,
            "--color=always",
        ])
        .arg("--manifest-path")
        .arg(manifest)
        // The crate's own .cargo/config.toml applies only from inside it.
        .current_dir(dir)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|err| BuildFailed::new(format!("cannot run cargo (is Rust installed?): {err}")))?;
    // cargo's own messages (progress, manifest errors) arrive on stderr.
    let stderr = child.stderr.take().expect("piped");
    let cargo_errors = std::thread::spawn(move || relay_cargo_stderr(stderr, colour));
    let mut built = None;
    let mut errors = String::new();
    if let Some(stdout) = child.stdout.take() {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            match message(&line, manifest, settings.executor) {
                Some(Message::Artifact(artifact)) => built = Some(artifact),
                Some(Message::Diagnostic { rendered, error }) => {
                    let _ = std::io::stderr().write_all(shown(&rendered, colour).as_bytes());
                    if error {
                        errors.push_str(&rendered);
                    }
                }
                None => {}
            }
        }
    }
    let status = child.wait();
    errors.push_str(&cargo_errors.join().unwrap_or_default());
    let failed = |summary: String| BuildFailed {
        summary,
        errors: errors.clone(),
    };
    match status {
        Ok(status) if status.success() => {}
        Ok(_) => {
            return Err(failed(format!(
                "building {} failed (cargo's errors are above)",
                dir.display()
            )));
        }
        Err(err) => return Err(failed(format!("waiting for cargo: {err}"))),
    }
    built.ok_or_else(|| {
        let needs = match settings.executor {
            Executor::WasiHttp => "`[lib] crate-type = [\"cdylib\"]`",
            Executor::Wagi => "a binary (`src/main.rs`)",
        };
        BuildFailed::new(format!(
            "{} built, but produced no component: its Cargo.toml needs {needs}",
            dir.display()
        ))
    })
}

/// Copies cargo's stderr through (`colour`: its escapes kept) and returns its error
/// lines with their colours: from the first line starting with `error` on (progress
/// lines before it are not errors).
fn relay_cargo_stderr(stderr: impl std::io::Read, colour: bool) -> String {
    let mut errors = String::new();
    for line in BufReader::new(stderr).lines().map_while(Result::ok) {
        eprintln!("{}", shown(&line, colour));
        if !errors.is_empty() || ansi::strip(&line).starts_with("error") {
            errors.push_str(&line);
            errors.push('\n');
        }
    }
    errors
}

/// What one line of cargo's JSON output means to us.
#[derive(Debug, PartialEq)]
enum Message {
    /// The cdylib `.wasm` of the crate being built.
    Artifact(Built),
    /// A compiler message, rendered as rustc would print it.
    Diagnostic { rendered: String, error: bool },
}

impl std::fmt::Debug for Built {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} at {}", self.name, self.wasm.display())
    }
}

impl PartialEq for Built {
    fn eq(&self, other: &Self) -> bool {
        (&self.name, &self.wasm, self.executor) == (&other.name, &other.wasm, other.executor)
    }
}

fn message(line: &str, manifest: &Path, executor: Executor) -> Option<Message> {
    let msg: serde_json::Value = serde_json::from_str(line).ok()?;
    match msg["reason"].as_str()? {
        "compiler-artifact" => component_artifact(&msg, manifest, executor).map(Message::Artifact),
        "compiler-message" => {
            let rendered = msg["message"]["rendered"].as_str()?.to_string();
            let error = msg["message"]["level"]
                .as_str()
                .is_some_and(|level| level.starts_with("error"));
            Some(Message::Diagnostic { rendered, error })
        }
        _ => None,
    }
}

/// The `.wasm` of the crate at `manifest`, from a compiler-artifact message: its
/// cdylib's, or a WAGI program's binary's.
fn component_artifact(
    msg: &serde_json::Value,
    manifest: &Path,
    executor: Executor,
) -> Option<Built> {
    let from_this_crate = msg["manifest_path"].as_str().map(Path::new) == Some(manifest);
    let wanted = match executor {
        Executor::WasiHttp => "cdylib",
        Executor::Wagi => "bin",
    };
    let is_wanted = msg["target"]["kind"]
        .as_array()?
        .iter()
        .any(|kind| kind == wanted);
    if !from_this_crate || !is_wanted {
        return None;
    }
    let wasm = msg["filenames"]
        .as_array()?
        .iter()
        .filter_map(|f| f.as_str())
        .find(|f| f.ends_with(".wasm"))?;
    // The package's name, as its Cargo.toml spells it: the lib target's (and so the
    // .wasm file's) name has `_` for each `-` (`todo-api` builds `todo_api.wasm`).
    let name = msg["package_id"]
        .as_str()
        .and_then(package_name)
        .or_else(|| msg["target"]["name"].as_str())?;
    Some(Built {
        name: name.to_string(),
        wasm: PathBuf::from(wasm),
        executor,
    })
}

/// The name in a package ID spec as cargo's messages give it: `…/dir#name@version`,
/// or `…/dir#version` when the name is the directory's (`path+file:///src/todo-api#0.1.0`).
fn package_name(id: &str) -> Option<&str> {
    let (url, fragment) = id.rsplit_once('#')?;
    match fragment.split_once('@') {
        Some((name, _version)) => Some(name),
        None => url.rsplit('/').next().filter(|name| !name.is_empty()),
    }
}

/// `text` as shown on stderr: with its colours on a terminal, else without.
pub(crate) fn shown(text: &str, colour: bool) -> std::borrow::Cow<'_, str> {
    if colour {
        text.into()
    } else {
        ansi::strip(text).into()
    }
}

/// Installs the wasm target with rustup when it is missing.
fn ensure_wasm_target(target: &str) -> Result<()> {
    let Ok(output) = Command::new("rustup")
        .args(["target", "list", "--installed"])
        .output()
    else {
        // No rustup: cargo will say what is missing.
        return Ok(());
    };
    let installed = String::from_utf8_lossy(&output.stdout);
    if installed.lines().any(|t| t.trim() == target) {
        return Ok(());
    }
    eprintln!(
        "wedge: the {target} target is missing; installing it with `rustup target add {target}`"
    );
    let status = Command::new("rustup")
        .args(["target", "add", target])
        .status()
        .context("running rustup")?;
    if !status.success() {
        bail!("`rustup target add {target}` failed");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const MANIFEST: &str = "/src/greeter/Cargo.toml";

    #[test]
    fn picks_the_crates_cdylib_artifact() {
        let line = r#"{"reason":"compiler-artifact","manifest_path":"/src/greeter/Cargo.toml","target":{"kind":["cdylib"],"name":"greeter"},"filenames":["/t/greeter.d","/t/greeter.wasm"]}"#;
        let Some(Message::Artifact(built)) = message(line, Path::new(MANIFEST), Executor::WasiHttp)
        else {
            panic!("no artifact");
        };
        assert_eq!(built.name, "greeter");
        assert_eq!(built.wasm, Path::new("/t/greeter.wasm"));
        let dependency = line.replace("/src/greeter/", "/registry/wstd/");
        assert_eq!(
            message(&dependency, Path::new(MANIFEST), Executor::WasiHttp),
            None
        );
    }

    #[test]
    fn a_wagi_crate_is_its_binarys_artifact() {
        let line = |kind: &str| {
            format!(
                r#"{{"reason":"compiler-artifact","manifest_path":"/src/greeter/Cargo.toml","target":{{"kind":["{kind}"],"name":"greeter"}},"filenames":["/t/greeter.wasm"]}}"#
            )
        };
        let manifest = Path::new(MANIFEST);
        let Some(Message::Artifact(built)) = message(&line("bin"), manifest, Executor::Wagi) else {
            panic!("no artifact");
        };
        assert_eq!(built.executor, Executor::Wagi);
        assert_eq!(built.wasm, Path::new("/t/greeter.wasm"));
        assert_eq!(message(&line("bin"), manifest, Executor::WasiHttp), None);
        assert_eq!(message(&line("cdylib"), manifest, Executor::Wagi), None);
    }

    #[test]
    fn the_name_is_the_packages_with_its_dashes() {
        let line = |id: &str| {
            format!(
                r#"{{"reason":"compiler-artifact","package_id":"{id}","manifest_path":"/src/todo-api/Cargo.toml","target":{{"kind":["cdylib"],"name":"todo_api"}},"filenames":["/t/todo_api.wasm"]}}"#
            )
        };
        let manifest = Path::new("/src/todo-api/Cargo.toml");
        for (id, name) in [
            ("path+file:///src/todo-api#0.1.0", "todo-api"),
            ("path+file:///src/todo-api#todo-api@0.1.0", "todo-api"),
            ("path+file:///src/other-dir#todo-api@0.1.0", "todo-api"),
        ] {
            let Some(Message::Artifact(built)) = message(&line(id), manifest, Executor::WasiHttp)
            else {
                panic!("no artifact for {id}");
            };
            assert_eq!(built.name, name, "{id}");
        }
    }

    #[test]
    fn keeps_errors_apart_from_warnings_without_colour() {
        let error = r#"{"reason":"compiler-message","message":{"level":"error","rendered":"\u001b[1m\u001b[38;5;9merror\u001b[0m: expected `;`\n"}}"#;
        let warning = r#"{"reason":"compiler-message","message":{"level":"warning","rendered":"warning: unused\n"}}"#;
        let Some(Message::Diagnostic { rendered, error }) =
            message(error, Path::new(MANIFEST), Executor::WasiHttp)
        else {
            panic!("no diagnostic");
        };
        assert!(error);
        assert_eq!(ansi::strip(&rendered), "error: expected `;`\n");
        let Some(Message::Diagnostic { error, .. }) =
            message(warning, Path::new(MANIFEST), Executor::WasiHttp)
        else {
            panic!("no diagnostic");
        };
        assert!(!error);
    }

    #[test]
    fn cargo_stderr_errors_start_at_the_first_error_line() {
        // Coloured as `--color=always` colours it; the errors keep their colours.
        let stderr = "   \x1b[1m\x1b[92mCompiling\x1b[0m greeter v0.1.0\n\x1b[1m\x1b[91merror\x1b[0m: failed to parse manifest\n  caused by: x\n";
        assert_eq!(
            relay_cargo_stderr(stderr.as_bytes(), false),
            "\x1b[1m\x1b[91merror\x1b[0m: failed to parse manifest\n  caused by: x\n"
        );
    }
}
