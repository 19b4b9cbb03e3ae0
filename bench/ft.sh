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
# (cli/bench/ft_recover.c, bench/ft_gloo.py).  Prints a markdown table.
#
#   bench/ft.sh [BUILD]
#   N=8 VICTIM=7 ROUNDS=3 PEER=3 PROVIDERS="shm tcp;ofi_rxm"
#   SYSTEMS="shrink reinit restart gloo"
#   GROW=0 skips the grow table (grow_table below)
set -u
BUILD=${1:-build}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
N=${N:-8} VICTIM=${VICTIM:-7} ROUNDS=${ROUNDS:-3} PEER=${PEER:-3}
PROVIDERS=${PROVIDERS:-"shm tcp;ofi_rxm"}
SYSTEMS=${SYSTEMS:-"shrink reinit restart gloo"}
RUN="$ROOT/$BUILD/bin/fccl-run"
HELPER="$ROOT/$BUILD/bench/ft_recover"
export PYTHONPATH="$ROOT/$BUILD/python" FCCL_TIMEOUT=60
export FCCL_PEER_TIMEOUT=$PEER
tmp=$(mktemp)
trap 'rm -f "$tmp"' EXIT

free_port() {
    /usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
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
    timeout -k 5 300 "${job[@]}" >"$tmp" 2>&1 &
    local jpid=$!
    for _ in $(seq 3600); do
        [ "$(grep -c ' looping' "$tmp")" -ge "$N" ] && break
        sleep 0.05
    done
    sleep 0.3
    pid=$(sed -n "s/^\[$VICTIM\] R$VICTIM pid \([0-9]*\) looping.*/\1/p" "$tmp" | head -n1)
    t_kill=$(date +%s%6N)
    kill -9 "$pid"
    wait "$jpid"
    awk -v t0="$t_kill" -v n="$N" '
        / ERR / { e = ($NF - t0) / 1000; ne++
                  if (ne == 1 || e < ef) ef = e; if (e > el) el = e }
        / OK /  { o = ($NF - t0) / 1000; no++; if (o > ol) ol = o }
        / SHRINK / { if ($(NF-1) > sc) sc = $(NF-1); if ($NF > sr) sr = $NF }
        END { if (no < n - 1) { print "incomplete"; exit }
              printf "%s %s %.1f %s\n", ne ? sprintf("%.1f", ef) : "-",
                     ne ? sprintf("%.1f", el) : "-", ol,
                     sc ? sprintf("%.1f", (sr - sc) / 1000) : "-" }' "$tmp"
}

median() { sort -n | awk '{a[NR]=$1} END {print NR ? a[int((NR+1)/2)] : "-"}'; }
# restart: the attempt's ranks are stopped by fccl-run before they report
# an error of their own, so its error columns stay "-"

echo "| system | provider | error, first (ms) | error, last (ms) | shrink (ms) | first correct all_reduce (ms) |"
echo "|---|---|---|---|---|---|"
for sys in $SYSTEMS; do
    for prov in $PROVIDERS; do
        [ "$sys" = gloo ] && [ "$prov" != "${PROVIDERS%% *}" ] && continue
        rows=()
        for _ in $(seq "$ROUNDS"); do
            rows+=("$(one "$sys" "$prov")")
        done
        col() { printf '%s\n' "${rows[@]}" | grep -v incomplete | awk -v c="$1" '$c != "-" {print $c}' | median; }
        bad=$(printf '%s\n' "${rows[@]}" | grep -c incomplete)
        label=$prov
        [ "$sys" = gloo ] && label="gloo (tcp)"
        echo "| $sys | $label | $(col 1) | $(col 2) | $(col 4) | $(col 3) |$([ "$bad" -gt 0 ] && echo " $bad of $ROUNDS runs incomplete")"
    done
done
echo
echo "N=$N ranks on one host ($(nproc) CPUs), rank $VICTIM SIGKILLed, FCCL_PEER_TIMEOUT=$PEER, median of $ROUNDS runs; ms from the kill"

# Grow (issue 37): the same kill under fccl-run --respawn 1; the survivors
# shrink, then fccl_group_grow(shrunk, 1) takes the respawned rank back in
# (ft_recover grow).  Columns, ms: the grow alone, from the moment all
# are there (the last survivor's call, or the newcomer ready to post
# itself: its store connection and endpoints open) to the last return;
# when the newcomer was ready, from the kill (its process start and
# fccl_init's opening); the first correct all_reduce of the grown group
# on every rank, from the kill.
grow_one() {
    local prov=$1 pid t_kill
    timeout -k 5 300 "$RUN" --respawn 1 -n "$N" --provider "$prov" \
        "$HELPER" grow >"$tmp" 2>&1 &
    local jpid=$!
    for _ in $(seq 3600); do
        [ "$(grep -c ' looping' "$tmp")" -ge "$N" ] && break
        sleep 0.05
    done
    sleep 0.3
    pid=$(sed -n "s/^\[$VICTIM\] R$VICTIM pid \([0-9]*\) looping.*/\1/p" "$tmp" | head -n1)
    t_kill=$(date +%s%6N)
    kill -9 "$pid"
    wait "$jpid"
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
        gcol() { printf '%s\n' "${rows[@]}" | grep -v incomplete | awk -v c="$1" '{print $c}' | median; }
        bad=$(printf '%s\n' "${rows[@]}" | grep -c incomplete)
        echo "| grow | $prov | $(gcol 1) | $(gcol 2) | $(gcol 3) |$([ "$bad" -gt 0 ] && echo " $bad of $ROUNDS runs incomplete")"
    done
    echo
    echo "grow: N=$N, rank $VICTIM SIGKILLed and respawned by fccl-run --respawn 1, median of $ROUNDS runs (target: grow 100 ms)"
}

[ "${GROW:-1}" = 0 ] || grow_table
