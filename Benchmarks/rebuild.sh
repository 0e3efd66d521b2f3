#!/usr/bin/env bash
# The rebuild benchmark: seed a realistic history (default 1,000,000 events) into a
# scratch database, then time `projections rebuild --all` against a raw scan-and-COPY baseline in
# the same run. Release build.
#   bash Benchmarks/rebuild.sh [EVENTS]
set -euo pipefail
cd "$(dirname "$0")/.."
events="${1:-1000000}"
swift build -c release --product ledger >/dev/null
swift build -c release --product ledger-bench >/dev/null
ledger=.build/release/ledger
base_url="${LEDGER_DATABASE_URL:-$("$ledger" db start >/dev/null && "$ledger" db url)}"
admin_url="$("$ledger" db url --admin 2>/dev/null || echo "$base_url")"
psql "$admin_url" -qc "DROP DATABASE IF EXISTS ledger_rebuild_bench WITH (FORCE)" -c "CREATE DATABASE ledger_rebuild_bench OWNER ${LEDGER_BENCH_OWNER:-ledger}"
url="${base_url%/*}/ledger_rebuild_bench?sslmode=disable"
.build/release/ledger-bench seed --database-url "$url" --apps 5 --users 20000 --events "$events" --log-level warning
.build/release/ledger-bench rebuild --database-url "$url" --log-level warning
