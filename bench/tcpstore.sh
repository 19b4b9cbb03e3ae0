#!/usr/bin/env bash
# TCPStore benchmark, all in one run (results: bench/RESULTS.md, "TCPStore"):
#  (a) tcpstore-bench against tcpstore-server (modern and legacy dialect) and
#      against PyTorch 1.13's own TCPStore server (legacy), 1 and 50
#      clients, 100-byte set/get/add;
#  (b) PyTorch's Python client against both servers;
#  (c) redis-benchmark -c 50 -t set,get -d 100 against redis-server;
#  (d) loopback TCP round trip (sockperf ping-pong, 100 bytes) vs our
#      1-client p50;
#  (e) rendezvous of RDZV simulated ranks: MULTI_GET and plain gets on
#      tcpstore-server; plain gets on PyTorch's server, capped at RDZV_PT
#      ranks (its time grows as N^2: extrapolated, and marked so).
# Needs the bench-only tools redis-server, redis-benchmark, sockperf (not
# CI dependencies) and /usr/bin/python3 with torch 1.13.
#
# usage: bench/tcpstore.sh [BUILD_DIR]      (default build)
# env:   N (requests per op, 50 clients; 200000), N1 (1 client; 50000),
#        PY_N (Python client requests per op; 20000), RDZV (1024),
#        RDZV_PT (256), PT_TIMEOUT (seconds for one PyTorch run; 300)
set -u
BUILD=${1:-build}
BIN=$BUILD/bin
PY=/usr/bin/python3
N=${N:-200000}
N1=${N1:-50000}
PY_N=${PY_N:-20000}
RDZV=${RDZV:-1024}
RDZV_PT=${RDZV_PT:-256}
PT_TIMEOUT=${PT_TIMEOUT:-300}
. "$(dirname "$0")/scratch.sh" # SCRATCH, pids, the clean-up on exit
OUT=$SCRATCH
CSV=$OUT/results.csv

