#!/usr/bin/env bash
# The HTTP load benchmark: receipts ingested/s and entitlement reads/s at 16 connections
# on loopback, with p50/p99, against the simulator; then `bench append` at the same concurrency,
# batch 1, and the ratio (see `ledger-bench http --help`). Release build.
#   bash Benchmarks/http.sh            # uses the managed local PostgreSQL or $LEDGER_DATABASE_URL
#   bash Benchmarks/http.sh --apart    # the server and the simulator as processes of their own: CPU per request of each
set -euo pipefail
cd "$(dirname "$0")/.."
swift build -c release --product ledger >/dev/null
swift build -c release --product ledger-bench >/dev/null
.build/release/ledger-bench http --workers 16 --receipts 4000 --reads 20000 --append-events 20000 "$@"
