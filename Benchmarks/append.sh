#!/usr/bin/env bash
# The append benchmark matrix: C=1 and C=16, batch 1 and batch 100, each against the
# raw INSERT baseline in the same run (see `ledger-bench append --help`). Release build.
#   bash Benchmarks/append.sh            # uses the managed local PostgreSQL or $LEDGER_DATABASE_URL
set -euo pipefail
cd "$(dirname "$0")/.."
swift build -c release --product ledger >/dev/null
swift build -c release --product ledger-bench >/dev/null
ledger=.build/release/ledger
for concurrency in 1 16; do
    for batch in 1 100; do
        if [ "$batch" = 1 ]; then events=$(( concurrency == 1 ? 3000 : 20000 )); else events=100000; fi
        .build/release/ledger-bench append --concurrency "$concurrency" --streams 1000 --events "$events" --batch "$batch" --log-level warning
        echo
    done
done
