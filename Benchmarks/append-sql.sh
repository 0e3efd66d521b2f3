#!/usr/bin/env bash
# ledger.append at the SQL level, through pgbench, beside plain INSERTs of the same ~360-byte event:
# into a table with a primary key only, and into one indexed as ledger.events is. Interleaved
# rounds, each workload in turn; durable commits as the ledger's own server makes them; prepared
# statements on every side. Prints events/s of each round and the ratios of the medians.
#   bash Benchmarks/append-sql.sh [SECONDS_PER_ROUND] [ROUNDS]
# With MESSAGE_DB=<a checkout of github.com/message-db/message-db>/database, Message DB's
# write_message too (a category per client, and one category for all), installed in the scratch
# database. Uses the managed local PostgreSQL, or $LEDGER_DATABASE_URL / $LEDGER_OWNER_DATABASE_URL.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds="${1:-10}"
rounds="${2:-2}"
swift build -c release --product ledger >/dev/null
swift build -c release --product ledger-bench >/dev/null
ledger=.build/release/ledger
base_url="${LEDGER_DATABASE_URL:-$("$ledger" db start >/dev/null && "$ledger" db url)}"
owner_url="${LEDGER_OWNER_DATABASE_URL:-$("$ledger" db url --owner 2>/dev/null || echo "$base_url")}"
database="${base_url##*/}"; database="${database%%\?*}"
# The scratch database <database>_bench with every migration and the two baseline tables.
.build/release/ledger-bench append --concurrency 1 --events 16 --keep --log-level warning >/dev/null
url="${owner_url%/*}/${database}_bench?sslmode=disable"
pgbench="$(command -v pgbench || ls /usr/lib/postgresql/*/bin/pgbench | tail -1)"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

data='{"transactionId":"1000000000123","originalTransactionId":"1000000000123","productId":"com.example.app.coins.pack3","productType":"consumable","quantity":2,"purchaseDate":"2026-11-21T10:17:00Z","environment":"production","deviceId":"device-17","price":"0.99","currency":"USD","receiptHash":"9e3779b99e3779b99e3779b99e3779b99e3779b99e3779b99e3779b99e3779b9"}'
meta='{"requestId":"5B2E1F0C-3C1D-4B8E-9A0F-2D6A1C7E8F90","apiKeyId":"bench","source":"append-sql.sh"}'
key="'appstore/com.example.app/production/payment/' || gen_random_uuid()"
stream="'bench/' || (:client_id * 1000 + :s)"
columns="(stream_id, event_id, event_type, data, metadata, dedup_key, hash)"
for batch in 1 100; do
    if [ "$batch" = 1 ]; then
        ids="ARRAY[gen_random_uuid()]"; types="'{PurchaseRecorded.v1}'"; datas="ARRAY['$data']"; metas="ARRAY['$meta']"; keys="ARRAY[$key]"
        rows="VALUES ($stream, gen_random_uuid(), 'PurchaseRecorded.v1', '$data', '$meta', $key, sha256('x'))"
    else
        ids="(SELECT array_agg(gen_random_uuid()) FROM generate_series(1, $batch))"
        types="array_fill('PurchaseRecorded.v1'::text, ARRAY[$batch])"
        datas="array_fill('$data'::text, ARRAY[$batch])"; metas="array_fill('$meta'::text, ARRAY[$batch])"
        keys="(SELECT array_agg($key) FROM generate_series(1, $batch))"
        rows="SELECT $stream, gen_random_uuid(), 'PurchaseRecorded.v1', '$data'::text::jsonb, '$meta'::text::jsonb, $key, sha256('x') FROM generate_series(1, $batch)"
    fi
    printf '\\set s random(1, 1000)\nSELECT * FROM ledger.append(%s, NULL, %s, %s, %s, %s, %s, false);\n' \
        "$stream" "$ids" "$types" "$datas" "$metas" "$keys" > "$work/append-$batch.sql"
    printf '\\set s random(1, 1000)\nINSERT INTO ledger_bench.raw_events %s %s;\n' "$columns" "$rows" > "$work/raw-$batch.sql"
    printf '\\set s random(1, 1000)\nINSERT INTO ledger_bench.raw_events_indexed %s %s;\n' "$columns" "$rows" > "$work/indexed-$batch.sql"
