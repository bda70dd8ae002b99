#!/usr/bin/env bash
# Fuzzes every target for SECONDS each (default 30), starting from seeds built from the
# unit tests' exchanges and configs; exits non-zero on the first crash, whose input
# libFuzzer saves under artifacts/<target>/. Runs on stable Rust: the decoders are safe
# Rust, so no sanitizer is needed (-s none), and debug assertions (-a) catch overflow.
#   runtime/proto/fuzz/run.sh [SECONDS]
#   TARGETS="hpack qpack" runtime/proto/fuzz/run.sh 600   # some targets only
set -euo pipefail
cd "$(dirname "$0")"
seconds=${1:-30}

command -v cargo-fuzz >/dev/null || cargo install cargo-fuzz --locked --version 0.13.2
# The seeds build with the workspace (the test suite has built them already in CI).
cargo run --quiet --manifest-path ../Cargo.toml -p wedge-proto --example fuzz_seeds -- "$PWD/corpus"
cargo run --quiet --manifest-path ../../config/Cargo.toml -p wedge-config --example config_fuzz_seeds -- "$PWD/corpus"
cargo fuzz build -s none -a
for target in ${TARGETS:-$(cargo fuzz list)}; do
  echo "fuzz: $target for ${seconds}s"
  mkdir -p "artifacts/$target"
  cargo fuzz run -s none -a "$target" "corpus/$target" -- \
    -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
    -artifact_prefix="artifacts/$target/"
done
