#!/usr/bin/env bash
# The reconciliation benchmark: a month of TRANSACTIONS purchases (default 1,000,000) reconciled
# with Apple's 30 daily reports, against the same aggregation of the audit table as one SQL
# statement. Scratch database; release build.
#   bash Benchmarks/reconcile.sh [TRANSACTIONS]
set -euo pipefail
cd "$(dirname "$0")/.."
swift build -c release --product ledger-bench >/dev/null
.build/release/ledger-bench reconcile --transactions "${1:-1000000}"
