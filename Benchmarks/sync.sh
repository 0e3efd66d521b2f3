#!/usr/bin/env bash
# The notification gap-fill benchmark: a walk of Apple's notification history (the simulator's,
# on loopback) that finds NOTIFICATIONS of which MISSING are not in the log, against a raw walk of
# the same pages. Scratch database; release build.
#   bash Benchmarks/sync.sh [NOTIFICATIONS] [MISSING]
set -euo pipefail
cd "$(dirname "$0")/.."
swift build -c release --product ledger-bench >/dev/null
.build/release/ledger-bench sync --notifications "${1:-10000}" --missing "${2:-100}"
