#!/usr/bin/env bash
# bench/net.sh: collectives across network-namespace "hosts" (issue 11):
# fccl against Open MPI and MPICH over the same veth bridge, with the
# link's ceilings (iperf3, fi_pingpong) measured in the same run.
#
#   bench/net.sh [BUILD]          (BUILD: a build dir, default build)
#   BUILDS="dirA dirB" bench/net.sh   (two builds: systems fccl-A, fccl-B)
#
# Needs root.  Hosts are network namespaces on a bridge, made by
# tests/multihost/netns.sh (prefix fcclnb): host I is "nodeI", 10.231.0.I
# on its eth0; everything is removed on exit, also on failure or ^C.  No
# traffic leaves these namespaces.  Each host also gets its own hostname
# and, for the MPI processes, its own boot id (bound over
# /proc/sys/kernel/random/boot_id in the mount namespace of its processes),
# as separate machines have (fccl's ranks see the real one: see nb_exec): UCX, under
# MPICH, takes one boot id for one machine and would otherwise move
# "inter-host" messages through shared memory (checked: the path check
# below counts the bytes that cross host 1's veth).
#
# Layouts (LAYOUTS, "HOSTSxRANKS"): 2x1 2x2 4x1.  OPS: all_reduce
# all_gather all_to_all, float32 sum, MINB (8) to MAXB (64M) by FACTOR (2).
# Systems (SYSTEMS):
#   fccl       fccl-run --nnodes M --node-rank K --store node1:PORT on each
#              host (node1 serves the store, --host-store) running
#              fccl-bench; FCCL_PROVIDER unset (shm within a host,
#              tcp;ofi_rxm between hosts), FCCL_NET_IFACE=eth0
#   fccl-ring  the same with FCCL_ALGO_ALL_REDUCE=ring: the flat ring
#              against the selector's choice (hier when a host has several
#              ranks); all_reduce only, and only in layouts with more than
#              one rank per host (elsewhere no hierarchy to compare)
#   ompi       Open MPI, --mca pml ob1 --mca btl self,vader,tcp, TCP and
#              its out-of-band channel on 10.231.0.0/24, --bind-to none,
#              mpi_yield_when_idle when the layout has more ranks than the
#              machine has cores, started from host 1 with
#              bench/netns-rsh.sh as rsh agent
#   mpich      MPICH (ch4:ucx) through hydra, -launcher rsh -launcher-exec
#              bench/netns-rsh.sh, -iface eth0, UCX_NET_DEVICES=eth0 (its
#              ranks poll without yielding: with more ranks than cores,
#              2x2 and 4x1 here, every step waits for a time slice)
# With BUILDS of several dirs, fccl and fccl-ring become fccl-A, fccl-A-ring,
# fccl-B, ... (A = first dir), interleaved with the others; FCCL_ENV_A,
# FCCL_ENV_B, ... add VAR=VALUE words to that build's ranks (one dir twice
# with FCCL_ENV_B="FCCL_SPIN_US=0" compares a setting).
# MPI runs cli/bench/mpi_coll.c (built here with mpicc.openmpi and
# mpicc.mpich):
# per size a warm-up, ITERS x { barrier; op }, slowest rank, median;
# fewer iterations from 16 MiB (256 MiB moved per size, at least 5).
# fccl-bench is run twice per sweep to match: up to BIG (8M) with ITERS,
# above it with BIG_ITERS (5) and BIG_WARMUP (2).
#
# Rounds (ROUNDS, 3): each round measures the ceilings, then every
# layout x op x system once; tables show the median over rounds and the
# min-max.  Ceilings: iperf3 single stream host 1 -> host 2 (-t IPERF_T,
# 4 s), fi_pingpong -p "tcp;ofi_rxm" -e rdm between host 2 (server) and
# host 1: -S 8 -I 10000 (one-way latency: fi_pingpong's usec/xfer counts
# the ping and the pong as one transfer each) and -S 4194304 -I 100.
# Before the rounds, a path check per layout and system: one 4 MiB
# all_gather sweep (-n 5 -w 1: 11 operations), the bytes received on host
# 1's eth0 against the least that 11 such operations must bring in.
#
# Environment: LAYOUTS, OPS, SYSTEMS, BUILDS, MINB, MAXB, FACTOR, ROUNDS,
# ITERS (20), WARMUP (5), BIG, BIG_ITERS, BIG_WARMUP, IPERF_T, PATHCHECK (1),
# TIMEOUT (seconds per launch, 300), GRACE (10), RANK_PRIO (auto: under
# chrt the measured processes run at SCHED_OTHER nice -20, see below;
# inherit), SHOW (sizes in the tables, "all" or
# "8 64 512 4K 32K 256K 1M 4M 16M 64M"), OUT (raw logs; default
# BUILD/bench/net-results, emptied first).  Prints markdown to stdout
# (also OUT/report.md); every launch's log, CPU time and veth byte counts
# are in OUT (sweeps.tsv, all.tsv, raw/).  A launch killed by its timeout
# (or ended after a hang) has no CPU figure: /usr/bin/time did not finish.
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
CBENCH="$HERE/../cli/bench" # the C sources of the benchmark helpers
ROOT=$(cd "$HERE/.." && pwd)
BUILD=${1:-build}
BUILDS=${BUILDS:-$BUILD}
LAYOUTS=${LAYOUTS:-2x1 2x2 4x1}
OPS=${OPS:-all_reduce all_gather all_to_all}
SYSTEMS=${SYSTEMS:-fccl fccl-ring ompi mpich}
MINB=${MINB:-8}
MAXB=${MAXB:-64M}
FACTOR=${FACTOR:-2}
ROUNDS=${ROUNDS:-3}
ITERS=${ITERS:-20}
WARMUP=${WARMUP:-5}
BIG=${BIG:-8M}
BIG_ITERS=${BIG_ITERS:-5}
BIG_WARMUP=${BIG_WARMUP:-2}
IPERF_T=${IPERF_T:-4}
PATHCHECK=${PATHCHECK:-1}
TIMEOUT=${TIMEOUT:-300}
GRACE=${GRACE:-10}
export SHOW=${SHOW:-8 64 512 4K 32K 256K 1M 4M 16M 64M}
AGENT=$HERE/netns-rsh.sh
PY=/usr/bin/python3
RANK_PRIO=${RANK_PRIO:-auto}

