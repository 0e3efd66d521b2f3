#!/usr/bin/env bash
# The mutation fuzzer: 100,000 cases over the receipt parser and every JSON body of the HTTP API,
# through the real server, simulator and PostgreSQL on loopback (see `ledger-bench fuzz --help`).
# Prints the counts per target and cases/s; exits 1 if any case crashed, answered 5xx, was
# refused without a JSON error, or recorded something though refused. Release build.
#   bash Benchmarks/fuzz.sh                 # a seed from the clock, printed
#   bash Benchmarks/fuzz.sh --seed 13       # the same mutations again
set -euo pipefail
cd "$(dirname "$0")/.."
swift build -c release --product ledger >/dev/null
swift build -c release --product ledger-bench >/dev/null
.build/release/ledger-bench fuzz --cases 100000 "$@"
