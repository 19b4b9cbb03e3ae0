#!/usr/bin/env bash
# Recovery from a lost rank (issue 36): N ranks on one host run an
# all_reduce loop (8 floats), one of them is SIGKILLed in the middle of
# it, and the survivors go on.  For each way of going on it reports, in
# ms from the kill: when the first and the last survivor got an error,
# and when the slowest survivor finished its first correct all_reduce of
# the recovered job; and for shrink the shrink alone (from the last
# survivor's call to the last return).
#   shrink    fccl_group_shrink(world, NULL, 0) under fccl-run --no-kill
#   reinit    fccl_finalize + fccl_init of the survivors (--no-kill)
#   restart   fccl-run --max-restarts 1: the whole job again
#   gloo      torch Gloo: destroy_process_group + init_process_group
# (cli/bench/ft_recover.c, bench/ft_gloo.py).  Prints a markdown table;
# then, as root, a second one for 2 network-namespace hosts x 4 ranks
# (netns_table below).
#
#   bench/ft.sh [BUILD]
#   N=8 VICTIM=7 ROUNDS=3 PEER=3 PROVIDERS="shm tcp;ofi_rxm"
#   SYSTEMS="shrink reinit restart gloo" ONEHOST=1 NETNS=1
#   NS_PER=4 NS_PEER=1 NS_VICTIM=6 NS_PROVIDERS="mixed tcp;ofi_rxm"
#   NS_FAULTS="rank host"
#   GROW=0 skips the grow table (grow_table below), RECONF=0 the torch one
set -u
BUILD=${1:-build}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
N=${N:-8} VICTIM=${VICTIM:-7} ROUNDS=${ROUNDS:-3} PEER=${PEER:-3}
PROVIDERS=${PROVIDERS:-"shm tcp;ofi_rxm"}
SYSTEMS=${SYSTEMS:-"shrink reinit restart gloo"}
ONEHOST=${ONEHOST:-1} NETNS=${NETNS:-1}
RUN="$ROOT/$BUILD/bin/fccl-run"
HELPER="$ROOT/$BUILD/bench/ft_recover"
export PYTHONPATH="$ROOT/$BUILD/python" FCCL_TIMEOUT=60
export FCCL_PEER_TIMEOUT=$PEER
tmp=$(mktemp)
trap 'rm -f "$tmp"' EXIT

free_port() {
    /usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

# summary T_KILL SURVIVORS FILE: "errfirst errlast ok shrink" in ms from
# T_KILL (epoch us) out of the ranks' lines in FILE, or "incomplete" when
# fewer than SURVIVORS ranks reported a correct all_reduce.
summary() {
    awk -v t0="$1" -v n="$2" '
        / ERR / { e = ($NF - t0) / 1000; ne++
                  if (ne == 1 || e < ef) ef = e; if (e > el) el = e }
        / OK /  { o = ($NF - t0) / 1000; no++; if (o > ol) ol = o }
        / SHRINK / { if ($(NF-1) > sc) sc = $(NF-1); if ($NF > sr) sr = $NF }
        END { if (no < n) { print "incomplete"; exit }
              printf "%s %s %.1f %s\n", ne ? sprintf("%.1f", ef) : "-",
                     ne ? sprintf("%.1f", el) : "-", ol,
                     sc ? sprintf("%.1f", (sr - sc) / 1000) : "-" }' "$3"
}

# One run: start the job, kill the victim once all loop, print
# "errfirst errlast ok shrink" in ms (shrink "-" when not measured).
one() {
    local sys=$1 prov=$2 job pid t_kill
    case $sys in
    shrink|reinit) job=("$RUN" --no-kill -n "$N" --provider "$prov" "$HELPER" "$sys") ;;
    restart) job=("$RUN" --max-restarts 1 -n "$N" --provider "$prov" "$HELPER" restart) ;;
    gloo) job=("$RUN" --no-kill -n "$N" /usr/bin/python3 "$ROOT/bench/ft_gloo.py"
               "$(free_port)" "$(free_port)") ;;
    esac
    kill_victim "${job[@]}"
    summary "$t_kill" $((N - 1)) "$tmp"
}

# kill_victim JOB...: run the job into $tmp, SIGKILL rank VICTIM once all
# N ranks loop, wait for the job; sets t_kill (us since the epoch).
kill_victim() {
    local jpid pid
    : >"$tmp" # now, not in the background child (see ft_soak.sh)
    timeout -k 5 300 "$@" >>"$tmp" 2>&1 &
    jpid=$!
    for _ in $(seq 3600); do
        [ "$(grep -c ' looping' "$tmp")" -ge "$N" ] && break
        sleep 0.05
    done
    sleep 0.3
    pid=$(sed -n "s/^\[$VICTIM\] R$VICTIM pid \([0-9]*\) looping.*/\1/p" "$tmp" | head -n1)
    t_kill=$(date +%s%6N)
    kill -9 "$pid"
    wait "$jpid"
}

