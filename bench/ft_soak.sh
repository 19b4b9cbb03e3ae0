#!/usr/bin/env bash
# Randomized kills (issue 36): ROUNDS jobs of N ranks under fccl-run
# --no-kill (cli/bench/ft_recover shrink), each with one random rank, or
# two (TWO percent of the rounds), SIGKILLed at a random moment of the
# all_reduce loop (0-DELAY ms after every rank loops; the second kill
# 0-50 ms after the first, so it may land in the shrink).  A round passes
# when every survivor shrank and ran a correct all_reduce on the new group
# (ft_recover exits 4 on a wrong sum), the job ended within its timeout
# (no hang), and no rank left a file in /dev/shm.  Prints one line per
# failing round and a summary; exits 1 if any round failed.
#
# Grow (issue 37): GROW percent of the rounds run under fccl-run
# --respawn 1 (ft_recover grow): the survivors shrink and grow the killed
# rank's respawn back in; their second kill (TWO percent) lands 100-500 ms
# after the first, before, during or after that grow (the respawned rank
# is ready ~300 ms after the kill).  Such a round passes when every
# survivor ends with a correct all_reduce (of the grown group, or after a
# failed grow of a group shrunk again), nothing hangs and /dev/shm is
# clean; a killed survivor's own respawn finds no grow and gives up after
# FT_JOIN_MS.
#
#   bench/ft_soak.sh [BUILD]
#   ROUNDS=100 N=6 TWO=25 DELAY=500 PROVIDERS="shm tcp;ofi_rxm" PEER=3 GROW=0
set -u
BUILD=${1:-build}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
ROUNDS=${ROUNDS:-100} N=${N:-6} TWO=${TWO:-25} DELAY=${DELAY:-500}
PROVIDERS=${PROVIDERS:-"shm tcp;ofi_rxm"} PEER=${PEER:-3} GROW=${GROW:-0}
export FCCL_TIMEOUT=30 FCCL_PEER_TIMEOUT=$PEER FT_JOIN_MS=3000
provs=(${PROVIDERS})
tmp=$(mktemp)
trap 'rm -f "$tmp"' EXIT
fail=0 ngrow=0 ngrowfail=0
for i in $(seq "$ROUNDS"); do
    prov=${provs[$((i % ${#provs[@]}))]}
    v1=$((RANDOM % N)) v2=-1
    if [ $((RANDOM % 100)) -lt "$TWO" ]; then
        v2=$(((v1 + 1 + RANDOM % (N - 1)) % N))
    fi
    # emptied here, not by the job's own redirection: that one runs in the
    # background child, and the wait below could read the previous round's
    # lines first (the "never looped" rounds: old pids, gone by then)
    : >"$tmp"
    mode=shrink launch=(--no-kill) lo=0 span=50
    if [ $((RANDOM % 100)) -lt "$GROW" ]; then
        mode=grow launch=(--respawn 1) lo=100 span=400
    fi
    timeout -k 5 90 "$ROOT/$BUILD/bin/fccl-run" "${launch[@]}" -n "$N" \
        --provider "$prov" "$ROOT/$BUILD/bench/ft_recover" "$mode" >>"$tmp" 2>&1 &
    job=$!
    for _ in $(seq 1200); do
        [ "$(grep -c ' looping' "$tmp")" -ge "$N" ] && break
        sleep 0.05
    done
    sleep "$(awk -v d="$DELAY" -v r="$RANDOM" 'BEGIN{printf "%.3f", d*r/32767/1000}')"
    pid() { sed -n "s/^\[$1\] R$1 pid \([0-9]*\) looping.*/\1/p" "$tmp" | head -n1; }
    p1=$(pid "$v1") p2=
    if [ -z "$p1" ]; then # the job did not start: a failure of its own
        echo "round $i ($prov): rank $v1 never looped"
        cat "$tmp"
        ps -eo pid,ppid,stat,wchan:24,etime,args | grep -E '[f]ccl-run|[f]t_recover'
        for p in $(pgrep -f "$ROOT/$BUILD/bench/ft_recover shrink"); do
            echo "== $p: $(tr '\n' ' ' </proc/"$p"/stack 2>/dev/null | cut -c1-200)"
        done
        kill "$job"
        wait "$job"
        fail=$((fail + 1))
        continue
    fi
    kill -9 "$p1"
    if [ "$v2" -ge 0 ]; then
        sleep "$(awk -v r="$RANDOM" -v lo="$lo" -v s="$span" 'BEGIN{printf "%.3f", (lo+s*r/32767)/1000}')"
        p2=$(pid "$v2")
        kill -9 "$p2" 2>/dev/null
    fi
    wait "$job"
    st=$?
    ok=$(grep -c ' OK ' "$tmp")
    [ "$mode" = grow ] && ngrow=$((ngrow + 1))
    grep -q ' GROWFAIL ' "$tmp" && ngrowfail=$((ngrowfail + 1))
    want=$((N - 1 - (v2 >= 0)))
    left=0
    # every process's, the respawned ones' too ("R<r> pid <p> newcomer")
    for p in $(sed -n 's/^\[[0-9]*\] R[0-9]* pid \([0-9]*\) .*/\1/p' "$tmp"); do
        left=$((left + $(ls /dev/shm | grep -c "^$p:")))
        rm -f /dev/shm/"$p":*
    done
    # a survivor killed second may have been too late for the agreement
    # only if it died after deciding: then its peers fail the new group's
    # all_reduce and report; such a round counts as failed here
    if [ "$st" -eq 124 ] || [ "$ok" -lt "$want" ] || [ "$left" -ne 0 ] ||
       grep -q "wrong sum" "$tmp"; then
        fail=$((fail + 1))
        echo "round $i ($prov, $mode, kill $v1${p2:+ and $v2}): exit $st, $ok of $want OK, $left /dev/shm files"
        tail -n 15 "$tmp"
    fi
done
echo "ft_soak: $((ROUNDS - fail)) of $ROUNDS rounds passed (N=$N, providers $PROVIDERS, $TWO% with two kills, $GROW% growing the respawned rank back in: $ngrow rounds, $ngrowfail of them with a grow failed by the second kill)"
[ "$fail" -eq 0 ]
