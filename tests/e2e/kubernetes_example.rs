//! What `examples/kubernetes` relies on: its manifests validate against the
//! Kubernetes API schemas (offline, with `kubernetes-validate`), the pod's grace
//! period covers the preStop sleep and wedge's drain deadline, and an update of a
//! ConfigMap volume — a symlink swap, never a write to the file — reloads
//! wedge.toml, again and again.

use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};
use std::process::Command;

use support::{Server, curl, example, repo, temp_dir};

/// Set (as .ci/run does) to make a missing validator a failure, not a skip.
const REQUIRE_VALIDATOR: &str = "WEDGE_REQUIRE_KUBERNETES_VALIDATE";

fn manifests() -> PathBuf {
    repo().join("examples/kubernetes")
}

/// `$KUBERNETES_VALIDATE`, else `kubernetes-validate` on PATH.
fn validator() -> Option<PathBuf> {
    if let Some(path) = std::env::var_os("KUBERNETES_VALIDATE") {
        return Some(PathBuf::from(path));
    }
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join("kubernetes-validate"))
        .find(|candidate| candidate.is_file())
}

/// `examples/kubernetes/validate.sh FILES...` (none: every manifest): success and output.
fn validate(validator: &Path, files: &[PathBuf]) -> (bool, String) {
    let out = Command::new(manifests().join("validate.sh"))
        .args(files)
        .env("KUBERNETES_VALIDATE", validator)
        .output()
        .expect("running validate.sh");
    let text =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    (out.status.success(), text)
}

#[test]
fn the_manifests_validate_and_a_broken_one_does_not() {
    let Some(validator) = validator() else {
        assert!(
            std::env::var_os(REQUIRE_VALIDATOR).is_none(),
            "{REQUIRE_VALIDATOR} is set but kubernetes-validate is not installed"
        );
        eprintln!(
            "skipped: kubernetes-validate is not installed (pip install kubernetes-validate)"
        );
        return;
    };
    let (valid, output) = validate(&validator, &[]);
    assert!(valid, "{output}");

    // The check can fail: the same Deployment with a field of the wrong type.
    let deployment = std::fs::read_to_string(manifests().join("deployment.yaml")).unwrap();
    let broken = deployment.replace(
        "terminationGracePeriodSeconds: 40",
        "terminationGracePeriodSeconds: \"forty\"",
    );
    assert_ne!(broken, deployment);
    let file = temp_dir("k8s").join("deployment.yaml");
    std::fs::write(&file, broken).unwrap();
    let (valid, output) = validate(&validator, &[file]);
    assert!(!valid, "a broken manifest passed: {output}");
    assert!(output.contains("terminationGracePeriodSeconds"), "{output}");
}

/// The number after `key` on its line in `text`, e.g. `seconds: 5` → 5.
fn number_after(text: &str, key: &str) -> u64 {
    let line = text
        .lines()
        .find(|line| line.trim_start().starts_with(key))
        .unwrap_or_else(|| panic!("no {key} in deployment.yaml"));
    let rest = &line.trim_start()[key.len()..];
    let digits: String = rest
        .chars()
        .skip_while(|c| !c.is_ascii_digit())
        .take_while(char::is_ascii_digit)
        .collect();
    digits
        .parse()
        .unwrap_or_else(|_| panic!("no number in {line:?}"))
}

#[test]
fn the_grace_period_covers_the_prestop_sleep_and_the_drain_deadline() {
    let deployment = std::fs::read_to_string(manifests().join("deployment.yaml")).unwrap();
    let grace = number_after(&deployment, "terminationGracePeriodSeconds:");
    let sleep = number_after(&deployment, "seconds:");
    let drain = number_after(&deployment, "- --drain-timeout=");
    assert!(
        deployment.contains(&format!("- --drain-timeout={drain}s\n")),
        "the drain deadline is not in seconds"
    );
    // The kubelet's grace period runs from the preStop hook; wedge needs the drain
    // deadline after SIGTERM, and a moment to exit, before the SIGKILL.
    assert!(
        grace > sleep + drain,
        "terminationGracePeriodSeconds {grace} <= preStop sleep {sleep} + drain {drain}"
    );
}

