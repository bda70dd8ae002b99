#!/usr/bin/env bash
# Server CPU per request for the `hello` example over HTTP/3 beside HTTP/2 over TLS,
# same server process, same run (../shared/BENCHMARKING.md's method, scaled down):
# one connection each, N requests, up to 100 streams at once; rounds alternate the
# order. HTTP/3 load: Debian's ngtcp2 client (gtlsclient -n N); HTTP/2: h2load.
# Server pinned to CPU 1, load to CPU 0. Prints one line per round and protocol.
#
#   runtime/benches/h3_vs_h2_cpu.sh            # target/debug/wedge (deps optimised, wedge not)
#   WEDGE_BIN=target/release/wedge ROUNDS=7 N=5000 runtime/benches/h3_vs_h2_cpu.sh
set -euo pipefail
cd "$(dirname "$0")/../.."

ROUNDS=${ROUNDS:-5}
N=${N:-3000}
WEDGE_BIN=${WEDGE_BIN:-target/debug/wedge}
HELLO=examples/target/wasm32-wasip2/release/hello.wasm
PORT=${PORT:-48443}

[ -x "$WEDGE_BIN" ] || cargo build -p wedge
[ -f "$HELLO" ] || cargo build --release --target wasm32-wasip2 --manifest-path examples/Cargo.toml
command -v gtlsclient >/dev/null || { echo "needs gtlsclient (apt-get install ngtcp2-client)"; exit 1; }
command -v h2load >/dev/null || { echo "needs h2load (apt-get install nghttp2-client)"; exit 1; }

data=$(mktemp -d)
WEDGE_DATA_DIR=$data taskset -c 1 "$WEDGE_BIN" serve "$HELLO" \
  --listen 127.0.0.1:0 --tls-listen "127.0.0.1:$PORT" >"$data/out" 2>"$data/err" &
server=$!
trap 'kill $server 2>/dev/null; wait $server 2>/dev/null; rm -rf "$data"' EXIT
for _ in $(seq 100); do grep -q "h3 on udp" "$data/out" && break; sleep 0.1; done
grep -q "h3 on udp" "$data/out" || { cat "$data/err"; exit 1; }

cpu_ticks() { awk '{print $14 + $15}' "/proc/$server/stat"; }
hz=$(getconf CLK_TCK)

run() {
  case $1 in
    h3) [ "$(timeout 300 taskset -c 0 gtlsclient --no-quic-dump --exit-on-all-streams-close \
          -n "$N" 127.0.0.1 "$PORT" "https://127.0.0.1:$PORT/" 2>&1 | grep -c ':status: 200')" = "$N" ] ;;
    h2) timeout 300 taskset -c 0 h2load -n "$N" -c 1 -m 100 "https://127.0.0.1:$PORT/" \
          | grep -q "$N succeeded" ;;
  esac
}

# One warm-up of each, then the rounds.
run h3; run h2
for round in $(seq "$ROUNDS"); do
  order="h3 h2"; [ $((round % 2)) -eq 0 ] && order="h2 h3"
  for proto in $order; do
    before=$(cpu_ticks)
    run "$proto"
    after=$(cpu_ticks)
    us=$(( (after - before) * 1000000 / hz / N ))
    echo "round $round $proto: $us µs server CPU per request ($N requests)"
  done
done
