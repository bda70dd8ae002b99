//! The config parser fed many mutations of the sample `wedge.toml`: it must answer each
//! with a config or with errors that are one line each, on a line of the text, never a
//! panic. Bounded and deterministic, so every `cargo test` runs it; the `config` fuzz
//! target (`runtime/proto/fuzz`) searches further, guided by coverage.

use std::hash::{DefaultHasher, Hash, Hasher};
use std::path::Path;
use std::time::{Duration, Instant};

use crate::parse;

/// Fragments that make the parser and the checks disagree with the text, `|`-separated.
const TOKENS: &str = "[|]|[[app]]|[app.limits]|[app.env]|\"|'|\"\"\"|=|\n|,|{|}|#|0|-1|1e400|\
    99999999999999999999|\"1GiB\"|\"0ms\"|\"9999999999999h\"|\"*.\"|\"/\"|\"\"|true|é|\u{0}|\
    \\u0000|listen|routes|memory|name|component|outbound|queue|\"[::1]:0\"";

/// A deterministic stream of numbers: SipHash with fixed keys, so a failure replays.
struct Stream(u64);

impl Stream {
    fn below(&mut self, n: usize) -> usize {
        let mut h = DefaultHasher::new();
        self.0.hash(&mut h);
        self.0 += 1;
        (h.finish() % n as u64) as usize
    }
}

/// One to four edits at character boundaries: delete, insert a token, duplicate a span.
fn mutate(text: &str, rng: &mut Stream) -> String {
    let tokens: Vec<&str> = TOKENS.split('|').collect();
    let mut chars: Vec<char> = text.chars().collect();
    for _ in 0..=rng.below(4) {
        let at = rng.below(chars.len() + 1);
        let len = rng.below(16).min(chars.len() - at);
        match rng.below(3) {
            0 => drop(chars.drain(at..at + len)),
            1 => {
                let token = tokens[rng.below(tokens.len())];
                chars.splice(at..at, token.chars());
            }
            _ => {
                let span: Vec<char> = chars[at..at + len].to_vec();
                chars.splice(at..at, span);
            }
        }
    }
    chars.into_iter().collect()
}

#[test]
fn mutated_configs_get_a_config_or_one_line_errors() {
    let sample = include_str!("../../../../examples/wedge.toml");
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut rng = Stream(0);
    let mut rejected = 0;
    for round in 0..3000 {
        if Instant::now() > deadline {
            break;
        }
        let text = mutate(sample, &mut rng);
        let Err(errors) = parse(&text, Path::new("wedge.toml")) else {
            continue;
        };
        rejected += 1;
        assert!(!errors.errors().is_empty(), "round {round}: no error given");
        let lines = text.lines().count() + 1;
        for error in errors.errors() {
            let message = &error.message;
            assert!(
                !message.is_empty() && !message.contains('\n'),
                "round {round}: {message:?} for\n{text}"
            );
            assert!(
                error.line.is_none_or(|line| (1..=lines).contains(&line)),
                "round {round}: line {:?} of {lines}",
                error.line
            );
        }
    }
    // The mutations must reach the checks, not only leave the sample valid.
    assert!(rejected > 100, "only {rejected} mutations rejected");
}