die() { echo "net.sh: $*" >&2; exit 1; }

abs() { case $1 in /*) echo "$1" ;; *) echo "$ROOT/$1" ;; esac; }

# "64M" -> 67108864
bytes_of() {
    local v=$1 m=1
    case $v in
    *[kK]) m=1024; v=${v%?} ;;
    *[mM]) m=$((1024 * 1024)); v=${v%?} ;;
    *[gG]) m=$((1024 * 1024 * 1024)); v=${v%?} ;;
    esac
    case $v in '' | *[!0-9]*) die "bad size '$1'" ;; esac
    echo $((v * m))
}

[ "$(id -u)" -eq 0 ] || die "needs root (network namespaces)"
for t in ip unshare timeout mount ss $PY /usr/bin/time; do
    command -v "$t" >/dev/null || die "'$t' not found"
done
MINB=$(bytes_of "$MINB")
MAXB=$(bytes_of "$MAXB")
BIG=$(bytes_of "$BIG")
[ "$FACTOR" -ge 2 ] 2>/dev/null || die "FACTOR must be an integer >= 2"

# ---- systems ----
read -r -a BDIRS <<<"$BUILDS"
FIRST_BUILD=$(abs "${BDIRS[0]}")
OUT=${OUT:-$FIRST_BUILD/bench/net-results}
declare -A BUILD_OF RING_OF KIND_OF EXTRA_OF
SYS=()
labels=(A B C D E F)
for s in $SYSTEMS; do
    case $s in
    fccl | fccl-ring)
        ring=0
        [ "$s" = fccl-ring ] && ring=1
        for j in "${!BDIRS[@]}"; do
            name=fccl
            [ ${#BDIRS[@]} -gt 1 ] && name=fccl-${labels[$j]}
            [ $ring = 1 ] && name=$name-ring
            b=$(abs "${BDIRS[$j]}")
            [ -x "$b/bin/fccl-bench" ] && [ -x "$b/bin/fccl-run" ] ||
                die "no $b/bin/fccl-bench or fccl-run: build it first (make BUILD=... lib progs)"
            SYS+=("$name")
            BUILD_OF[$name]=$b
            EXTRA_OF[$name]=
            [ ${#BDIRS[@]} -gt 1 ] && eval "EXTRA_OF[\$name]=\${FCCL_ENV_${labels[$j]}:-}"
            RING_OF[$name]=$ring
            KIND_OF[$name]=fccl
        done
        ;;
    ompi)
        command -v mpirun.openmpi >/dev/null || die "mpirun.openmpi not found"
        SYS+=(ompi)
        KIND_OF[ompi]=ompi
        ;;
    mpich)
        command -v mpirun.mpich >/dev/null || die "mpirun.mpich not found"
        SYS+=(mpich)
        KIND_OF[mpich]=mpich
        ;;
    *) die "unknown system '$s' (fccl fccl-ring ompi mpich)" ;;
    esac
done
command -v iperf3 >/dev/null || die "iperf3 not found"
command -v fi_pingpong >/dev/null || die "fi_pingpong not found"

NHOSTS=0
for l in $LAYOUTS; do
    case $l in [1-9]x[1-9]) ;; *) die "bad layout '$l' (HOSTSxRANKS, e.g. 2x2)" ;; esac
    m=${l%x*}
    [ "$m" -ge 2 ] || die "layout $l: at least 2 hosts"
    [ "$m" -gt "$NHOSTS" ] && NHOSTS=$m
done

rm -rf "$OUT"
mkdir -p "$OUT/raw" "$OUT/boot" || die "cannot create $OUT"
: >"$OUT/all.tsv"
: >"$OUT/sweeps.tsv"
: >"$OUT/ceil.tsv"
: >"$OUT/path.tsv"

# ---- hosts ----
unset FCCL_PROVIDER FI_PROVIDER FCCL_ALGO_ALL_REDUCE
export FCCL_TIMEOUT=${FCCL_TIMEOUT:-120}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
# shellcheck disable=SC2034 # read by netns.sh
MH_PREFIX=fcclnb
. "$ROOT/tests/multihost/netns.sh"
mh_reap_stale
mh_trap
for i in $(seq 1 "$NHOSTS"); do
    mh_add_host "$i" v4 || die "cannot create host $i"
    # a boot id per host (see the top of this file)
    printf '%08x-%04x-4%03x-8%03x-%012x\n' $((RANDOM * 65536 + RANDOM)) $RANDOM \
        $((RANDOM % 4096)) $((RANDOM % 4096)) "$i" >"$OUT/boot/$i"
done
export NB_NS_PREFIX
NB_NS_PREFIX=$(mh_ns "")
export NB_BOOT_IDS=$OUT/boot

# Run at a real-time policy (chrt -f 10, as timing runs are), ranks that
# poll while waiting livelock once they outnumber the cores: 4 ranks on 2
# cores, Open MPI's stayed past its timeout for 13 minutes, and the
# timeout itself (same priority, behind the pollers) never ran.  So the
# measured processes run at SCHED_OTHER, nice -20 (ahead of everything
# else at normal priority, and the kernel's network threads still run),
# while this script and its timeouts keep the real-time policy.
# RANK_PRIO=inherit keeps the caller's policy for them.
PRIO=()
if [ "$RANK_PRIO" = auto ] && chrt -p $$ | grep -q 'SCHED_\(FIFO\|RR\)'; then
    PRIO=(chrt -o 0 nice -n -20)
fi

# nb_exec I CMD...: CMD on host I (as mh_exec, plus the host's boot id;
# NB_REAL_BOOT=1 keeps the machine's: fccl's ranks count the ranks that
# share their kernel to decide whether waiting may spin, and these hosts
# do share the machine's 2 cores, as Open MPI is told with
# mpi_yield_when_idle).
nb_exec() {
    local i=$1
    shift
    if [ "${NB_REAL_BOOT:-0}" = 1 ]; then
        ip netns exec "$(mh_ns "$i")" unshare --uts sh -c \
            'hostname "$0" && exec "$@"' "node$i" "$@"
        return
    fi
    ip netns exec "$(mh_ns "$i")" unshare --uts sh -c \
        'hostname "$0" && mount --bind "$1" /proc/sys/kernel/random/boot_id &&
         shift && exec "$@"' "node$i" "$OUT/boot/$i" "$@"
}

# Bytes received and sent on host 1's eth0: "RX TX".
veth_bytes() {
    ip -n "$(mh_ns 1)" -s link show eth0 |
        awk '/RX:/ { getline; rx = $1 } /TX:/ { getline; tx = $1 } END { print rx, tx }'
}

# Waits until TCP port $2 listens on host $1 (at most 10 s).
wait_listen() {
    local k
    for k in $(seq 100); do
        ip netns exec "$(mh_ns "$1")" ss -ltnH "sport = :$2" 2>/dev/null | grep -q . && return 0
        sleep 0.1
    done
    return 1
}

PORT=29600
next_port() { PORT=$((PORT + 1)); [ $PORT -gt 31000 ] && PORT=29601; }

# ---- launches ----
build_mpi() {
    case " ${SYS[*]} " in *" ompi "*)
        mpicc.openmpi -O2 -o "$OUT/mpi_coll.openmpi" "$CBENCH/mpi_coll.c" ||
            die "mpicc.openmpi failed" ;;
    esac
    case " ${SYS[*]} " in *" mpich "*)
        mpicc.mpich -O2 -o "$OUT/mpi_coll.mpich" "$CBENCH/mpi_coll.c" ||
            die "mpicc.mpich failed" ;;
    esac
}

# Runs one launch of system $1 in layout $2 (M hosts x R ranks), logs to
# $3.*: benchmark args after $4.  Sets RC (0 when every host's launcher
# exited 0) and appends "wall user sys" per host to $3.cpu.
launch() {
    local sys=$1 layout=$2 log=$3
    shift 3
    local m=${layout%x*} r=${layout#*x} k pids=() rcs=0 hosts=""
    local tfmt="%e %U %S" t0
    t0=$(date +%s.%N)
    : >"$log.cpu"
    case ${KIND_OF[$sys]} in
    fccl)
        local b=${BUILD_OF[$sys]} envs=(FCCL_NET_IFACE=eth0)
        [ "${RING_OF[$sys]}" = 1 ] && envs+=(FCCL_ALGO_ALL_REDUCE=ring)
        # shellcheck disable=SC2206
        [ -n "${EXTRA_OF[$sys]}" ] && envs+=(${EXTRA_OF[$sys]})
        next_port
        for k in $(seq 0 $((m - 1))); do
            local hs=()
            [ "$k" -eq 0 ] && hs=(--host-store)
            NB_REAL_BOOT=1 nb_exec $((k + 1)) timeout -k 5 "$TIMEOUT" \
                /usr/bin/time -a -o "$log.cpu" -f "$tfmt" \
                "${PRIO[@]}" env "${envs[@]}" "$b/bin/fccl-run" -n "$r" --nnodes "$m" \
                --node-rank "$k" --store "node1:$PORT" "${hs[@]}" \
                "$b/bin/fccl-bench" --csv "$@" >"$log.node$k" 2>&1 &
            pids+=($!)
        done
        ;;
    ompi)
        for k in $(seq 1 "$m"); do hosts="$hosts${hosts:+,}node$k:$r"; done
        # More ranks than cores (all hosts share this machine's): Open MPI
        # yields when idle, as it does by itself when it knows it is
        # oversubscribed (2x2, 8 B all_reduce: 160 us against 2.7-12 ms)
        local yield=0
        [ $((m * r)) -gt "$(nproc)" ] && yield=1
        nb_exec 1 timeout -k 5 "$TIMEOUT" \
            /usr/bin/time -a -o "$log.cpu" -f "$tfmt" \
            "${PRIO[@]}" mpirun.openmpi --allow-run-as-root -H "$hosts" -n $((m * r)) \
            --bind-to none --mca mpi_yield_when_idle $yield \
            --mca plm_rsh_agent "$AGENT" \
            --mca pml ob1 --mca btl self,vader,tcp \
            --mca btl_tcp_if_include 10.231.0.0/24 \
            --mca oob_tcp_if_include 10.231.0.0/24 \
            "$OUT/mpi_coll.openmpi" "$@" >"$log.node0" 2>&1 &
        pids+=($!)
        ;;
    mpich)
        for k in $(seq 1 "$m"); do hosts="$hosts${hosts:+,}node$k:$r"; done
        nb_exec 1 timeout -k 5 "$TIMEOUT" \
            /usr/bin/time -a -o "$log.cpu" -f "$tfmt" \
            "${PRIO[@]}" env UCX_NET_DEVICES=eth0 \
            mpirun.mpich -launcher rsh -launcher-exec "$AGENT" -iface eth0 \
            -hosts "$hosts" -n $((m * r)) \
            "$OUT/mpi_coll.mpich" "$@" >"$log.node0" 2>&1 &
        pids+=($!)
        ;;
    esac
    # MPICH's ranks can hang in MPI_Finalize after printing every row
    # (UCX 1.13's tcp transport stops progressing endpoints it still has
    # to flush: openucx/ucx issue 8738; seen at 2x2 and 4x1): once the
    # last size is printed, GRACE seconds, then the launch is ended and
    # counted as done (noted in its .status).
    local hung=""
    if [ "${KIND_OF[$sys]}" = mpich ] && [ -n "${DONE_SIZE:-}" ]; then
        local since=""
        while kill -0 "${pids[0]}" 2>/dev/null; do
            if [ -z "$since" ] && grep -Eq "^ *$DONE_SIZE " "$log.node0" 2>/dev/null; then
                since=$SECONDS
            fi
            if [ -n "$since" ] && [ $((SECONDS - since)) -ge "$GRACE" ]; then
                hung=" (output complete, still running ${GRACE} s later: ended)"
                mh_kill_all
                break
            fi
            sleep 0.2
        done
    fi
    for k in "${pids[@]}"; do
        wait "$k" || rcs=$?
    done
    [ -n "$hung" ] && rcs=0
    RC=$rcs
    echo "exit $RC after $(echo "$t0 $(date +%s.%N)" | awk '{ printf "%.1f", $2 - $1 }') s$hung" \
        >"$log.status"
    mh_kill_all
}

# One sweep: system $1, layout $2, op $3, round $4.
sweep() {
    local sys=$1 layout=$2 op=$3 round=$4
    local base="$OUT/raw/$layout-$op-$sys-r$round" t0 v0 v1 rc=0
    RC=0
    t0=$(date +%s.%N)
    v0=$(veth_bytes)
    if [ "${KIND_OF[$sys]}" = fccl ]; then
        local top=$MAXB s=$MINB
        [ "$top" -gt "$BIG" ] && top=$BIG
        [ "$MINB" -le "$top" ] &&
            launch "$sys" "$layout" "$base.a" -o "$op" -d float32 -r sum \
                -b "$MINB" -e "$top" -f "$FACTOR" -n "$ITERS" -w "$WARMUP"
        rc=$RC
        while [ "$s" -le "$BIG" ]; do s=$((s * FACTOR)); done
        if [ "$s" -le "$MAXB" ]; then
            launch "$sys" "$layout" "$base.b" -o "$op" -d float32 -r sum \
                -b "$s" -e "$MAXB" -f "$FACTOR" -n "$BIG_ITERS" -w "$BIG_WARMUP"
            [ "$RC" -ne 0 ] && rc=$RC
        fi
    else
        DONE_SIZE=$MINB
        while [ $((DONE_SIZE * FACTOR)) -le "$MAXB" ]; do DONE_SIZE=$((DONE_SIZE * FACTOR)); done
        launch "$sys" "$layout" "$base.a" -o "$op" -b "$MINB" -e "$MAXB" \
            -f "$FACTOR" -n "$ITERS" -w "$WARMUP"
        rc=$RC
        DONE_SIZE=
    fi
    v1=$(veth_bytes)
    local secs
    secs=$(echo "$t0 $(date +%s.%N)" | awk '{ printf "%.1f", $2 - $1 }')
    cat "$base".*.cpu 2>/dev/null | awk -v l="$layout" -v o="$op" -v s="$sys" \
        -v r="$round" -v rc="$rc" -v w="$secs" -v v0="$v0" -v v1="$v1" '
        { u += $2; y += $3; n++ }
        END { split(v0, a, " "); split(v1, b, " ");
              cu = n ? sprintf("%.2f", u) : "nan"; cy = n ? sprintf("%.2f", y) : "nan"
              printf "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%.0f\t%.0f\n", l, o, s, r, rc, w,
                     cu, cy, b[1] - a[1], b[2] - a[2] }' >>"$OUT/sweeps.tsv"
    echo "  round $round $layout $op $sys: exit $rc, ${secs} s" >&2
    local f
    for f in "$base".*.node0; do
        [ -e "$f" ] && $PY "$HERE/net_report.py" parse "$sys" "$layout" "$op" "$round" \
            "$f" >>"$OUT/all.tsv"
    done
    grep -h "ended" "$base".*.status 2>/dev/null | sed "s|^|$layout $op $sys round $round: |" \
        >>"$OUT/notes.txt"
    if [ "$rc" -ne 0 ]; then
        echo "$layout $op $sys round $round: exit $rc (logs $base.*)" >>"$OUT/failed.txt"
        tail -n 5 "$base".*.node* 2>/dev/null | sed 's/^/    /' >&2
    fi
}

# Path check: one all_gather of PC bytes, -n 5 -w 1 (11 operations), and
# the bytes host 1 received.
path_check() {
    local sys=$1 layout=$2 pc=$((4 << 20)) v0 v1 m
    m=${layout%x*}
    [ "$pc" -gt "$MAXB" ] && pc=$MAXB
    v0=$(veth_bytes)
    DONE_SIZE=$pc
    launch "$sys" "$layout" "$OUT/raw/path-$layout-$sys" -o all_gather -b "$pc" \
        -e "$pc" -f 2 -n 5 -w 1
    DONE_SIZE=
    v1=$(veth_bytes)
    printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$layout" "$sys" "$RC" "$pc" "$m" \
        "$(echo "$v0 $v1" | awk '{ printf "%.0f", $3 - $1 }')" >>"$OUT/path.tsv"
    echo "  path check $layout $sys: exit $RC" >&2
}

# ---- ceilings ----
ceilings() {
    local round=$1 log
    log="$OUT/raw/ceil-r$round"
    next_port
    nb_exec 2 timeout -k 5 $((IPERF_T + 30)) "${PRIO[@]}" iperf3 -s -1 -p "$PORT" \
        >"$log.iperf3-server" 2>&1 &
    local spid=$!
    wait_listen 2 "$PORT"
    nb_exec 1 timeout -k 5 $((IPERF_T + 30)) "${PRIO[@]}" iperf3 -c 10.231.0.2 -p "$PORT" \
        -t "$IPERF_T" -J >"$log.iperf3.json" 2>&1
    wait "$spid"
    local sz it
    for sz in 8 4194304; do
        it=10000
        [ "$sz" -gt 8 ] && it=100
        next_port
        nb_exec 2 timeout -k 5 120 "${PRIO[@]}" fi_pingpong -p "tcp;ofi_rxm" -e rdm -S "$sz" \
            -I "$it" -B "$PORT" >"$log.pingpong-$sz-server" 2>&1 &
        spid=$!
        wait_listen 2 "$PORT"
        nb_exec 1 timeout -k 5 120 "${PRIO[@]}" fi_pingpong -p "tcp;ofi_rxm" -e rdm -S "$sz" \
            -I "$it" -P "$PORT" 10.231.0.2 >"$log.pingpong-$sz" 2>&1
        wait "$spid"
    done
    mh_kill_all
    $PY "$HERE/net_report.py" ceil "$round" "$log" >>"$OUT/ceil.tsv"
    echo "  round $round ceilings: $(tail -n 3 "$OUT/ceil.tsv" | cut -f2,3 | tr '\t\n' '= ')" >&2
}

machine() {
    echo "$(nproc) cores, $(lscpu | sed -n 's/^Model name: *//p')," \
        "$(free -g | awk '/^Mem:/ {print $2}') GiB; load before:" \
        "$(cut -d' ' -f1-3 /proc/loadavg); $(date -u '+%Y-%m-%d %H:%M UTC')"
}

