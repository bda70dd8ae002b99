//! wedge end to end: the real `wedge` binary on 127.0.0.1, driven by real clients
//! (curl, nghttp/h2load, the `h2` and `h3` crates, a browser, tmux) serving real
//! components built from examples/. One test binary, a module per area; what the
//! modules share is tests/support (the `support` crate). Run one area with
//! `cargo test -p wedge --test e2e -- AREA::`.

mod admin_api;
mod admission;
mod cli;
mod core_modules;
mod dev;
mod dev_in_browser;
mod dev_in_terminal;
mod dev_toolchains;
mod guest_env;
mod guest_faults;
mod hostile_guest;
mod http1;
mod http2_attacks;
mod http2_body_limit;
mod http2_clients;
mod http3;
mod http3_attacks;
mod instance_isolation;
mod instance_reuse;
mod keyvalue;
mod kubernetes_example;
mod metrics;
mod new_project;
mod oci_registry;
mod outbound_http;
mod peer_faults;
mod request_trailers;
mod sdk_examples;
mod shutdown_under_load;
mod tenancy;
mod tiered_compile;
mod tls;
mod wagi;
mod wasi_p3;
mod workers;

/// A file here that the list above leaves out would never be compiled nor run.
#[test]
fn every_file_here_is_a_module_of_this_binary() {
    let here = support::repo().join("tests/e2e");
    let main = std::fs::read_to_string(here.join("main.rs")).unwrap();
    for entry in std::fs::read_dir(&here).unwrap() {
        let name = entry.unwrap().file_name().into_string().unwrap();
        if let Some(module) = name.strip_suffix(".rs").filter(|m| *m != "main") {
            let declared = format!("\nmod {module};\n");
            assert!(
                main.contains(&declared),
                "tests/e2e/{name} is not a module of main.rs"
            );
        }
    }
}
