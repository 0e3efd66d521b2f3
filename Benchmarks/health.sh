#!/usr/bin/env bash
# /health under a load balancer's probes, beside a route that answers without the database (an
# unauthenticated 404), on the same server in the same run: with a reading of the database kept for
# a second (the default), then with every probe reading it (LEDGER_HEALTH_READING_SECONDS=0).
# Needs wrk (apt-get install wrk). Release build; the managed local PostgreSQL or $LEDGER_DATABASE_URL.
#   bash Benchmarks/health.sh [SECONDS] [CONNECTIONS]
set -euo pipefail
cd "$(dirname "$0")/.."
seconds="${1:-10}"
connections="${2:-16}"
swift build -c release --product ledger >/dev/null
ledger=.build/release/ledger
port="${LEDGER_BENCH_PORT:-18481}"
log="$(mktemp)"
trap 'kill "$server" 2>/dev/null || true; rm -f "$log"' EXIT
measure() { # path → "requests/s p99"
    wrk -t 2 -c "$connections" -d "${seconds}s" --latency "http://127.0.0.1:$port$1" \
        | awk '/Requests\/sec/ { rate = $2 } /^ +99%/ { p99 = $2 } END { print rate, p99 }'
}
for kept in 1 0; do
    LEDGER_HEALTH_READING_SECONDS="$kept" "$ledger" serve --port "$port" --log-level warning >"$log" 2>&1 &
    server=$!
    for _ in $(seq 1 300); do curl -fs "http://127.0.0.1:$port/health" >/dev/null 2>&1 && break; sleep 0.2; done
    curl -fs "http://127.0.0.1:$port/health" >/dev/null || { cat "$log"; exit 1; }
    wrk -t 2 -c "$connections" -d 3s "http://127.0.0.1:$port/v1/no-such-route" >/dev/null   # warm-up
    read -r static_rate static_p99 <<<"$(measure /v1/no-such-route)"
    read -r health_rate health_p99 <<<"$(measure /health)"
    echo "reading kept ${kept} s: /health ${health_rate} requests/s (p99 ${health_p99}); 404 without the database ${static_rate} requests/s (p99 ${static_p99}); ratio $(awk -v h="$health_rate" -v s="$static_rate" 'BEGIN { printf "%.2f", h / s }')"
    kill "$server"; wait "$server" 2>/dev/null || true
done
