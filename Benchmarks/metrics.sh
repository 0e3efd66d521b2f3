#!/usr/bin/env bash
# The metrics benchmark: a year of SUBSCRIBERS monthly subscriptions (default 100,000): the year's
# subscription metrics and a month's close, each against the rows it reads in one SQL statement.
# Scratch database; release build.
#   bash Benchmarks/metrics.sh [SUBSCRIBERS]
set -euo pipefail
cd "$(dirname "$0")/.."
swift build -c release --product ledger-bench >/dev/null
.build/release/ledger-bench metrics --subscribers "${1:-100000}"
