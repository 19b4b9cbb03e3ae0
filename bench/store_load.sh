#!/usr/bin/env bash
# Load figures for tcpstore-server under hostile and heavy clients (issue 9).
# Each scenario: a fresh server on 127.0.0.1, the hostile clients of
# bench/store_hostile.py started and settled, then 16 tcpstore-bench clients
# doing set,get of 100-byte values for SEC seconds; printed: their ops/s and
# p99, the server's RSS (now and peak) and its STATS loop_turn_max_us.
#
#   bench/store_load.sh [SEC] [SCENARIO...]
# Scenarios: base idle5000 slowloris200 nonreader50 cycles10000 bigset64m
#            list1m (default: all)
# SERVER_BIN=DIR runs the server from DIR (an older build: its figures lack
# the STATS fields).
set -euo pipefail
cd "$(dirname "$0")/.."
SEC=${1:-5}
shift || true
B=${FCCL_BIN:-build/bin}
SB=${SERVER_BIN:-$B}   # the server's directory (e.g. an older build to compare)
PY=/usr/bin/python3
H=bench/store_hostile.py
ALL="base idle5000 slowloris200 nonreader50 cycles10000 bigset64m list1m"
SCEN=${*:-$ALL}
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT

start_server() {
    "$SB/tcpstore-server" --host 127.0.0.1 --port 0 "$@" >"$TMP/srv.out" 2>"$TMP/srv.err" &
    SPID=$!
    for _ in $(seq 100); do
        grep -q listening "$TMP/srv.out" 2>/dev/null && break
        sleep 0.05
    done
    ADDR=127.0.0.1:$(sed -n 's/.*:\([0-9]*\)$/\1/p' "$TMP/srv.out")
}

# start_hostile MODE N [SIZE]: background, wait for its first line
start_hostile() {
    $PY $H "$ADDR" "$@" >"$TMP/h.out" 2>&1 &
    HPID=$!
    for _ in $(seq 600); do
        [ -s "$TMP/h.out" ] && break
        sleep 0.1
    done
}

report() {
    local name=$1
    local rss hwm turn slow conns
    rss=$(awk '/VmRSS/{print $2}' /proc/$SPID/status)
    hwm=$(awk '/VmHWM/{print $2}' /proc/$SPID/status)
    "$B/tcpstore" --addr "$ADDR" stats >"$TMP/stats" 2>/dev/null || true
    turn=$(awk '/^loop_turn_max_us /{print $2}' "$TMP/stats")
    slow=$(awk '/^loop_turns_over_20ms /{print $2}' "$TMP/stats")
    conns=$(awk '/^connections /{print $2}' "$TMP/stats")
    echo "result,$name,rss_kb=$rss,peak_rss_kb=$hwm,loop_turn_max_us=$turn,turns_over_20ms=$slow,connections=$conns,loadavg=$(cut -d' ' -f1 /proc/loadavg)"
}

bench() {
    "$B/tcpstore-bench" --addr "$ADDR" -c 16 -t "${2:-set,get}" -s "$SEC" \
        --label "$1" | grep '^csv,' | grep -v '^csv,label'
}

stop_all() {
    [ -n "${HPID:-}" ] && kill "$HPID" 2>/dev/null && wait "$HPID" 2>/dev/null || true
    HPID=
    kill "$SPID" 2>/dev/null && wait "$SPID" 2>/dev/null || true
}

for sc in $SCEN; do
    HPID=
    case $sc in
    base) start_server; bench base ;;
    idle5000) start_server; start_hostile idle 5000; bench idle5000 ;;
    slowloris200) start_server; start_hostile slowloris 200; bench slowloris200 ;;
    nonreader50) start_server; start_hostile nonreader 50 1048576; bench nonreader50 ;;
    cycles10000)
        start_server
        start_hostile cycles 10000
        bench cycles10000
        wait "$HPID" 2>/dev/null || true
        cat "$TMP/h.out"
        HPID= ;;
    bigset64m)
        start_server --max-value-bytes 64MiB
        "$B/tcpstore" --addr "$ADDR" set a 1 >/dev/null
        start_hostile bigset 1 67108864
        bench bigset64m get ;;
    list1m)
        start_server
        $PY $H "$ADDR" keys 1000000 >/dev/null
        "$B/tcpstore" --addr "$ADDR" set a 1 >/dev/null
        start_hostile list 1000
        bench list1m get
        tail -1 "$TMP/h.out" ;;
    *) echo "unknown scenario $sc" >&2; exit 2 ;;
    esac
    report "$sc"
    stop_all
done
