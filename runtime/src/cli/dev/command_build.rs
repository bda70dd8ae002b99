//! Builds a project with another toolchain (`npm run build`): its build command, run by
//! `sh -c` in the project's directory, shown on stderr as it prints and kept for the
//! error page; what it built is the component file it was said to write.

use std::io::{BufRead, BufReader, IsTerminal, Read};
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex};

use crate::cli::guest_build::{BuildFailed, Built, shown};
use crate::host::Executor;

/// A build command and what it writes.
pub struct CommandBuild {
    /// The project's directory, where the command runs.
    pub dir: PathBuf,
    /// A shell command line.
    pub command: String,
    /// The component file the command writes.
    pub component: PathBuf,
    /// The app's name.
    pub name: String,
}

impl CommandBuild {
    /// Runs the command; the component it wrote, or what it printed and why it
    /// failed.
    pub fn build(&self) -> Result<Built, BuildFailed> {
        eprintln!(
            "wedge: building {} with `{}`",
            self.dir.display(),
            self.command
        );
        let (status, output) = self.run()?;
        let summary = if !status.success() {
            why_failed(&self.command, status)
        } else if !self.component.is_file() {
            format!(
                "`{}` succeeded but wrote no {} (the component to serve: --component, or \
                 `component` in wedge.toml's [dev])",
                self.command,
                self.shown_component().display()
            )
        } else {
            return Ok(Built {
                name: self.name.clone(),
                wasm: self.component.clone(),
                // How it runs is the flags' to say (`--wagi`).
                executor: Executor::default(),
            });
        };
        eprintln!("wedge: {summary}");
        let mut errors = output;
        if !errors.is_empty() && !errors.ends_with('\n') {
            errors.push('\n');
        }
        errors.push_str(&summary);
        errors.push('\n');
        Err(BuildFailed { summary, errors })
    }

    /// Runs the command to its end; its exit status and everything it printed, in
    /// the order it printed it (stdout and stderr together).
    fn run(&self) -> Result<(ExitStatus, String), BuildFailed> {
        // Kept coloured for the error page, as cargo's output is; shown on stderr
        // with the colours on a terminal only.
        let colour = std::io::stderr().is_terminal();
        let mut command = Command::new("sh");
        command
            .arg("-c")
            .arg(&self.command)
            .current_dir(&self.dir)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        // The convention of Node.js tools (and others): colour even into a pipe.
        if std::env::var_os("NO_COLOR").is_none() {
            command.env("FORCE_COLOR", "1").env("CLICOLOR_FORCE", "1");
        }
        let mut child = command.spawn().map_err(|err| {
            BuildFailed::new(format!("cannot run `sh -c '{}'`: {err}", self.command))
        })?;
        let output = Arc::new(Mutex::new(String::new()));
        let relays = [
            relay(child.stdout.take().expect("piped"), &output, colour),
            relay(child.stderr.take().expect("piped"), &output, colour),
        ];
        let status = child.wait();
        for relay in relays {
            let _ = relay.join();
        }
        let output = std::mem::take(&mut *crate::sync::lock(&output));
        let status = status.map_err(|err| BuildFailed {
            summary: format!("waiting for `{}`: {err}", self.command),
            errors: output.clone(),
        })?;
        Ok((status, output))
    }

    /// The component's path as the user wrote it: relative to the project.
    fn shown_component(&self) -> &Path {
        self.component
            .strip_prefix(&self.dir)
            .unwrap_or(&self.component)
    }
}

/// Copies `stream` to stderr line by line (`colour`: escapes kept) and appends each
/// line to `output`; lines that are not UTF-8 are kept as well as they can be.
fn relay(
    stream: impl Read + Send + 'static,
    output: &Arc<Mutex<String>>,
    colour: bool,
) -> std::thread::JoinHandle<()> {
    let output = output.clone();
    std::thread::spawn(move || {
        let mut reader = BufReader::new(stream);
        let mut line = Vec::new();
        while reader.read_until(b'\n', &mut line).is_ok_and(|n| n > 0) {
            let text = String::from_utf8_lossy(&line);
            eprint!("{}", shown(&text, colour));
            crate::sync::lock(&output).push_str(&text);
            line.clear();
        }
    })
}

/// Why a command that ended with `status` failed, in one line.
fn why_failed(command: &str, status: ExitStatus) -> String {
    match (status.code(), status.signal()) {
        (Some(127), _) => format!(
            "`{command}` failed: the shell found no such command (exit status 127; is the \
             tool installed and on PATH?)"
        ),
        (Some(126), _) => format!(
            "`{command}` failed: the shell could not run a command it names (exit status \
             126; is it executable?)"
        ),
        (Some(code), _) => format!("`{command}` failed (exit status {code})"),
        (None, Some(signal)) => format!("`{command}` was killed by signal {signal}"),
        (None, None) => format!("`{command}` failed ({status})"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn build(dir: &Path, command: &str) -> Result<Built, BuildFailed> {
        CommandBuild {
            dir: dir.to_path_buf(),
            command: command.to_string(),
            component: dir.join("dist/app.wasm"),
            name: "app".to_string(),
        }
        .build()
    }

    #[test]
    fn the_component_written_is_built_what_went_wrong_is_said_with_the_output() {
        let dir = std::env::temp_dir().join(format!("wedge-command-build-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();

        let built = build(&dir, "mkdir -p dist && echo wasm > dist/app.wasm").unwrap();
        assert_eq!(built.wasm, dir.join("dist/app.wasm"));
        assert_eq!(built.name, "app");

        let failed = build(&dir, "echo to stdout; echo to stderr >&2; exit 3").unwrap_err();
        assert_eq!(
            failed.summary,
            "`echo to stdout; echo to stderr >&2; exit 3` failed (exit status 3)"
        );
        assert!(failed.errors.contains("to stdout\n"), "{}", failed.errors);
        assert!(failed.errors.contains("to stderr\n"), "{}", failed.errors);
        assert!(
            failed.errors.ends_with("(exit status 3)\n"),
            "{}",
            failed.errors
        );

        let missing = build(&dir, "no-such-toolchain-wedge build").unwrap_err();
        assert!(
            missing
                .summary
                .contains("found no such command (exit status 127"),
            "{}",
            missing.summary
        );
        assert!(missing.errors.contains("not found"), "{}", missing.errors);

        std::fs::remove_dir_all(dir.join("dist")).unwrap();
        let nothing = build(&dir, "true").unwrap_err();
        assert_eq!(
            nothing.summary,
            "`true` succeeded but wrote no dist/app.wasm (the component to serve: \
             --component, or `component` in wedge.toml's [dev])"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
