#!/usr/bin/env bash
# Soak: DURATION seconds (600 by default) of mixed load on HTTP/1.1, HTTP/2 and HTTP/3
# against one release `wedge serve --config`, its resident memory sampled from /proc
# every RSS_EVERY seconds. Not a CI test: a run whose figures go into RELIABILITY.md.
#
#   runtime/benches/soak.sh                 # 10 minutes
#   DURATION=60 runtime/benches/soak.sh     # a short try
#
# Load, all on 127.0.0.1, each loop bounded by the end time and by a count:
#   hello     h2load (HTTP/1.1 and h2c) in rounds; gtlsclient rounds of HTTP/3 requests
#   echo      4 MiB bodies echoed back (curl h1 and h2c, gtlsclient h3), sizes checked
#   feed      the endless feed read at 256 KiB/s and dropped after 2 s (curl h1, h2c;
#             gtlsclient h3 killed)
#   reset     requests whose handler sleeps 2 s, abandoned after 0.3 s (curl h1: close;
#             curl h2c: RST_STREAM; gtlsclient h3: killed)
#   trap      guests trapping before the head (500) and mid-body (aborted), over h1,
#             h2c and h3
# Needs curl, h2load (nghttp2-client) and gtlsclient (ngtcp2-client).
# Prints requests by protocol and status class, client outcomes by loop and cause,
# guest faults by kind, connections closed by reason, and RSS start / after warm-up
# (WARMUP seconds, 60 by default) / peak / end.
set -euo pipefail
cd "$(dirname "$0")/../.."

DURATION=${DURATION:-600}
RSS_EVERY=${RSS_EVERY:-5}
WARMUP=${WARMUP:-60}
MAX_ROUNDS=${MAX_ROUNDS:-100000}
WEDGE=${WEDGE:-target/release/wedge}

for tool in curl h2load gtlsclient; do
  command -v "$tool" >/dev/null || {
    echo "soak: $tool is missing (apt-get install curl nghttp2-client ngtcp2-client)" >&2
    exit 2
  }
done
cargo build --release --target wasm32-wasip2 --manifest-path examples/Cargo.toml
[ -x "$WEDGE" ] || cargo build --release -p wedge
components=$PWD/examples/target/wasm32-wasip2/release

work=$(mktemp -d /tmp/wedge-soak.XXXXXX)
echo "soak: working in $work"
printf 'soak-token-%s\n' "$RANDOM$RANDOM$RANDOM" > "$work/token"
cat > "$work/wedge.toml" <<EOF
listen = "127.0.0.1:0"
tls_listen = "127.0.0.1:0"
admin = "127.0.0.1:0"
admin_token_file = "token"

[[app]]
name = "hello"
component = "$components/hello.wasm"
routes = ["/hello"]

[[app]]
name = "echo"
component = "$components/echo.wasm"
routes = ["/echo"]

[[app]]
name = "feed"
component = "$components/feed.wasm"
routes = ["/feed"]

[[app]]
name = "faults"
component = "$components/faults.wasm"
routes = ["/"]
EOF

WEDGE_DATA_DIR=$work/data WEDGE_LOG=info "$WEDGE" serve --config "$work/wedge.toml" \
  > "$work/stdout" 2> "$work/stderr" &
wedge_pid=$!
loops=()
cleanup() {
  for pid in "${loops[@]}"; do kill "$pid" 2>/dev/null || true; done
  kill "$wedge_pid" 2>/dev/null || true
}
trap cleanup EXIT

for _ in $(seq 600); do
  grep -q "serving" "$work/stdout" 2>/dev/null && grep -q "admin API on" "$work/stderr" && break
  sleep 0.1
