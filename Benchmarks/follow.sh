#!/usr/bin/env bash
# The follow benchmark: seed a realistic history (default 300,000 events) into a scratch database,
# then time the change writer over the whole log, one consumer reading the busiest app's feed
# through HTTP in pages of 1,000 against the same pages in SQL, and webhook delivery of the app's
# last 5,000 changes; then `ledger.append` at 16 writers, batch 1 (the ingest rate delivery must
# keep up with). Release build.
#   bash Benchmarks/follow.sh [EVENTS]
set -euo pipefail
cd "$(dirname "$0")/.."
events="${1:-300000}"
swift build -c release --product ledger >/dev/null
swift build -c release --product ledger-bench >/dev/null
ledger=.build/release/ledger
base_url="${LEDGER_DATABASE_URL:-$("$ledger" db start >/dev/null && "$ledger" db url)}"
admin_url="$("$ledger" db url --admin 2>/dev/null || echo "$base_url")"
owner_url="${LEDGER_OWNER_DATABASE_URL:-$("$ledger" db url --owner 2>/dev/null || echo "$base_url")}"
owner="${owner_url#*://}"; owner="${owner%%[:@]*}"
psql "$admin_url" -qc "DROP DATABASE IF EXISTS ledger_follow_bench WITH (FORCE)" -c "CREATE DATABASE ledger_follow_bench OWNER ${LEDGER_BENCH_OWNER:-$owner}"
url="${base_url%/*}/ledger_follow_bench?sslmode=disable"
export LEDGER_OWNER_DATABASE_URL="${owner_url%/*}/ledger_follow_bench?sslmode=disable"
.build/release/ledger-bench seed --database-url "$url" --apps 5 --users 20000 --events "$events" --log-level warning
.build/release/ledger-bench follow --database-url "$url" --log-level warning
.build/release/ledger-bench append --concurrency 16 --events 10000 --batch 1
