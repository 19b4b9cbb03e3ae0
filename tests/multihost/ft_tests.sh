# tests/multihost/ft_tests.sh: fault tolerance across hosts (issue 36),
# sourced by run.sh after tests.sh (whose helpers it uses).
#
# 2 hosts x 3 ranks of tests/ft_check under `fccl-run --no-kill --nnodes
# 2`: a rank SIGKILLed after a barrier, the survivors' agreement and
# shrink, and a checked all_reduce and broadcast on the new group; two
# ranks on different hosts killed, the second as the shrink begins; a
# revoke with heartbeats off reaching the ranks of both hosts.  Two
# transports: "tcp;ofi_rxm" for every peer (FCCL_PROVIDER), and the mixed
# group (shm inside a host, tcp;ofi_rxm between the hosts:
# FCCL_NET_PROVIDER).  The expected group names come from sha1sum of the
# survivors' list, sums from each rank's own arithmetic (ft_check exits 4
# on a wrong one).  Times are printed as "measured:", not asserted, but
# for the 1 s a revoke has to reach every member.

FT_HOSTS=2 FT_PER=3

# ft_job PORT PEER_TIMEOUT ENV ARGS...: fccl-run --no-kill on both hosts
# (the store hosted by node 1's), ft_check ARGS; logs $T/node<K>.log,
# exit statuses in BG_RCS.
ft_job()
{
    local port=$1 peer=$2 env=$3
    shift 3
    NODE_ENV_0="FCCL_PEER_TIMEOUT=$peer FCCL_TIMEOUT=30 $env" \
        NODE_ENV_1="FCCL_PEER_TIMEOUT=$peer FCCL_TIMEOUT=30 $env" \
        run_nodes "$FT_HOSTS" "$FT_PER" "$port" --no-kill "$TBIN/ft_check" "$@"
}

# The rest of rank R's line "R<R> KEY..." (empty if none).
ft_line() { cat "$T"/node*.log | sed -n "s/^\[$1\] R$1 $2//p" | head -n 1; }

# fccl_<n>_<sha1 of "a_b_c"> of the ranks 0..N-1 but $1 and $2 (-1: none).
ft_name()
{
    local r list= n=0 total=$((FT_HOSTS * FT_PER))
    for r in $(seq 0 $((total - 1))); do
        [ "$r" = "$1" ] || [ "$r" = "$2" ] && continue
        list="$list${list:+_}$r"
        n=$((n + 1))
    done
    echo "fccl_${n}_$(printf %s "$list" | sha1sum | cut -c1-40)"
}

# ft_shrunk GONE GONE2 FAILED: every other rank shrank to the group of the
# rest (name, size, its rank in the old order), agreed on FAILED ("[4]",
# "[]"), ran the checked collectives on it and returned from finalize.
# Prints the shrink time (last call to last return).
ft_shrunk()
{
    local gone=$1 gone2=$2 failed=$3 total=$((FT_HOSTS * FT_PER))
    local size name r line want c t lc=0 lr=0 nr
    size=$((total - (gone >= 0) - (gone2 >= 0)))
    name=$(ft_name "$gone" "$gone2")
    for r in $(seq 0 $((total - 1))); do
        [ "$r" = "$gone" ] || [ "$r" = "$gone2" ] && continue
        line=$(ft_line "$r" "SHRINK ")
        want="rc success size $size name $name"
        [[ "$line" == *"$want"* ]] ||
            { fail "rank $r: want '$want' in '$line'"; return 1; }
        c=$(echo "$line" | sed -n 's/.*call \([0-9]*\) .*/\1/p')
        t=$(echo "$line" | sed -n 's/.*ret \([0-9]*\) .*/\1/p')
        [ "$c" -gt "$lc" ] && lc=$c
        [ "$t" -gt "$lr" ] && lr=$t
        line=$(ft_line "$r" "AGREED ")
        [ "$line" = "$((total - size)) $failed" ] ||
            { fail "rank $r agreed on '$line', want '$((total - size)) $failed'"; return 1; }
        nr=$((r - (gone >= 0 && r > gone) - (gone2 >= 0 && r > gone2)))
        [ "$(ft_line "$r" "NEWGROUP ok rank ")" = "$nr" ] ||
            { fail "rank $r: new group rank '$(ft_line "$r" NEWGROUP)', want $nr"; return 1; }
        [ -n "$(ft_line "$r" "FINALIZE ")" ] ||
            { fail "rank $r did not return from finalize"; return 1; }
    done
    echo "measured: shrink $(( (lr - lc) / 1000 )).$(( (lr - lc) % 1000 / 100 )) ms from the last survivor's call to the last return"
}

# No /dev/shm file of any rank ("R<r> pid <pid>") is left.
ft_shm_clean()
{
    local r p pids=()
    for r in $(seq 0 $((FT_HOSTS * FT_PER - 1))); do
        p=$(ft_line "$r" "pid ")
        [ -n "$p" ] || { fail "rank $r printed no pid"; return 1; }
        pids+=("$p")
    done
    shm_clean "${pids[@]}"
}

