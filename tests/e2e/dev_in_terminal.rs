//! Issue 17, "Done when": a user's session in a terminal, driven through tmux and
//! read off its screen: `wedge new` → `wedge dev` → edit → error → fix, one build
//! per save.
//!
//! Needs tmux (Debian's package): without it the test says so and passes, unless
//! `WEDGE_REQUIRE_TMUX=1` (CI), which makes it fail.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::Duration;

use support::dev::{builds_stay, get, head_and_body, served_url, wait_for_body, wait_for_builds};
use support::{poll_until, repo, temp_dir, wedge_bin};

/// Whether tmux is installed; without it, `false` after saying so (or a panic when
/// `WEDGE_REQUIRE_TMUX` is set).
fn tmux_installed() -> bool {
    let found = Command::new("tmux")
        .arg("-V")
        .stdout(Stdio::null())
        .status()
        .is_ok_and(|status| status.success());
    if !found {
        support::missing_tool(
            "tmux is not installed (apt-get install tmux)",
            "WEDGE_REQUIRE_TMUX",
        );
    }
    found
}

/// A tmux server of its own (its socket in a temporary directory) with one session
/// running bash in `dir`, `wedge` on its PATH; killed on drop.
struct Tmux {
    socket: PathBuf,
}

/// The window `wedge dev` runs in, and the one the edits are typed in.
const DEV: &str = "dev:0";
const EDIT: &str = "dev:1";

impl Tmux {
    fn start(dir: &Path) -> Tmux {
        let socket = temp_dir("tmux").join("socket");
        let tmux = Tmux { socket };
        // `wedge` on the PATH is the binary under test, whatever its file's name.
        let bin = temp_dir("tmux-bin");
        std::os::unix::fs::symlink(wedge_bin(), bin.join("wedge")).unwrap();
        let path = format!(
            "{}:{}",
            bin.display(),
            std::env::var("PATH").unwrap_or_default()
        );
        // The server takes its environment from the command that starts it.
        let mut command = tmux.command();
        command
            .env("PATH", path)
            // Guest crates of the tests build into one target dir (dependencies once).
            .env(
                "CARGO_TARGET_DIR",
                repo().join("target/guest-tests").display().to_string(),
            )
            .env("WEDGE_DATA_DIR", temp_dir("tmux-data"))
            .env("WEDGE_LOG", "info")
            .args([
                "start-server",
                ";",
                "set-option",
                "-g",
                "history-limit",
                "100000",
            ])
            .args([
                ";",
                "new-session",
                "-d",
                "-s",
                "dev",
                "-x",
                "200",
                "-y",
                "50",
                "-c",
            ])
            .arg(dir)
            .args(["bash --norc --noprofile", ";", "new-window", "-d", "-c"])
            .arg(dir)
            .arg("bash --norc --noprofile");
        ok(command.output(), "starting tmux");
        tmux
    }

    fn command(&self) -> Command {
        let mut command = Command::new("tmux");
        command
            .arg("-f")
            .arg("/dev/null")
            .arg("-S")
            .arg(&self.socket);
        command
    }

    /// Types `line` into `window` and presses Enter.
    fn type_line(&self, window: &str, line: &str) {
        let mut command = self.command();
        command.args(["send-keys", "-t", window, "-l", line]);
        ok(command.output(), "tmux send-keys");
        let mut command = self.command();
        command.args(["send-keys", "-t", window, "Enter"]);
        ok(command.output(), "tmux send-keys");
    }

    /// All `window` showed (its history too), lines joined where they wrapped,
    /// without colours.
    fn screen(&self, window: &str) -> String {
        let mut command = self.command();
        command.args([
            "capture-pane",
            "-p",
            "-J",
            "-S",
            "-",
            "-E",
            "-",
            "-t",
            window,
        ]);
        let out = ok(command.output(), "tmux capture-pane");
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// Polls until `window` shows `needle`; returns the screen.
    fn wait_for(&self, window: &str, needle: &str) -> String {
        poll_until(&format!("{needle:?} in tmux window {window}"), || {
            let screen = self.screen(window);
            screen.contains(needle).then_some(screen)
        })
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = self.command().arg("kill-server").output();
    }
}

fn ok(output: std::io::Result<Output>, what: &str) -> Output {
    let output = output.unwrap_or_else(|err| panic!("{what}: {err}"));
    assert!(
        output.status.success(),
        "{what}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    output
}

#[test]
fn in_a_terminal_wedge_new_then_dev_then_edit_error_and_fix_build_once_per_save() {
    if !tmux_installed() {
        return;
    }
    let work = temp_dir("tmux-work");
    let tmux = Tmux::start(&work);
    let screen = || tmux.screen(DEV);

    tmux.type_line(DEV, "wedge new tmuxgreet");
    tmux.wait_for(DEV, "created `tmuxgreet`");
    tmux.type_line(DEV, "wedge dev tmuxgreet --port 0 --no-tls");
    let shown = tmux.wait_for(DEV, "wedge: serving `tmuxgreet` on http://");
    let url = served_url(&shown);
    let page = format!("{url}/page");
    assert_eq!(get(&page), ("200".into(), "Hello from /page!\n".into()));
    builds_stay(&screen, 1, Duration::from_secs(5));

    // Saves typed in the other window.
    tmux.type_line(EDIT, "sed -i 's/Hello/Howdy/' tmuxgreet/src/lib.rs");
    wait_for_body(&page, "Howdy from /page!\n");
    let shown = builds_stay(&screen, 2, Duration::from_secs(3));
    assert!(shown.contains("src/lib.rs changed: rebuilding"), "{shown}");

    tmux.type_line(EDIT, "echo 'this is not rust' >> tmuxgreet/src/lib.rs");
    let shown = tmux.wait_for(DEV, "still serving the last version that built");
    assert_eq!(
        shown.matches("error: expected one of").count(),
        1,
        "the compiler's error, once:\n{shown}"
    );
    let (head, body) = head_and_body(&page);
    assert!(head.contains("x-wedge-build: failed"), "{head}");
    assert_eq!(body, "Howdy from /page!\n");
    builds_stay(&screen, 3, Duration::from_secs(3));

    tmux.type_line(EDIT, "sed -i -e '$d' -e 's/Howdy/Hi/' tmuxgreet/src/lib.rs");
    wait_for_body(&page, "Hi from /page!\n");
    wait_for_builds(&screen, 4);
    let shown = builds_stay(&screen, 4, Duration::from_secs(3));
    assert_eq!(shown.matches("reloaded `tmuxgreet`").count(), 2, "{shown}");
    let (head, _) = head_and_body(&page);
    assert!(!head.contains("x-wedge-build"), "{head}");
}