free_port() {
    $PY -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# start NAME CMD...: run a server that prints "listening on HOST:PORT";
# sets ADDR.
start() {
    local name=$1
    shift
    "$@" >"$OUT/$name.out" 2>"$OUT/$name.err" &
    pids+=($!)
    for _ in $(seq 300); do
        if grep -q "listening on" "$OUT/$name.out"; then
            ADDR=$(sed -n 's/.*listening on //p' "$OUT/$name.out" | head -1)
            return 0
        fi
        sleep 0.1
    done
    echo "bench: $name did not start" >&2
    cat "$OUT/$name.err" >&2
    exit 1
}

# CPU seconds (user + system) a process has used so far.
cpu_s() { awk -v t="$(getconf CLK_TCK)" '{ printf "%.2f", ($14 + $15) / t }' "/proc/$1/stat"; }

run() { # LABEL SERVER_PID CMD...: run, keep csv lines, echo the table, and
        # record the server's CPU time over the run
    local label=$1 spid=$2
    shift 2
    echo "\$ $*"
    local c0
    c0=$(cpu_s "$spid")
    "$@" --label "$label" 2>&1 | tee -a "$OUT/log" | grep -v '^csv,' || true
    local c1
    c1=$(cpu_s "$spid")
    grep "^csv,$label," "$OUT/log" >>"$CSV"
    echo "cpu,$label,$(awk -v a="$c0" -v b="$c1" 'BEGIN { printf "%.2f", b - a }')" >>"$CSV"
    echo "   (server CPU over the run: $(awk -v a="$c0" -v b="$c1" 'BEGIN { printf "%.2f", b - a }') s)"
}

hdr() { printf '\n== %s\n' "$*"; }

echo "tcpstore bench, $(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "build: $BUILD; N=$N N1=$N1 PY_N=$PY_N RDZV=$RDZV RDZV_PT=$RDZV_PT"

start ours "$BIN/tcpstore-server" --host 127.0.0.1 --port 0 --log-level error
OURS=$ADDR
OURS_PID=${pids[-1]}
start pytorch $PY tests/py/pt_server.py
PT=$ADDR
PT_PID=${pids[-1]}

hdr "(a) tcpstore-bench, 100-byte values, one op per run (server CPU measured)"
for c in 1 50; do
    n=$([ "$c" = 1 ] && echo "$N1" || echo "$N")
    for op in set get add; do
        run "ours-modern-c$c-$op" "$OURS_PID" "$BIN/tcpstore-bench" --addr "$OURS" -c "$c" -t $op -d 100 -n "$n"
        run "ours-legacy-c$c-$op" "$OURS_PID" "$BIN/tcpstore-bench" --addr "$OURS" --dialect legacy -c "$c" -t $op -d 100 -n "$n"
        run "pytorch-legacy-c$c-$op" "$PT_PID" timeout "$PT_TIMEOUT" "$BIN/tcpstore-bench" --addr "$PT" --dialect legacy -c "$c" -t $op -d 100 -n "$n"
    done
done

hdr "(b) PyTorch 1.13's Python client (1 and 8 processes)"
for p in 1 8; do
    for srv in ours pytorch; do
        a=$([ $srv = ours ] && echo "$OURS" || echo "$PT")
        echo "\$ $PY bench/pt_store_bench.py $a $PY_N $p pyclient-$srv-p$p"
        timeout "$PT_TIMEOUT" $PY bench/pt_store_bench.py "$a" "$PY_N" "$p" "pyclient-$srv-p$p" | tee -a "$CSV"
    done
done

hdr "(c) redis-benchmark against redis-server"
RP=$(free_port)
redis-server --port "$RP" --bind 127.0.0.1 --save '' --appendonly no >"$OUT/redis.out" 2>&1 &
pids+=($!)
for _ in $(seq 100); do redis-cli -p "$RP" ping >/dev/null 2>&1 && break; sleep 0.1; done
echo "\$ redis-benchmark -p $RP -q -n $N -c 50 -t set,get -d 100"
redis-benchmark -p "$RP" -q -n "$N" -c 50 -t set,get -d 100 2>&1 | tr '\r' '\n' | grep -E 'requests per second' | tee "$OUT/redis.txt"
echo "\$ redis-benchmark -p $RP -q -n $N1 -c 1 -t set,get -d 100"
redis-benchmark -p "$RP" -q -n "$N1" -c 1 -t set,get -d 100 2>&1 | tr '\r' '\n' | grep -E 'requests per second' | tee "$OUT/redis1.txt"

hdr "(d) loopback TCP round trip (sockperf ping-pong, 100 bytes, 5 s)"
SP=$(free_port)
sockperf sr --tcp -i 127.0.0.1 -p "$SP" >"$OUT/sockperf-sr.out" 2>&1 &
pids+=($!)
sleep 0.5
echo "\$ sockperf pp --tcp -i 127.0.0.1 -p $SP -t 5 -m 100 --full-rtt"
sockperf pp --tcp -i 127.0.0.1 -p "$SP" -t 5 -m 100 --full-rtt 2>&1 | sed 's/\x1b\[[0-9;]*m//g' | tee "$OUT/sockperf.txt" | grep -E 'percentile (50|99)\.000|avg-rtt'
RTT50=$(sed -n 's/.*percentile 50.000 = *\([0-9.]*\).*/\1/p' "$OUT/sockperf.txt")

hdr "(e) rendezvous: set a 64-byte address, ADD a counter, fetch all"
run "rdzv-ours-multi" "$OURS_PID" "$BIN/tcpstore-bench" --addr "$OURS" --rendezvous "$RDZV"
run "rdzv-ours-plain" "$OURS_PID" "$BIN/tcpstore-bench" --addr "$OURS" --rendezvous "$RDZV" --plain
run "rdzv-ours-legacy-plain" "$OURS_PID" "$BIN/tcpstore-bench" --addr "$OURS" --dialect legacy --rendezvous "$RDZV" --plain
run "rdzv-pytorch-plain" "$PT_PID" timeout "$PT_TIMEOUT" "$BIN/tcpstore-bench" --addr "$PT" --dialect legacy --rendezvous "$RDZV_PT" --plain

hdr "summary"
# csv: label,addr,dialect,clients,bytes,op,requests,seconds,ops,p50,p99
# cpu: label,server_cpu_s
col() { awk -F, -v l="$1" -v c="$2" '$1=="csv" && $2==l {print $c}' "$CSV"; }
cpu() { awk -F, -v l="$1" '$1=="cpu" && $2==l {print $3}' "$CSV"; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "n/a" }'; }
us_op() { awk -v c="$(cpu "$1")" -v n="$(col "$1" 8)" 'BEGIN { if (n > 0) printf "%.1f", c * 1e6 / n; else print "n/a" }'; }
printf '%-26s %10s %10s %6s | %s\n' "ops/s (c clients)" "ours" "pytorch" "ratio" \
    "server CPU us/op: ours pytorch ratio"
for c in 1 50; do
    for op in set get add; do
        for d in modern legacy; do
            o=$(col "ours-$d-c$c-$op" 10) p=$(col "pytorch-legacy-c$c-$op" 10)
            uo=$(us_op "ours-$d-c$c-$op") up=$(us_op "pytorch-legacy-c$c-$op")
            printf '%-26s %10s %10s %6s | %6s %6s %6s\n' "$op c=$c (ours $d)" "$o" "$p" \
                "$(ratio "$o" "$p")" "$uo" "$up" "$(ratio "$up" "$uo")"
        done
    done
done
rset=$(sed -n 's/^SET: \([0-9.]*\).*/\1/p' "$OUT/redis.txt")
rget=$(sed -n 's/^GET: \([0-9.]*\).*/\1/p' "$OUT/redis.txt")
printf 'redis-benchmark c=50: SET %s GET %s; ours modern c=50: set %s get %s (get ratio %s)\n' \
    "$rset" "$rget" "$(col ours-modern-c50-set 10)" "$(col ours-modern-c50-get 10)" \
    "$(ratio "$(col ours-modern-c50-get 10)" "$rget")"
for op in get add; do
    printf '1-client %s p50 %s us; loopback RTT p50 %s us; ratio %s\n' "$op" \
        "$(col ours-modern-c1-$op 11)" "$RTT50" "$(ratio "$(col ours-modern-c1-$op 11)" "$RTT50")"
done
printf 'rendezvous %d ranks: ours MULTI_GET %s s, ours plain %s s, ours legacy plain %s s\n' \
    "$RDZV" "$(col rdzv-ours-multi 8)" "$(col rdzv-ours-plain 8)" "$(col rdzv-ours-legacy-plain 8)"
pt=$(col rdzv-pytorch-plain 8)
if [ -n "$pt" ]; then
    ext=$(awk -v t="$pt" -v a="$RDZV_PT" -v b="$RDZV" 'BEGIN { printf "%.1f", t * (b / a) * (b / a) }')
    printf 'rendezvous pytorch plain: %d ranks %s s measured; %d ranks extrapolated (x N^2) %s s\n' \
        "$RDZV_PT" "$pt" "$RDZV" "$ext"
else
    echo "rendezvous pytorch plain: did not finish within ${PT_TIMEOUT}s"
fi
echo
echo "raw csv:"
cat "$CSV"