/// `wedge.toml` as the ConfigMap holds it (its literal block, de-indented).
fn configmap_wedge_toml() -> String {
    let configmap = std::fs::read_to_string(manifests().join("configmap.yaml")).unwrap();
    let (_, block) = configmap
        .split_once("  wedge.toml: |\n")
        .expect("no wedge.toml in configmap.yaml");
    block
        .lines()
        .take_while(|line| line.is_empty() || line.starts_with("    "))
        .map(|line| line.strip_prefix("    ").unwrap_or(line))
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn the_configmaps_wedge_toml_is_one_wedge_accepts_and_the_probes_find_its_admin_port() {
    let text = configmap_wedge_toml();
    let config = wedge::config::parse(&text, Path::new("/etc/wedge/config/wedge.toml"))
        .unwrap_or_else(|errors| panic!("{errors}"));
    assert_eq!(config.apps.len(), 1);
    let admin = config.admin.expect("the probes need the admin listener");
    let deployment = std::fs::read_to_string(manifests().join("deployment.yaml")).unwrap();
    let (_, admin_port) = deployment
        .split_once("- name: admin\n")
        .expect("no admin port in deployment.yaml");
    assert_eq!(
        number_after(admin_port, "containerPort:"),
        u64::from(admin.listen.port())
    );
}

/// A ConfigMap volume as the kubelet writes it (its AtomicWriter): the files in a
/// `..TIMESTAMP` directory, `..data` a symlink to it, and `wedge.toml` a symlink
/// to `..data/wedge.toml` that never changes itself.
struct ConfigMapVolume {
    dir: PathBuf,
    generation: u32,
}

impl ConfigMapVolume {
    fn new(wedge_toml: &str) -> ConfigMapVolume {
        let mut volume = ConfigMapVolume {
            dir: temp_dir("configmap"),
            generation: 0,
        };
        volume.publish(wedge_toml);
        symlink("..data/wedge.toml", volume.config()).unwrap();
        volume
    }

    fn config(&self) -> PathBuf {
        self.dir.join("wedge.toml")
    }

    /// An update: the new files into a new directory, `..data_tmp` pointed at it
    /// and renamed over `..data` (the one atomic step), the old directory removed.
    fn publish(&mut self, wedge_toml: &str) {
        self.generation += 1;
        let name = format!("..gen_{}", self.generation);
        std::fs::create_dir(self.dir.join(&name)).unwrap();
        std::fs::write(self.dir.join(&name).join("wedge.toml"), wedge_toml).unwrap();
        symlink(&name, self.dir.join("..data_tmp")).unwrap();
        std::fs::rename(self.dir.join("..data_tmp"), self.dir.join("..data")).unwrap();
        if self.generation > 1 {
            let old = format!("..gen_{}", self.generation - 1);
            std::fs::remove_dir_all(self.dir.join(old)).unwrap();
        }
    }
}

/// wedge.toml serving `hello` on `route` alone.
fn hello_on(route: &str) -> String {
    format!(
        "listen = \"127.0.0.1:0\"\n\n[[app]]\nname = \"hello\"\ncomponent = \"{}\"\n\
         routes = [\"{route}\"]\n",
        example("hello").display()
    )
}

fn status(server: &Server, path: &str) -> u16 {
    let url = format!("{}{path}", server.url);
    let out = curl(&["--output", "/dev/null", "--write-out", "%{http_code}", &url]);
    String::from_utf8_lossy(&out.stdout).parse().unwrap_or(0)
}

#[test]
fn a_configmap_update_is_reloaded_every_time() {
    let mut volume = ConfigMapVolume::new(&hello_on("/one"));
    let server = Server::start_config(&volume.config(), &[]);
    assert_eq!(status(&server, "/one"), 200);
    // Twice: the first update also removes the directory the file first
    // resolved to, which a watch on that directory would not survive.
    for route in ["/two", "/three"] {
        volume.publish(&hello_on(route));
        support::poll_until(&format!("{route} served after the update"), || {
            (status(&server, route) == 200).then_some(())
        });
        assert_eq!(status(&server, "/one"), 404);
    }
}
