//! The componentize-js hello project (tests/fixtures/js-hello) and its npm
//! dependencies, shared by the dev-loop tests and the bench suite's cold start, so
//! componentize-js is installed once, in target/npm/js-hello.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use crate::repo;

/// A copy of tests/fixtures/js-hello in `dir` (emptied first) with its
/// dependencies linked in: a project `npm run build` builds into dist/app.wasm.
pub fn project(dir: &Path) -> Result<PathBuf, String> {
    let dependencies = dependencies()?;
    let _ = std::fs::remove_dir_all(dir);
    copy_dir(&repo().join("tests/fixtures/js-hello"), dir)
        .map_err(|err| format!("copying the js-hello project to {}: {err}", dir.display()))?;
    std::os::unix::fs::symlink(dependencies, dir.join("node_modules"))
        .map_err(|err| format!("linking node_modules into {}: {err}", dir.display()))?;
    Ok(dir.to_path_buf())
}

/// The project's dependencies (componentize-js, from npm), installed with `npm ci`
/// into target/npm/js-hello once and kept while its package-lock.json is the same:
/// its `node_modules`.
pub fn dependencies() -> Result<PathBuf, String> {
    static INSTALLED: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    INSTALLED.get_or_init(install_dependencies).clone()
}

fn install_dependencies() -> Result<PathBuf, String> {
    let fixture = repo().join("tests/fixtures/js-hello");
    let dir = repo().join("target/npm/js-hello");
    let io = |what: &'static str| {
        let place = dir.display().to_string();
        move |err: std::io::Error| format!("{what} in {place}: {err}")
    };
    std::fs::create_dir_all(&dir).map_err(io("creating the directory"))?;
    // Other test processes (or a bench run) may install at the same time.
    let lock = std::fs::File::create(dir.join(".wedge-tests.lock")).map_err(io("locking"))?;
    lock.lock().map_err(io("locking"))?;
    let lock_file = fixture.join("package-lock.json");
    let wanted = std::fs::read(&lock_file)
        .map_err(|err| format!("reading {}: {err}", lock_file.display()))?;
    let stamp = dir.join("installed-package-lock.json");
    if std::fs::read(&stamp).ok().as_ref() == Some(&wanted) {
        return Ok(dir.join("node_modules"));
    }
    let _ = std::fs::remove_file(&stamp);
    for file in ["package.json", "package-lock.json"] {
        std::fs::copy(fixture.join(file), dir.join(file))
            .map_err(io("copying the package files"))?;
    }
    let mut npm = Command::new("npm")
        .args(["ci", "--no-audit", "--no-fund"])
        .current_dir(&dir)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|err| format!("running npm (apt-get install nodejs npm): {err}"))?;
    // Bounded: about 20 s here, from the npm registry.
    let deadline = Instant::now() + Duration::from_secs(600);
    let status = loop {
        if let Some(status) = npm.try_wait().map_err(io("waiting for npm"))? {
            break status;
        }
        if Instant::now() > deadline {
            let _ = npm.kill();
            return Err(format!(
                "npm ci in {} did not finish in 10 minutes",
                dir.display()
            ));
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    let mut output = String::new();
    let _ = npm.stdout.take().map(|mut o| o.read_to_string(&mut output));
    let _ = npm.stderr.take().map(|mut e| e.read_to_string(&mut output));
    if !status.success() {
        return Err(format!("npm ci failed ({status}):\n{output}"));
    }
    std::fs::write(&stamp, wanted).map_err(io("stamping"))?;
    Ok(dir.join("node_modules"))
}

fn copy_dir(from: &Path, to: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(to)?;
    for entry in std::fs::read_dir(from)? {
        let entry = entry?;
        let target = to.join(entry.file_name());
        if entry.file_type()?.is_dir() {
            copy_dir(&entry.path(), &target)?;
        } else {
            std::fs::copy(entry.path(), target)?;
        }
    }
    Ok(())
}