# ---- main ----
build_mpi
{
    echo "Machine: $(machine)"
    echo "Run: LAYOUTS=\"$LAYOUTS\" OPS=\"$OPS\" SYSTEMS=\"${SYS[*]}\" MINB=$MINB MAXB=$MAXB" \
        "FACTOR=$FACTOR ROUNDS=$ROUNDS ITERS=$ITERS WARMUP=$WARMUP BIG=$BIG" \
        "BIG_ITERS=$BIG_ITERS BIG_WARMUP=$BIG_WARMUP; script: $(chrt -p $$ | head -n 1 | sed 's/.*: //')," \
        "measured processes: ${PRIO[*]:-the same}"
    for s in "${SYS[@]}"; do
        [ "${KIND_OF[$s]}" = fccl ] && echo "$s: ${BUILD_OF[$s]}$([ "${RING_OF[$s]}" = 1 ] && echo ", FCCL_ALGO_ALL_REDUCE=ring")${EXTRA_OF[$s]:+, ${EXTRA_OF[$s]}}"
    done
} >"$OUT/run.txt"
cat "$OUT/run.txt" >&2
if [ "$PATHCHECK" = 1 ]; then
    for layout in $LAYOUTS; do
        for s in "${SYS[@]}"; do
            [ "${RING_OF[$s]:-0}" = 1 ] && continue
            path_check "$s" "$layout"
        done
    done
fi
for round in $(seq 1 "$ROUNDS"); do
    ceilings "$round"
    for layout in $LAYOUTS; do
        for op in $OPS; do
            for s in "${SYS[@]}"; do
                if [ "${RING_OF[$s]:-0}" = 1 ]; then
                    [ "$op" = all_reduce ] && [ "${layout#*x}" -gt 1 ] || continue
                fi
                sweep "$s" "$layout" "$op" "$round"
            done
        done
    done
done
$PY "$HERE/net_report.py" report "$OUT" "${SYS[*]}" | tee "$OUT/report.md"