median() { sort -n | awk '{a[NR]=$1} END {print NR ? a[int((NR+1)/2)] : "-"}'; }
# restart: the attempt's ranks are stopped by fccl-run before they report
# an error of their own, so its error columns stay "-"

one_host_table() {
    echo "| system | provider | error, first (ms) | error, last (ms) | shrink (ms) | first correct all_reduce (ms) |"
    echo "|---|---|---|---|---|---|"
    for sys in $SYSTEMS; do
        for prov in $PROVIDERS; do
            [ "$sys" = gloo ] && [ "$prov" != "${PROVIDERS%% *}" ] && continue
            rows=()
            for _ in $(seq "$ROUNDS"); do
                rows+=("$(one "$sys" "$prov")")
            done
            label=$prov
            [ "$sys" = gloo ] && label="gloo (tcp)"
            row "$sys" "$label" 1 2 4 3
        done
    done
    echo
    echo "N=$N ranks on one host ($(nproc) CPUs), rank $VICTIM SIGKILLed, FCCL_PEER_TIMEOUT=$PEER, median of $ROUNDS runs; ms from the kill"
}

# ---- 2 network-namespace hosts x NS_PER ranks (root; issue 36 item 5) ----
# Hosts from tests/multihost/netns.sh (prefix fcclft, 10.231.0.1-2 on a
# bridge of their own; removed on exit, also on failure or ^C): fccl-run
# --no-kill --nnodes 2 on each, the store hosted by node 1's, ft_recover
# shrink, FCCL_PEER_TIMEOUT=NS_PEER.  Two transports: "mixed" (shm inside
# a host, tcp;ofi_rxm across: FCCL_NET_PROVIDER) and tcp;ofi_rxm for every
# peer (FCCL_PROVIDER).  Two faults: one rank (NS_VICTIM) SIGKILLed, its
# host's peers seeing its process end; every rank of host 2 SIGKILLed at
# once, host 1's ranks learning it from the heartbeats alone (the
# cross-host detection bound).
NS_PER=${NS_PER:-4} NS_PEER=${NS_PEER:-1} NS_VICTIM=${NS_VICTIM:-6}
NS_PROVIDERS=${NS_PROVIDERS:-"mixed tcp;ofi_rxm"} NS_FAULTS=${NS_FAULTS:-"rank host"}
# ns_one PROVIDER FAULT PORT: one run on the two hosts (the store on
# node1:PORT); prints as one() does.
ns_one() {
    local prov=$1 fault=$2 port=$3 env k hs jobs=() victims=() r t_kill n=$((2 * NS_PER))
    case $prov in
    mixed) env="FCCL_NET_PROVIDER=tcp;ofi_rxm" ;;
    *) env="FCCL_PROVIDER=$prov" ;;
    esac
    : >"$tmp.n0"
    : >"$tmp.n1"
    for k in 0 1; do
        hs=
        [ "$k" -eq 0 ] && hs=--host-store
        mh_exec $((k + 1)) env FCCL_PEER_TIMEOUT="$NS_PEER" "$env" timeout -k 5 120 \
            "$RUN" --no-kill -n "$NS_PER" --nnodes 2 --node-rank "$k" \
            --store "node1:$port" $hs "$HELPER" shrink >>"$tmp.n$k" 2>&1 &
        jobs+=($!)
    done
    for _ in $(seq 1200); do
        [ "$(cat "$tmp".n[01] | grep -c ' looping')" -ge "$n" ] && break
        sleep 0.05
    done
    sleep 0.3
    if [ "$fault" = host ]; then
        victims=($(seq "$NS_PER" $((n - 1))))
    else
        victims=("$NS_VICTIM")
    fi
    local pids=()
    for r in "${victims[@]}"; do
        pids+=($(cat "$tmp".n[01] | sed -n "s/^\[$r\] R$r pid \([0-9]*\) looping.*/\1/p" | head -n1))
    done
    t_kill=$(date +%s%6N)
    kill -9 "${pids[@]}"
    wait "${jobs[@]}"
    cat "$tmp".n[01] >"$tmp"
    summary "$t_kill" $((n - ${#victims[@]})) "$tmp"
}

netns_table() {
    if [ "$(id -u)" -ne 0 ]; then
        echo "(2 namespace hosts: skipped, needs root)"
        return 0
    fi
    MH_PREFIX=fcclft
    . "$ROOT/tests/multihost/netns.sh"
    mh_reap_stale
    trap 'mh_cleanup; rm -f "$tmp" "$tmp".n[01]' EXIT
    trap 'exit 130' INT
    trap 'exit 143' TERM
    mh_add_host 1 v4 && mh_add_host 2 v4 || { echo "cannot make the hosts"; return 1; }
    echo "| fault | provider | error, first (ms) | error, last (ms) | shrink (ms) | first correct all_reduce (ms) |"
    echo "|---|---|---|---|---|---|"
    local fault prov label port=29700
    for fault in $NS_FAULTS; do
        for prov in $NS_PROVIDERS; do
            rows=()
            for _ in $(seq "$ROUNDS"); do
                port=$((port + 1)) # a fresh store port each run
                rows+=("$(ns_one "$prov" "$fault" "$port")")
            done
            label="rank $NS_VICTIM killed"
            [ "$fault" = host ] && label="host 2's $NS_PER ranks killed"
            [ "$prov" = mixed ] && prov="mixed (shm + tcp;ofi_rxm)"
            row "$label" "$prov" 1 2 4 3
        done
    done
    echo
    echo "2 namespace hosts x $NS_PER ranks ($(nproc) CPUs in all), FCCL_PEER_TIMEOUT=$NS_PEER, median of $ROUNDS runs; ms from the kill"
}

col() { printf '%s\n' "${rows[@]}" | grep -v incomplete | awk -v c="$1" '$c != "-" {print $c}' | median; }

# row LABEL PROVIDER COLUMN...: a table row of the medians of rows'
# COLUMNs, and how many runs were incomplete, if any.
row() {
    local line="| $1 | $2 |" c bad
    shift 2
    for c in "$@"; do line="$line $(col "$c") |"; done
    bad=$(printf '%s\n' "${rows[@]}" | grep -c incomplete)
    [ "$bad" -gt 0 ] && line="$line $bad of $ROUNDS runs incomplete"
    echo "$line"
}

# Grow (issue 37): the same kill under fccl-run --respawn 1; the survivors
# shrink, then fccl_group_grow(shrunk, 1) takes the respawned rank back in
# (ft_recover grow).  Columns, ms: the grow alone, from the moment all
# are there (the last survivor's call, or the newcomer ready to post
# itself: its store connection and endpoints open) to the last return;
# when the newcomer was ready, from the kill (its process start and
# fccl_init's opening); the first correct all_reduce of the grown group
# on every rank, from the kill.
grow_one() {
    local prov=$1 t_kill
    kill_victim "$RUN" --respawn 1 -n "$N" --provider "$prov" "$HELPER" grow
    awk -v t0="$t_kill" -v n="$N" '
        / GROW / { if ($(NF-1) > gc) gc = $(NF-1); if ($NF > gr) gr = $NF }
        / NEWCOMER / { nr = $(NF-1); if ($NF > gr) gr = $NF }
        / OK / { o = ($NF - t0) / 1000; no++; if (o > ol) ol = o }
        END { if (no < n || !nr || !gc) { print "incomplete"; exit }
              from = gc > nr ? gc : nr
              printf "%.1f %.1f %.1f\n", (gr - from) / 1000,
                     (nr - t0) / 1000, ol }' "$tmp"
}

grow_table() {
    echo
    echo "| grow | provider | grow (ms) | newcomer ready (ms from the kill) | first correct all_reduce of the grown group (ms from the kill) |"
    echo "|---|---|---|---|---|"
    for prov in $PROVIDERS; do
        rows=()
        for _ in $(seq "$ROUNDS"); do
            rows+=("$(grow_one "$prov")")
        done
        row grow "$prov" 1 2 3
    done
    echo
    echo "grow: N=$N, rank $VICTIM SIGKILLed and respawned by fccl-run --respawn 1, median of $ROUNDS runs (target: grow 100 ms)"
}

# The torch process group rebuilt on a new member set (issue 37 item 5):
# bench/reconf.py, fccl.torch.ReconfigurableProcessGroup against torchft's
# Gloo re-creation in the same run (4 ranks, one SIGKILLed, the 3
# survivors reconfigure; a newcomer joins them), its min / median / max.
reconf_table() {
    echo
    echo "torch reconfiguration (bench/reconf.py --rounds $ROUNDS, ms from the first configure() to the last return):"
    echo
    PYTHONPATH="$ROOT/$BUILD/python" timeout -k 5 900 /usr/bin/python3 \
        "$ROOT/bench/reconf.py" --rounds "$ROUNDS" --build "$BUILD" 2>&1 |
        sed -n 's/^\(fccl\|gloo\) .* min .*/    &/p'
}

[ "$ONEHOST" = 1 ] && one_host_table
[ "$NETNS" = 1 ] && { [ "$ONEHOST" = 1 ] && echo; netns_table; }
[ "${GROW:-1}" = 0 ] || grow_table
[ "${RECONF:-1}" = 0 ] || reconf_table