done
line=$(grep "serving" "$work/stdout") || { echo "soak: wedge did not start" >&2; cat "$work/stderr" >&2; exit 1; }
plain=$(grep -o 'http://[0-9.:]*' <<<"$line" | head -1)
tls=$(grep -o 'https://[0-9.:]*' <<<"$line" | head -1)
tls_port=${tls##*:}
admin=$(grep -o 'admin API on http://[0-9.:]*' "$work/stderr" | head -1 | cut -d' ' -f4)
[ -n "$admin" ] || { echo "soak: no admin API address logged" >&2; exit 1; }
auth="Authorization: Bearer $(tr -d '\n' < "$work/token")"
echo "soak: wedge $wedge_pid on $plain, $tls (h3 on udp $tls_port), admin $admin; ${DURATION}s"

start=$(date +%s)
end=$((start + DURATION))
outcomes=$work/outcomes
: > "$outcomes"
# One line per client outcome: LOOP PROTOCOL OUTCOME.
note() { echo "$1 $2 $3" >> "$outcomes"; }
running() { [ "$(date +%s)" -lt "$end" ]; }
h3() { # h3 URL [gtlsclient options...]
  local url=$1; shift
  gtlsclient --quiet --exit-on-all-streams-close --timeout=5s "$@" \
    127.0.0.1 "$tls_port" "https://127.0.0.1:$tls_port$url" > /dev/null 2>&1
}

# curl outcome of one request: ok, or the status / exit code that was not wanted.
curl_outcome() { # want_status curl-args...
  local want=$1; shift
  local code status
  status=$(curl --silent --max-time 30 -o /dev/null -w '%{http_code}' "$@") && code=0 || code=$?
  if [ "$code" -eq 0 ] && [ "$status" = "$want" ]; then echo ok
  elif [ "$code" -eq 0 ]; then echo "status-$status"
  else echo "curl-exit-$code"; fi
}

hello_h1() {
  for ((i = 0; i < MAX_ROUNDS && $(date +%s) < end; i++)); do
    h2load --h1 -n 2000 -c 8 "$plain/hello" > "$work/h2load-h1.txt" 2>&1 || true
    awk '/^requests:/ { print "hello h1 ok", $8; print "hello h1 failed", $10 }' \
      "$work/h2load-h1.txt" >> "$work/h2load-counts"
  done
}

hello_h2() {
  for ((i = 0; i < MAX_ROUNDS && $(date +%s) < end; i++)); do
    h2load -n 4000 -c 4 -m 16 "$plain/hello" > "$work/h2load-h2.txt" 2>&1 || true
    awk '/^requests:/ { print "hello h2 ok", $8; print "hello h2 failed", $10 }' \
      "$work/h2load-h2.txt" >> "$work/h2load-counts"
  done
}

hello_h3() {
  for ((i = 0; i < MAX_ROUNDS && $(date +%s) < end; i++)); do
    rm -rf "$work/h3-hello" && mkdir -p "$work/h3-hello"
    if h3 /hello -n 50 --download "$work/h3-hello"; then note hello h3 ok
    else note hello h3 "gtlsclient-exit-$?"; fi
  done
}

echo_large() {
  head -c $((4 * 1024 * 1024)) /dev/urandom > "$work/echo.in"
  local size
  size=$(stat -c %s "$work/echo.in")
  for ((i = 0; i < MAX_ROUNDS && $(date +%s) < end; i++)); do
    for proto in h1 h2; do
      local flag=--http1.1
      [ "$proto" = h2 ] && flag=--http2-prior-knowledge
      local got code=0
      got=$(curl --silent --max-time 60 $flag --data-binary "@$work/echo.in" \
        -o /dev/null -w '%{http_code} %{size_download}' "$plain/echo") || code=$?
      if [ "$code" -ne 0 ]; then note echo $proto "curl-exit-$code"
      elif [ "$got" = "200 $size" ]; then note echo $proto ok
      else note echo $proto "got-$got"; fi
    done
    rm -rf "$work/h3-echo" && mkdir -p "$work/h3-echo"
    if h3 /echo -m POST -d "$work/echo.in" --download "$work/h3-echo" \
        && [ "$(stat -c %s "$work/h3-echo/echo" 2>/dev/null)" = "$size" ]; then
      note echo h3 ok
    else note echo h3 failed; fi
  done
}

feed_slow() {
  for ((i = 0; i < MAX_ROUNDS && $(date +%s) < end; i++)); do
    for proto in h1 h2; do
      local flag=--http1.1
      [ "$proto" = h2 ] && flag=--http2-prior-knowledge
      local code=0
      curl --silent $flag --limit-rate 256k --max-time 2 -o /dev/null "$plain/feed" || code=$?
      # 28: the time limit: dropped mid-feed, as meant.
      if [ "$code" -eq 28 ]; then note feed $proto dropped
      else note feed $proto "curl-exit-$code"; fi
    done
    local code
    # In a subshell that waits: bash reports a killed job on that shell's stderr.
    code=$( (timeout -s KILL 2 gtlsclient --quiet --max-stream-data-bidi-local=262144 \
      127.0.0.1 "$tls_port" "https://127.0.0.1:$tls_port/feed" > /dev/null 2>&1; echo $?) 2> /dev/null)
    if [ "$code" -eq 137 ]; then note feed h3 dropped; else note feed h3 "exit-$code"; fi
  done
}

resets() {
  for ((i = 0; i < MAX_ROUNDS && $(date +%s) < end; i++)); do
    for proto in h1 h2; do
      local flag=--http1.1
      [ "$proto" = h2 ] && flag=--http2-prior-knowledge
      local code=0
      curl --silent $flag --max-time 0.3 -o /dev/null "$plain/sleep?ms=2000" || code=$?
      if [ "$code" -eq 28 ]; then note reset $proto abandoned
      else note reset $proto "curl-exit-$code"; fi
    done
    local code
    code=$( (timeout -s KILL 0.3 gtlsclient --quiet 127.0.0.1 "$tls_port" \
      "https://127.0.0.1:$tls_port/sleep?ms=2000" > /dev/null 2>&1; echo $?) 2> /dev/null)
    if [ "$code" -eq 137 ]; then note reset h3 abandoned; else note reset h3 "exit-$code"; fi
  done
}

traps() {
  for ((i = 0; i < MAX_ROUNDS && $(date +%s) < end; i++)); do
    note trap-before-head h1 "$(curl_outcome 500 --http1.1 "$plain/trap-before-head")"
    note trap-before-head h2 "$(curl_outcome 500 --http2-prior-knowledge "$plain/trap-before-head")"
    for proto in h1 h2; do
      local flag=--http1.1
      [ "$proto" = h2 ] && flag=--http2-prior-knowledge
      local code=0
      curl --silent $flag --max-time 30 -o /dev/null "$plain/trap-mid-body" || code=$?
      # The aborted body meant: 18 (h1: partial body), 52 (h1: closed before the
      # head was flushed), 92 (h2: stream reset).
      case $code in
        18|52|92) note trap-mid-body $proto aborted ;;
        *) note trap-mid-body $proto "curl-exit-$code" ;;
      esac
    done
    if h3 /trap-before-head; then note trap-before-head h3 answered
    else note trap-before-head h3 "gtlsclient-exit-$?"; fi
  done
}