# Rank VICTIM (on host VICTIM / FT_PER + 1) SIGKILLs itself after a
# barrier; its node's fccl-run exits 137, the other 0 (--no-kill: no
# failure crosses to it); the survivors name it, agree and go on.
ft_kill_case()
{
    local port=$1 env=$2 victim=$3 k want r line first= last=
    ft_job "$port" 3 "$env" kill "$victim"
    for k in 0 1; do
        want=0
        [ $((victim / FT_PER)) -eq "$k" ] && want=137
        [ "${BG_RCS[$k]}" -eq "$want" ] ||
            { tail -n 40 "$T"/node*.log; fail "node $k exited ${BG_RCS[$k]}, want $want"; return 1; }
    done
    for r in $(seq 0 $((FT_HOSTS * FT_PER - 1))); do
        [ "$r" = "$victim" ] && continue
        line=$(ft_line "$r" "FAILED ")
        [[ "$line" == *"rank $victim"* ]] ||
            { fail "rank $r's failure names no rank $victim: '$line'"; return 1; }
    done
    ft_shrunk "$victim" -1 "[$victim]" && ft_shm_clean
}

# tcp;ofi_rxm between every pair of ranks, the rank killed on host 2.
t_ft_kill_shrink_rxm_2x3()
{
    ft_kill_case 29601 "FCCL_PROVIDER=tcp;ofi_rxm" 4
}

# The mixed group: shm among a host's ranks, tcp;ofi_rxm across; the last
# rank of host 1 killed (its host's peers see its process end, host 2's
# its heartbeats stop), and rank 0 (the agreement's first poster).
t_ft_kill_shrink_mixed_2x3()
{
    local e="FCCL_NET_PROVIDER=tcp;ofi_rxm FCCL_LOG_LEVEL=info"
    ft_kill_case 29611 "$e" 2 || return 1
    grep -h '^\[[0-9]*\] ' "$T"/node*.log | grep -qF "tcp;ofi_rxm endpoint open on eth0" ||
        fail "no tcp;ofi_rxm endpoint on eth0" || return 1
    ft_kill_case 29612 "FCCL_NET_PROVIDER=tcp;ofi_rxm" 0
}

# Two ranks, one per host: rank 1 SIGKILLs itself after a barrier, rank 4
# once it has seen that failure, as the others begin to shrink; both are
# left out, and the new group (whose heartbeat ring must close over both)
# still runs an all_reduce after FCCL_PEER_TIMEOUT has passed.
t_ft_kill_two_mixed_2x3()
{
    ft_job 29631 2 "FCCL_NET_PROVIDER=tcp;ofi_rxm FT_LINGER_MS=4500" kill 1 4
    [ "${BG_RCS[0]}" -eq 137 ] && [ "${BG_RCS[1]}" -eq 137 ] ||
        { tail -n 40 "$T"/node*.log; fail "exit statuses ${BG_RCS[*]}, want 137 137"; return 1; }
    ft_shrunk 1 4 "[1,4]" && ft_shm_clean
}

# Heartbeats off (FCCL_PEER_TIMEOUT=0): rank 0 revokes the world while
# rank 1 waits in a receive nobody sends and the others (host 2's among
# them) in a barrier; each is released within 1 s with the revoke named,
# its next call fails, and the revoked world shrinks to all six.
t_ft_revoke_mixed_2x3()
{
    ft_job 29621 0 "FCCL_NET_PROVIDER=tcp;ofi_rxm" revoke
    all_zero || return 1
    local line t0 r dt
    line=$(ft_line 0 "REVOKED at ")
    t0=${line%% *}
    [[ "$line" == *"rc 0"* ]] || { fail "rank 0: '$line'"; return 1; }
    for r in $(seq 1 $((FT_HOSTS * FT_PER - 1))); do
        line=$(ft_line "$r" "RELEASED ")
        [[ "$line" == *"status group revoked"*"revoked by rank 0 (world 0)"* ]] ||
            { fail "rank $r: '$line'"; return 1; }
        dt=$(( $(echo "$line" | sed -n 's/.* at \([0-9]*\) .*/\1/p') - t0 ))
        echo "measured: rank $r (host $((r / FT_PER + 1))) released $((dt / 1000)) ms after the revoke"
        [ "$dt" -ge 0 ] && [ "$dt" -lt 1000000 ] ||
            { fail "rank $r released $dt us after the revoke (bound 1 s)"; return 1; }
    done
    for r in $(seq 0 $((FT_HOSTS * FT_PER - 1))); do
        [[ "$(ft_line "$r" "NEXT ")" == "group revoked"*"revoked by"* ]] ||
            { fail "rank $r's next call: '$(ft_line "$r" "NEXT ")'"; return 1; }
    done
    ft_shrunk -1 -1 "[]" && ft_shm_clean
}
