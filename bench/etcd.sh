#!/usr/bin/env bash
# bench/etcd.sh: the store on etcd against tcpstore-server, on this machine.
#
#   bench/etcd.sh [BUILD]          (default build; needs etcd, etcdctl)
#
# Starts a 3-member etcd cluster on loopback (data in a temp dir, removed
# at exit), a tcpstore-server and a tcpstore-server --backend front-end on
# it, then measures
#   1. set, get, add, wait (of a present key): ops/s and latency
#      percentiles with tcpstore-bench (C clients, 1 and 8 connections)
#      through tcpstore-server, the etcd:// client and the front-end;
#   2. fccl-run -n N init + barrier + finalize (bench/init_barrier), RUNS
#      times each, through an in-process tcpstore-server and through etcd;
#   3. the etcd requests per rank of that bootstrap (the sum of etcd's
#      grpc_server_started_total over the members, before and after).
# Environment: N (default 64), RUNS (default 5), OPS (requests per op and
# point, default 2000).
set -eu
BUILD=${1:-build}
N=${N:-64}
RUNS=${RUNS:-5}
OPS=${OPS:-2000}
BIN=$BUILD/bin
command -v etcd >/dev/null || { echo "etcd.sh: needs etcd (etcd-server)" >&2; exit 2; }
DIR=$(mktemp -d /tmp/fccl-etcd-bench-XXXXXX)
PIDS=()
cleanup() {
    for p in "${PIDS[@]}"; do kill -9 "$p" 2>/dev/null || true; done
    wait 2>/dev/null || true
    rm -rf "$DIR"
}
trap cleanup EXIT

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

CL="" EP=""
declare -a CP PP
for i in 0 1 2; do
    CP[$i]=$(free_port); PP[$i]=$(free_port)
    CL+="${CL:+,}m$i=http://127.0.0.1:${PP[$i]}"
    EP+="${EP:+,}127.0.0.1:${CP[$i]}"
done
for i in 0 1 2; do
    etcd --name m$i --data-dir "$DIR/m$i" \
        --listen-client-urls http://127.0.0.1:${CP[$i]} \
        --advertise-client-urls http://127.0.0.1:${CP[$i]} \
        --listen-peer-urls http://127.0.0.1:${PP[$i]} \
        --initial-advertise-peer-urls http://127.0.0.1:${PP[$i]} \
        --initial-cluster "$CL" --initial-cluster-token "$DIR" \
        >"$DIR/m$i.log" 2>&1 &
    PIDS+=($!)
done
for _ in $(seq 100); do
    ETCDCTL_API=3 etcdctl --endpoints="$EP" endpoint health >/dev/null 2>&1 && break
    sleep 0.2
done
ETCD="etcd://$EP"

start_server() { # label args... -> sets SRV_ADDR
    local label=$1
    shift
    "$BIN/tcpstore-server" --host 127.0.0.1 --port 0 --log-level warn "$@" \
        >"$DIR/srv.$label.out" 2>"$DIR/srv.$label.log" &
    PIDS+=($!)
    for _ in $(seq 200); do
        grep -q "^listening on" "$DIR/srv.$label.out" 2>/dev/null && break
        sleep 0.05
    done
    SRV_ADDR=$(sed -n 's/^listening on //p' "$DIR/srv.$label.out")
    [ -n "$SRV_ADDR" ] || { echo "etcd.sh: $label server did not start:" \
        "$(cat "$DIR/srv.$label.log")" >&2; exit 1; }
}
start_server plain
TCP=$SRV_ADDR
start_server fe --backend "$ETCD/fe"
FE=$SRV_ADDR

uptime | sed 's/^/# load: /'
echo "# 1. per-operation latency and ops/s (tcpstore-bench, 100-byte values)"
for c in 1 8; do
    for t in "tcpstore-server $TCP" "etcd-client $ETCD/bench" "front-end $FE"; do
        set -- $t
        "$BIN/tcpstore-bench" --addr "$2" -c "$c" -t set,get,add,wait \
            -n "$OPS" --label "$1" --timeout 60 | grep '^csv,' | grep -v '^csv,label'
    done
done

requests() { # sum of grpc requests over the members
    local sum=0
    for i in 0 1 2; do
        v=$(curl -s http://127.0.0.1:${CP[$i]}/metrics |
            awk '/^grpc_server_started_total/ {s += $2} END {print s + 0}')
        sum=$((sum + ${v%.*}))
    done
    echo "$sum"
}

echo "# 2. fccl-run -n $N init + barrier + finalize: wall seconds"
export FCCL_TIMEOUT=${FCCL_TIMEOUT:-240}
for r in $(seq "$RUNS"); do
    t0=$(date +%s.%N)
    timeout 300 "$BIN/fccl-run" -n "$N" "$BUILD/bench/init_barrier" >/dev/null
    t1=$(date +%s.%N)
    before=$(requests)
    t2=$(date +%s.%N)
    timeout 300 "$BIN/fccl-run" -n "$N" --store "$ETCD/init$r" \
        "$BUILD/bench/init_barrier" >/dev/null
    t3=$(date +%s.%N)
    after=$(requests)
    echo "run $r tcpstore $(echo "$t1 - $t0" | bc) etcd $(echo "$t3 - $t2" | bc)" \
        "etcd_requests $((after - before)) per_rank" \
        "$(echo "scale=1; ($after - $before) / $N" | bc)"
done
