#!/usr/bin/env bash
# The receipt-verification benchmark: the real client against the simulator on
# loopback, 16 requests in flight; receipts/s and the client's added latency. Release build.
#   bash Benchmarks/verify.sh [RECEIPTS]
set -euo pipefail
cd "$(dirname "$0")/.."
swift build -c release --product ledger >/dev/null
swift build -c release --product ledger-bench >/dev/null
.build/release/ledger-bench verify --receipts "${1:-20000}" --concurrency 16
