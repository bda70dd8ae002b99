#!/usr/bin/env bash
# A/B of two wedge builds on one load, as ../../shared/BENCHMARKING.md says: the
# baseline A, the candidate B and A again as a control (A2), each its own
# `wedge serve` pinned to CPU 1, the load generator pinned to CPU 0, ROUNDS rounds
# with the order rotated every round. Per run: server CPU per request (utime+stime
# from /proc/PID/stat ÷ requests answered) and req/s; at the end the medians, and
# B÷A and A2÷A (and B−A, A2−A in µs) taken round by round (median [range]). The suite (`cargo bench -p
# wedge --bench suite`) compares wedge with the references; this compares two wedges.
#
# Usage: runtime/benches/ab.sh A_WEDGE B_WEDGE COMPONENT.wasm [wedge serve flags…]
# Environment: ROUNDS (5), SECONDS (5), WARMUP (2), PROTO (h1 | h2c), CONNS (32: the
# load's connections), URLPATH (/),
# BPATH (B's path, URLPATH unless set: one wedge, as A and B, on a route and its
# control), METHOD (GET; h1 only: POST sends an empty body), BODY (a file: the
# request body, sent as a POST on h1 and h2c).
# Needs wrk (h1) or h2load (h2c), and taskset. Loopback only; every load is bounded
# by `timeout`.
set -euo pipefail

[ $# -ge 3 ] || { sed -n '2,17p' "$0"; exit 2; }
A=$1 B=$2 COMPONENT=$3
shift 3
# Bash's own SECONDS (the time since the shell started, 0 here) hides an unset one.
ROUNDS=${ROUNDS:-5} SECONDS_=$(printenv SECONDS || echo 5) WARMUP=${WARMUP:-2}
PROTO=${PROTO:-h1} CONNS=${CONNS:-32} URLPATH=${URLPATH:-/} BPATH=${BPATH:-$URLPATH} METHOD=${METHOD:-GET}
TMP=$(mktemp -d)
BODY=${BODY:-}
if [ -n "$BODY" ]; then
    # wrk takes the body as a Lua string: a long bracket holds any bytes but "]==]".
    { echo "wrk.method = \"POST\""; printf 'wrk.body = [==['; cat "$BODY"; echo ']==]'; } >"$TMP/method.lua"
else
    echo "wrk.method = \"$METHOD\"" >"$TMP/method.lua"
fi
PIDS=()
cleanup() {
    for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
    rm -rf "$TMP"
}
trap cleanup EXIT

free_port() {
    python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

# start NAME BINARY: a server on a free port; sets PORT_NAME and PID_NAME.
start() {
    local name=$1 bin=$2 port
    shift 2
    port=$(free_port)
    mkdir -p "$TMP/$name"
    WEDGE_DATA_DIR="$TMP/$name/data" taskset -c 1 "$bin" serve "$COMPONENT" \
        --listen "127.0.0.1:$port" --tls-listen "127.0.0.1:$(free_port)" --workers 1 "$@" >"$TMP/$name/out" 2>"$TMP/$name/err" &
    local pid=$!
    PIDS+=("$pid")
    for _ in $(seq 600); do
        if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
            eval "PORT_$name=$port PID_$name=$pid"
            return
        fi
        kill -0 "$pid" 2>/dev/null || { cat "$TMP/$name/err" >&2; exit 1; }
        sleep 0.1
    done
    echo "$name did not listen within 60 s" >&2
    exit 1
}

# load PORT SECONDS PATH: prints "requests req_per_s".
load() {
    local url="http://127.0.0.1:$1$3" out
    case $PROTO in
    h1)
        out=$(timeout -k 5 $(($2 + 60)) taskset -c 0 wrk -t 1 -c "$CONNS" -d "${2}s" -s "$TMP/method.lua" "$url")
        echo "$out" | awk '/requests in/ {n=$1} /Non-2xx/ {bad=$NF} /Requests\/sec/ {r=$2}
                           END {print n-bad, r}'
        ;;
    h2c)
        out=$(timeout -k 5 $(($2 + 60)) taskset -c 0 h2load -c "$CONNS" -m 16 -t 1 -D "$2" ${BODY:+-d "$BODY"} "$url")
        echo "$out" | awk '/^requests:/ {n=$8} /^finished in/ {gsub(",","",$4); r=$4} END {print n, r}'
        ;;
    *) echo "PROTO is h1 or h2c" >&2; exit 2 ;;
    esac
}

path_of() { if [ "$1" = B ]; then echo "$BPATH"; else echo "$URLPATH"; fi; }

ticks() { awk '{ sub(/.*\) /, ""); print $12 + $13 }' "/proc/$1/stat"; }

start A "$A" "$@"
start B "$B" "$@"
start A2 "$A" "$@"
HZ=$(getconf CLK_TCK)
NAMES=(A B A2)
for name in "${NAMES[@]}"; do
    port_var=PORT_$name
    load "${!port_var}" "$WARMUP" "$(path_of "$name")" >/dev/null
done
echo "round server cpu_us_per_req req_per_s" >"$TMP/results"
for round in $(seq "$ROUNDS"); do
    for k in 0 1 2; do
        name=${NAMES[$(((k + round) % 3))]}
        port_var=PORT_$name pid_var=PID_$name
        before=$(ticks "${!pid_var}")
        read -r requests rate < <(load "${!port_var}" "$SECONDS_" "$(path_of "$name")")
        after=$(ticks "${!pid_var}")
        cpu=$(awk -v t=$((after - before)) -v n="$requests" -v hz="$HZ" \
            'BEGIN { printf "%.2f", t * 1e6 / hz / n }')
        echo "$round $name $cpu $rate" | tee -a "$TMP/results"
    done
done
python3 - "$TMP/results" <<'EOF'
import statistics, sys
rows = [l.split() for l in open(sys.argv[1]).read().splitlines()[1:]]
cpu = {}
for rnd, name, c, r in rows:
    cpu.setdefault(name, {})[rnd] = (float(c), float(r))
def show(v): return f"{statistics.median(v):.3f} [{min(v):.3f}–{max(v):.3f}]"
for name in ("A", "B", "A2"):
    cs = [c for c, _ in cpu[name].values()]
    rs = [r for _, r in cpu[name].values()]
    print(f"{name:3} cpu µs/req {show(cs)}  req/s {statistics.median(rs):.0f}")
for name in ("B", "A2"):
    ratios = [cpu[name][k][0] / cpu["A"][k][0] for k in cpu["A"]]
    added = [cpu[name][k][0] - cpu["A"][k][0] for k in cpu["A"]]
    print(f"{name}÷A per round: {show(ratios)}   {name}−A: {show(added)} µs")
EOF
