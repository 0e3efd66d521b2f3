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
# The owner role migrates the scratch database (the server's role cannot) and owns it.
owner_url="${LEDGER_OWNER_DATABASE_URL:-$("$ledger" db url --owner 2>/dev/null || echo "$base_url")}"
owner="${owner_url#*://}"; owner="${owner%%[:@]*}"
psql "$admin_url" -qc "DROP DATABASE IF EXISTS ledger_rebuild_bench WITH (FORCE)" -c "CREATE DATABASE ledger_rebuild_bench OWNER ${LEDGER_BENCH_OWNER:-$owner}"
url="${base_url%/*}/ledger_rebuild_bench?sslmode=disable"
export LEDGER_OWNER_DATABASE_URL="${owner_url%/*}/ledger_rebuild_bench?sslmode=disable"
.build/release/ledger-bench seed --database-url "$url" --apps 5 --users 20000 --events "$events" --log-level warning
.build/release/ledger-bench rebuild --database-url "$url" --log-level warning