rss_kib() { awk '/^VmRSS:/ { print $2 }' "/proc/$wedge_pid/status"; }
: > "$work/h2load-counts"
for load in hello_h1 hello_h2 hello_h3 echo_large feed_slow resets traps; do
  $load &
  loops+=($!)
done

echo "seconds rss_kib" > "$work/rss"
while running; do
  echo "$(($(date +%s) - start)) $(rss_kib)" >> "$work/rss"
  sleep "$RSS_EVERY"
done
for pid in "${loops[@]}"; do wait "$pid" || true; done
loops=()
echo "$(($(date +%s) - start)) $(rss_kib)" >> "$work/rss"

# Every client is gone: let the server settle (the abandoned HTTP/3 connections idle
# out), then read its counts.
for _ in $(seq 120); do
  busy=$(curl --silent -H "$auth" "$admin/metrics" | awk '/^wedge_instances_running/ { s += $2 } END { print s + 0 }')
  [ "$busy" = 0 ] && break
  sleep 0.5
done
curl --silent -H "$auth" "$admin/metrics" > "$work/metrics"
settled_rss=$(rss_kib)
kill -TERM "$wedge_pid"
wait "$wedge_pid" || true

echo
echo "== requests answered (server), by protocol and status class"
awk '/^wedge_requests_total/ && $2 > 0 {
  match($0, /protocol="[^"]*"/); p = substr($0, RSTART + 10, RLENGTH - 11)
  match($0, /status="[^"]*"/); s = substr($0, RSTART + 8, RLENGTH - 9)
  n[p " " s] += $2; t += $2 }
  END { for (k in n) printf "  %-10s %d\n", k, n[k]; printf "  total      %d\n", t }' "$work/metrics" | sort
echo "== guest faults (server), by kind"
awk '/^wedge_guest_faults_total/ && $2 > 0 { match($0, /kind="[^"]*"/); k = substr($0, RSTART + 6, RLENGTH - 7); n[k] += $2 }
  END { for (k in n) printf "  %-12s %d\n", k, n[k] }' "$work/metrics" | sort
echo "== connections closed for a peer fault (server), by reason"
awk '/^wedge_connections_closed_total/ && $2 > 0 { print "  " $0 }' "$work/metrics"
echo "== instances running after the load: $(awk '/^wedge_instances_running/ { s += $2 } END { print s + 0 }' "$work/metrics")"
echo "== client outcomes, by loop, protocol and outcome"
awk '{ n[$1 " " $2 " " $3] += $4 } END { for (k in n) printf "  %-28s %d\n", k, n[k] }' \
  "$work/h2load-counts" | sort
sort "$outcomes" | uniq -c | awk '{ printf "  %-28s %d\n", $2 " " $3 " " $4, $1 }'
echo "== RSS (KiB), sampled every ${RSS_EVERY}s"
awk -v warm="$WARMUP" -v settled="$settled_rss" 'NR > 1 {
    if (first == "") first = $2
    if ($1 <= warm) at_warm = $2
    if ($2 > peak) { peak = $2; peak_at = $1 }
    if ($1 > warm && $2 > peak_after) peak_after = $2
    last = $2 }
  END {
    printf "  start %d, after warm-up (%ds) %d, peak %d (at %ds), peak after warm-up %d, end of load %d, settled %d\n",
      first, warm, at_warm, peak, peak_at, peak_after, last, settled }' "$work/rss"
echo "soak: samples in $work/rss, outcomes in $work/outcomes, metrics in $work/metrics"
