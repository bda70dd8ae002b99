//! Writes the seed corpus of the `config` fuzz target (`runtime/proto/fuzz`) into
//! `DIR/config/`: the sample `wedge.toml`, the Kubernetes ConfigMap's, and every config
//! text the unit tests parse (their string literals, read from `src/tests.rs`, so the
//! seeds follow the tests). `fuzz/run.sh` calls it; it lives here, not in the fuzz
//! crate, to build without the fuzzing instrumentation.
//!
//! cargo run -p wedge-config --example config_fuzz_seeds -- DIR

use std::path::Path;

const SAMPLE: &str = include_str!("../../../examples/wedge.toml");
const CONFIGMAP: &str = include_str!("../../../examples/kubernetes/configmap.yaml");
const TESTS: &str = include_str!("../src/tests.rs");

/// The ConfigMap's `wedge.toml`: its literal block, the last thing in the file, de-indented.
fn configmap_wedge_toml() -> String {
    let (_, block) = CONFIGMAP
        .split_once("  wedge.toml: |\n")
        .expect("no wedge.toml in configmap.yaml");
    block.replace("\n    ", "\n").trim_start().to_string()
}

/// The string literals of Rust `source` (plain and `r#"…"#`) that look like TOML (a
/// ` = ` or a leading `[`): the tests' configs, `[[app]]` bodies and deployed settings.
fn config_literals(source: &str) -> Vec<String> {
    let mut literals = Vec::new();
    let mut rest = source;
    while let Some(start) = rest.find('"') {
        let raw = rest[..start].ends_with("r#");
        let body = &rest[start + 1..];
        let (text, len) = if raw {
            let end = body.find("\"#").unwrap_or(body.len());
            (body[..end].to_string(), end + 2)
        } else {
            unescape(body)
        };
        if text.contains(" = ") || text.starts_with('[') {
            literals.push(text);
        }
        rest = body.get(len..).unwrap_or("");
    }
    literals
}

/// A plain literal's text up to its closing quote, and how many bytes it took.
fn unescape(body: &str) -> (String, usize) {
    let mut text = String::new();
    let mut chars = body.char_indices();
    while let Some((at, c)) = chars.next() {
        match c {
            '"' => return (text, at + 1),
            '\\' => match chars.next().map(|(_, c)| c) {
                Some('n') => text.push('\n'),
                Some('u') => {
                    // `\u{XXXX}`: the digits between the braces.
                    let digits: String = chars
                        .by_ref()
                        .map(|(_, c)| c)
                        .skip(1)
                        .take_while(|c| *c != '}')
                        .collect();
                    let code = u32::from_str_radix(&digits, 16).ok();
                    text.extend(code.and_then(char::from_u32));
                }
                // A line continuation drops the newline and the next line's indent.
                Some('\n') => {
                    while chars.clone().next().is_some_and(|(_, c)| c.is_whitespace()) {
                        chars.next();
                    }
                }
                Some(other) => text.push(other),
                None => {}
            },
            c => text.push(c),
        }
    }
    (text, body.len())
}

fn main() {
    let dir = std::env::args()
        .nth(1)
        .expect("usage: config_fuzz_seeds DIR");
    let dir = Path::new(&dir).join("config");
    std::fs::create_dir_all(&dir).unwrap();
    let named = [
        ("sample".to_string(), SAMPLE.to_string()),
        ("kubernetes".to_string(), configmap_wedge_toml()),
    ];
    let tests = config_literals(TESTS)
        .into_iter()
        .enumerate()
        .map(|(n, text)| (format!("test-{n}"), text));
    for (name, text) in named.into_iter().chain(tests) {
        std::fs::write(dir.join(name), text).unwrap();
    }
}
