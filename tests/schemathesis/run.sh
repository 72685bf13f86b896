#!/usr/bin/env bash
# Property-based API testing of a real server against its own /openapi.json (schemathesis).
#
#   bash tests/schemathesis/run.sh            # builds, starts a server on loopback, runs, stops
#   EXAMPLES=300 bash tests/schemathesis/run.sh
#
# Installs schemathesis from PyPI into target/schemathesis-venv on first use. Bounded: a fixed
# number of examples per operation and a fixed seed, so runs are reproducible. Reports go to
# target/schemathesis/. Exit status is schemathesis's (non-zero when any check fails).
set -euo pipefail
cd "$(dirname "$0")/../.."
TARGET=${CARGO_TARGET_DIR:-target}
VENV="$TARGET/schemathesis-venv"
OUT="$TARGET/schemathesis"
PORT=${PORT:-18181}
EXAMPLES=${EXAMPLES:-100}
if [ ! -x "$VENV/bin/st" ]; then
    python3 -m venv "$VENV"
    "$VENV/bin/pip" install -q "schemathesis==4.32.5"
fi
cargo build --quiet
DATA=$(mktemp -d)
ADMIN="st-admin-$RANDOM$RANDOM"
EPISODIC_ADMIN_KEY=$ADMIN EPISODIC_DATA_DIR=$DATA EPISODIC_LISTEN=127.0.0.1:$PORT \
    "$TARGET/debug/episodic" serve >"$DATA/server.log" 2>&1 &
SERVER=$!
trap 'kill $SERVER 2>/dev/null; wait $SERVER 2>/dev/null; rm -rf "$DATA"' EXIT
for _ in $(seq 1 120); do
    curl -sf "http://127.0.0.1:$PORT/readyz" >/dev/null && break
    sleep 1
done
KEY=$(curl -sf -X POST "http://127.0.0.1:$PORT/v1/admin/keys" -H "Authorization: Bearer $ADMIN" \
    -H 'content-type: application/json' \
    -d '{"tenantId":"st","roles":["writer","reader","memory_reviewer","operator"]}' |
    python3 -c 'import sys, json; print(json.load(sys.stdin)["key"])')
mkdir -p "$OUT"
status=0
"$VENV/bin/st" run "http://127.0.0.1:$PORT/openapi.json" -H "Authorization: Bearer $KEY" \
    --checks all --max-examples "$EXAMPLES" --seed 7 --workers 2 --exclude-path /mcp \
    --report-json-path "$OUT/report.json" | tee "$OUT/run.log" || status=$?
if grep -q "panicked" "$DATA/server.log"; then
    echo "server log shows a panic" >&2
    status=1
fi
exit $status