done
workloads_1="append raw indexed"
if [ -n "${MESSAGE_DB:-}" ]; then
    # Message DB 1.3 as its own installer lays it out: schema, table, functions, indexes.
    {
        echo "DROP SCHEMA IF EXISTS message_store CASCADE;"
        for file in schema/message-store.sql tables/messages.sql types/message.sql functions/message-store-version.sql \
                    functions/hash-64.sql functions/acquire-lock.sql functions/category.sql functions/is-category.sql \
                    functions/id.sql functions/cardinal-id.sql functions/stream-version.sql functions/write-message.sql \
                    indexes/messages-id.sql indexes/messages-stream.sql indexes/messages-category.sql; do
            cat "$MESSAGE_DB/$file"; echo
        done
    } > "$work/message-db.sql"
    PGOPTIONS="-c search_path=message_store,public -c client_min_messages=warning" psql "$url" -q -v ON_ERROR_STOP=1 -f "$work/message-db.sql"
    printf '\\set s random(1, 1000)\nSELECT message_store.write_message(gen_random_uuid()::text, %s, %s, %s, %s);\n' \
        "'bench' || :client_id || '-' || :s" "'PurchaseRecorded'" "'$data'" "'$meta'" > "$work/mdb-per-client-1.sql"
    printf '\\set s random(1, 1000)\nSELECT message_store.write_message(gen_random_uuid()::text, %s, %s, %s, %s);\n' \
        "'bench-' || (:client_id * 1000 + :s)" "'PurchaseRecorded'" "'$data'" "'$meta'" > "$work/mdb-one-category-1.sql"
    workloads_1="$workloads_1 mdb-per-client mdb-one-category"
fi

median() { tr ' ' '\n' | grep -v '^$' | sort -n | awk '{ a[NR] = $1 } END { print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2 }'; }
run() { # workload batch clients → events/s
    local options=""
    case "$1" in mdb-*) options="-c search_path=message_store,public" ;; esac
    local tps
    tps="$(PGOPTIONS="$options" "$pgbench" -n -M prepared -c "$3" -j "$(( $3 < 2 ? $3 : 2 ))" -T "$seconds" -f "$work/$1-$2.sql" "$url" 2>&1 | awk '/^tps/ { print $3 }')"
    awk -v t="${tps:-0}" -v b="$2" 'BEGIN { printf "%.0f", t * b }'
}
for clients in 1 16; do
    for batch in 1 100; do
        workloads="append raw indexed"
        [ "$batch" = 1 ] && workloads="$workloads_1"
        declare -A figures=()
        for round in $(seq 1 "$rounds"); do
            for workload in $workloads; do
                figures[$workload]="${figures[$workload]:-} $(run "$workload" "$batch" "$clients")"
            done
        done
        echo "clients=$clients batch=$batch (events/s per round; ${seconds} s each)"
        for workload in $workloads; do printf '  %-18s %s\n' "$workload" "${figures[$workload]}"; done
        append="$(echo "${figures[append]}" | median)"
        for workload in $workloads; do
            [ "$workload" = append ] && continue
            printf '  append / %-18s %.2f\n' "$workload" "$(awk -v a="$append" -v b="$(echo "${figures[$workload]}" | median)" 'BEGIN { print a / b }')"
        done
        unset figures
    done
done
admin_url="$("$ledger" db url --admin 2>/dev/null || echo "$owner_url")"
psql "$admin_url" -qc "DROP DATABASE IF EXISTS ${database}_bench WITH (FORCE)"
