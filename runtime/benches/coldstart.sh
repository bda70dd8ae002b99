#!/usr/bin/env bash
# Cold start: time from `wedge serve COMPONENT` to its first 200, and the server's
# peak RSS (VmHWM) then, ROUNDS times per mode; medians and ranges at the end.
# Modes (MODES, space-separated, default all):
#   optimized-nocache  --compile optimized, an empty data dir every round (Cranelift)
#   optimized-cached   --compile optimized, a data dir whose precompiled cache is warm
#   tiered-nocache     --compile tiered, an empty data dir (Winch first, Cranelift after)
#   tiered-cached      --compile tiered, the cache warm (Cranelift code loaded, no Winch)
#   tiered-nocache-allcpus  tiered-nocache on every CPU of the machine, not CPU alone:
#                      wasmtime compiles a component's functions in parallel, so this
#                      is the start a machine of this size sees (the others compare)
# A tiered-nocache round also waits for the log line saying the app runs Cranelift's
# code, and reports the time to it and the peak RSS after it.
#
# Usage: runtime/benches/coldstart.sh WEDGE COMPONENT.wasm [wedge serve flags…]
# Environment: ROUNDS (3), MODES, CPU (1: the server's CPU, `taskset -c`).
# Loopback only; every wait is bounded.
set -euo pipefail

[ $# -ge 2 ] || { sed -n '2,15p' "$0"; exit 2; }
WEDGE=$1 COMPONENT=$2
shift 2
FLAGS=("$@")
ROUNDS=${ROUNDS:-3} CPU=${CPU:-1}
MODES=${MODES:-optimized-nocache optimized-cached tiered-nocache tiered-cached tiered-nocache-allcpus}
ALL_CPUS=0-$(($(nproc) - 1))
TMP=$(mktemp -d)
PID=
cleanup() {
    # Only the script's own shell: `$(run …)` subshells exit too.
    [ "$BASHPID" = "$$" ] || return 0
    [ -n "$PID" ] && kill "$PID" 2>/dev/null
    rm -rf "$TMP"
}
trap cleanup EXIT

free_port() {
    python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}
now_ms() { echo $(($(date +%s%N) / 1000000)); }
hwm_mib() { awk '/VmHWM/ { printf "%.1f", $2 / 1024 }' "/proc/$1/status"; }

# run DATA_DIR COMPILE CPUS: one start; prints "ms_to_first_200 peak_rss_mib
# [ms_to_optimized rss_after_mib]".
run() {
    local data=$1 compile=$2 cpus=$3 port start t first rss
    port=$(free_port)
    start=$(now_ms)
    WEDGE_DATA_DIR=$data taskset -c "$cpus" "$WEDGE" serve "$COMPONENT" --compile "$compile" \
        --listen "127.0.0.1:$port" --no-tls --workers 1 "${FLAGS[@]}" >"$TMP/out" 2>"$TMP/err" &
    PID=$!
    first=
    while [ $(($(now_ms) - start)) -lt 120000 ]; do
        if [ "$(curl -s -o /dev/null -w '%{http_code}' --max-time 2 "http://127.0.0.1:$port/")" = 200 ]; then
            first=$(($(now_ms) - start))
            break
        fi
        kill -0 "$PID" 2>/dev/null || { cat "$TMP/err" >&2; exit 1; }
        sleep 0.002
    done
    [ -n "$first" ] || { echo "no 200 within 120 s" >&2; exit 1; }
    rss=$(hwm_mib "$PID")
    local line="$first $rss"
    if [ "$compile" = tiered ] && ! grep -q "from the precompiled cache" "$TMP/err"; then
        while [ $(($(now_ms) - start)) -lt 120000 ]; do
            if grep -q "now runs optimized code" "$TMP/err"; then
                t=$(($(now_ms) - start))
                line="$line $t $(hwm_mib "$PID")"
                break
            fi
            sleep 0.01
        done
    fi
    kill "$PID"
    wait "$PID" 2>/dev/null || true
    PID=
    echo "$line"
}

# stats VALUES…: "median [min–max]".
stats() {
    printf '%s\n' "$@" | sort -n | awk '{ v[NR] = $1 } END {
        m = (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2
        printf "%s [%s–%s]", m, v[1], v[NR] }'
}

echo "load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "| mode | first 200, ms | peak RSS at first 200, MiB | optimized code in service, ms | peak RSS after, MiB |"
echo "| --- | --- | --- | --- | --- |"
for mode in $MODES; do
    IFS=- read -r compile cache cpus <<<"$mode"
    [ "${cpus:-}" = allcpus ] && cpus=$ALL_CPUS || cpus=$CPU
    firsts=() rsss=() opts=() rss2=()
    if [ "$cache" = cached ]; then
        rm -rf "$TMP/warm"
        run "$TMP/warm" optimized "$cpus" >/dev/null
    fi
    for round in $(seq "$ROUNDS"); do
        if [ "$cache" = cached ]; then
            data=$TMP/warm
        else
            data=$TMP/cold$round
            rm -rf "$data"
        fi
        line=$(run "$data" "$compile" "$cpus") || exit 1
        read -r f r o r2 <<<"$line"
        firsts+=("$f") rsss+=("$r")
        [ -n "${o:-}" ] && opts+=("$o") rss2+=("$r2")
        o= r2=
    done
    opt=- after=-
    [ ${#opts[@]} -gt 0 ] && opt=$(stats "${opts[@]}") after=$(stats "${rss2[@]}")
    echo "| $mode | $(stats "${firsts[@]}") | $(stats "${rsss[@]}") | $opt | $after |"
done
echo "load average at end: $(cut -d' ' -f1-3 /proc/loadavg)"
