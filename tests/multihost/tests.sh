# tests/multihost/tests.sh: the multi-host tests, sourced by run.sh.
#
# Every t_NAME function is one test, run in a subshell with $T its scratch
# directory; it returns 0 when it passed, else prints why.  Lines starting
# with "measured:" are shown in the summary.  Hosts: node1..node4 (IPv4 and
# IPv6), node5 and node6 (IPv6 only), made once by mh_setup_hosts.

mh_setup_hosts()
{
    local i
    for i in 1 2 3 4; do mh_add_host "$i" both || return 1; done
    for i in 5 6; do mh_add_host "$i" v6 || return 1; done
}

# ---- helpers ----

BG_PIDS=()
BG_RCS=()

# bg HOST LOGFILE CMD...: run CMD on HOST in the background (hard timeout).
bg()
{
    local h=$1 log=$2
    shift 2
    mh_exec "$h" timeout -k 5 90 "$@" > "$log" 2>&1 &
    BG_PIDS+=($!)
}

# Wait for every bg command; exit statuses in BG_RCS, in start order.
wait_bg()
{
    local p
    BG_RCS=()
    for p in "${BG_PIDS[@]}"; do
        wait "$p"
        BG_RCS+=($?)
    done
    BG_PIDS=()
}

fail() { echo "FAIL: $*"; return 1; }

now_ms() { echo $(( $(date +%s%N) / 1000000 )); }

# A plain store server on host 1 (background); waits until it listens.
store_on_node1()
{
    local port=$1
    mh_exec 1 timeout -k 5 100 "$BIN/tcpstore-server" --host node1 \
        --port "$port" > "$T/server.log" 2>&1 &
    STORE_PID=$!
    for _ in $(seq 50); do
        grep -q listening "$T/server.log" && return 0
        sleep 0.1
    done
    fail "store did not start: $(cat "$T/server.log")"
}

store_keys() { mh_exec 1 "$BIN/tcpstore" --addr "node1:$1" keys ""; }

# fccl-run on hosts 1..M with N ranks each; store on node1:PORT hosted by
# node 1's fccl-run unless HOSTED=0; NODE_ENV_<K> adds variables on node
# K.  Logs $T/node<K>.log.
run_nodes()
{
    local m=$1 n=$2 port=$3 k hs extra
    shift 3
    for k in $(seq 0 $((m - 1))); do
        hs=
        [ "$k" -eq 0 ] && [ "${HOSTED:-1}" = 1 ] && hs=--host-store
        eval "extra=\${NODE_ENV_$k:-}"
        bg $((k + 1)) "$T/node$k.log" env $extra "$BIN/fccl-run" -n "$n" --nnodes "$m" \
            --node-rank "$k" --store "node1:$port" $hs "$@"
    done
    wait_bg
}

all_zero()
{
    local rc i=0
    for rc in "${BG_RCS[@]}"; do
        [ "$rc" -eq 0 ] || { cat "$T"/*.log | tail -n 30; fail "job $i exited $rc"; return 1; }
        i=$((i + 1))
    done
}

# boot_check env prints "R<rank> topo <nodes> <node> <local> <localsize>".
check_topo()
{
    local want_ranks=$1 want_nodes=$2 per=$3 r line
    for r in $(seq 0 $((want_ranks - 1))); do
        line=$(cat "$T"/*.log | sed -n "s/^\(\[$r\] \)\{0,1\}R$r topo //p" | head -n 1)
        [ "$line" = "$want_nodes $((r / per)) $((r % per)) $per" ] ||
            { fail "rank $r topology '$line', want '$want_nodes $((r / per)) $((r % per)) $per'"; return 1; }
        grep -q "R$r done 0" "$T"/*.log || { fail "rank $r did not finish"; return 1; }
    done
}

# Each of the first N ranks opened its network endpoint (provider $2,
# default net) on eth0 (the interface to the other hosts), not on loopback
# (needs FCCL_LOG_LEVEL=info).
net_on_eth0()
{
    local r prov=${2:-net}
    for r in $(seq 0 $(($1 - 1))); do
        grep -h "^\[$r\] " "$T"/*.log | grep -qF "$prov endpoint open on eth0" ||
            { fail "rank $r: no $prov endpoint on eth0"; return 1; }
    done
}

# ---- tests ----

# 2 hosts x 2 ranks: fccl-demo's checked collectives, and the topology
# bootstrap sees (2 nodes, 2 local ranks each).
t_nnodes_2x2()
{
    NODE_ENV_0=FCCL_LOG_LEVEL=info NODE_ENV_1=FCCL_LOG_LEVEL=info \
        run_nodes 2 2 29411 "$BIN/fccl-demo"
    all_zero && net_on_eth0 4 || return 1
    grep -q '^\[0\] fccl-demo: 4 ranks on 2 node(s)' "$T/node0.log" ||
        fail "no '4 ranks on 2 node(s)' line" || return 1
    grep -q '^\[0\] fccl-demo: all results correct' "$T/node0.log" ||
        fail "no 'all results correct'" || return 1
    run_nodes 2 2 29412 "$TBIN/boot_check" env
    all_zero && check_topo 4 2 2 || return 1
    # the selector picks the hierarchical all_reduce on 2 hosts x 2 ranks
    # (per-host stages through each host's segment); fccl-bench names it
    # in its last column, and checks the results
    run_nodes 2 2 29413 "$BIN/fccl-bench" -b 8 -e 1M -f 32 -n 3 -w 1 -c 1
    all_zero || return 1
    grep -q '^\[0\] # all results correct' "$T/node0.log" &&
        grep -q '^\[0\] # *size .* algo$' "$T/node0.log" &&
        [ "$(grep -Ec '^\[0\] +[0-9]+ .* hier$' "$T/node0.log")" -eq 4 ] ||
        fail "fccl-bench 2x2: $(cat "$T/node0.log")"
}

# 4 hosts x 1 rank.
t_nnodes_4x1()
{
    run_nodes 4 1 29421 "$BIN/fccl-demo"
    all_zero || return 1
    grep -q '^\[0\] fccl-demo: 4 ranks on 4 node(s)' "$T/node0.log" ||
        fail "no '4 ranks on 4 node(s)' line" || return 1
    grep -q '^\[0\] fccl-demo: all results correct' "$T/node0.log" ||
        fail "no 'all results correct'" || return 1
    run_nodes 4 1 29422 "$TBIN/boot_check" env
    all_zero && check_topo 4 4 1 || return 1
    # fccl-bench counts the hosts in its header and checks its results
    run_nodes 4 1 29423 "$BIN/fccl-bench" -b 8 -e 64K -f 32 -n 3 -w 1 -c 1
    all_zero || return 1
    grep -q '^\[0\] # fccl-bench .*: 4 ranks on 4 node(s)' "$T/node0.log" &&
        grep -q '^\[0\] # all results correct' "$T/node0.log" &&
        grep -Eq '^\[0\] +8 .* rd$' "$T/node0.log" ||
        fail "fccl-bench: $(cat "$T/node0.log")" || return 1
    # one host per rank: nothing to gain from leaders; the CSV's last
    # field names the algorithm too
    run_nodes 4 1 29424 "$BIN/fccl-bench" -b 8 -e 8 -n 3 -w 1 --csv
    all_zero || return 1
    grep -q '^\[0\] op,.*,wrong,algo$' "$T/node0.log" &&
        grep -Eq '^\[0\] all_reduce,4,8,.*,0,rd$' "$T/node0.log" ||
        fail "fccl-bench --csv: $(cat "$T/node0.log")"
}

# Without a job id, the nodes of one launch agree on one, the next launch
# on the same store gets another, and a finished job leaves no keys.
t_nnodes_job_id()
{
    store_on_node1 29431 || return 1
    local prog='echo "JOB=$FCCL_JOB_ID"; exec "$0" "$@"' l j0 j1 prev=
    for l in 1 2; do
        HOSTED=0 run_nodes 2 2 29431 sh -c "$prog" "$BIN/fccl-demo"
        all_zero || return 1
        j0=$(sed -n 's/^\[[0-9]*\] JOB=//p' "$T/node0.log" | sort -u)
        j1=$(sed -n 's/^\[[0-9]*\] JOB=//p' "$T/node1.log" | sort -u)
        echo "launch $l: job ids '$j0' / '$j1'"
        [ -n "$j0" ] && [ "$j0" = "$j1" ] || fail "nodes disagree" || return 1
        [ "$j0" != "$prev" ] || fail "same id as the previous launch" || return 1
        prev=$j0
        local keys
        keys=$(store_keys 29431)
        [ -z "$keys" ] || fail "keys left on the store: $keys" || return 1
    done
    kill "$STORE_PID"
}

# A rank failing on node 1 stops node 0 too; both exit with its status.
t_nnodes_failure()
{
    local prog='if [ "$RANK" = 3 ]; then sleep 0.5; exit 5; fi; exec sleep 60'
    local t0 ms
    t0=$(now_ms)
    run_nodes 2 2 29441 sh -c "$prog"
    ms=$(( $(now_ms) - t0 ))
    echo "measured: failure of rank 3 on node 1 ended both nodes in $ms ms"
    [ "${BG_RCS[0]}" -eq 5 ] && [ "${BG_RCS[1]}" -eq 5 ] ||
        { cat "$T"/*.log; fail "exit codes ${BG_RCS[*]}, want 5 5"; return 1; }
    grep -q "rank 3 exited with status 5 on node 1 (node2)" "$T/node0.log" ||
        fail "node 0 does not name the failed rank: $(cat "$T/node0.log")" || return 1
    [ "$ms" -lt 15000 ] || fail "took $ms ms"
}

# ---- launchers other than fccl-run: variables set by hand per rank ----

CLEAN_ENV=(env -u RANK -u WORLD_SIZE -u LOCAL_RANK -u LOCAL_WORLD_SIZE
    -u MASTER_ADDR -u MASTER_PORT -u FCCL_JOB_ID -u TORCHELASTIC_RUN_ID
    -u FCCL_NET_IFACE)

# by_hand M N VARFN PROG...: start M hosts x N ranks without a launcher;
# VARFN R L K prints rank R's (local L, node K) variables, one per word.
by_hand()
{
    local m=$1 n=$2 varfn=$3 k l r
    shift 3
    for k in $(seq 0 $((m - 1))); do
        for l in $(seq 0 $((n - 1))); do
            r=$((k * n + l))
            bg $((k + 1)) "$T/rank$r.log" "${CLEAN_ENV[@]}" \
                $($varfn "$r" "$l" "$k") "$@"
        done
    done
    wait_bg
}

# srun's variables for 2 hosts x 2 tasks, node list compressed.
srun_vars()
{
    echo "SLURM_PROCID=$1 SLURM_NTASKS=4 SLURM_LOCALID=$2 SLURM_NODEID=$3"
    echo "SLURM_TASKS_PER_NODE=2(x2) SLURM_JOB_NODELIST=node[1-2]"
    echo "SLURM_JOB_ID=4242 SLURM_STEP_ID=0"
}

# An srun start with no MASTER_ADDR and no MASTER_PORT: rank 0 serves the
# store on the node list's first host, port 29500.
t_srun_no_master_addr()
{
    by_hand 2 2 srun_vars "$TBIN/boot_check" env
    all_zero && check_topo 4 2 2 || return 1
    by_hand 2 2 srun_vars "$BIN/fccl-demo"
    all_zero || return 1
    grep -q 'fccl-demo: 4 ranks on 2 node(s)' "$T/rank0.log" &&
        grep -q 'all results correct' "$T/rank0.log" ||
        fail "fccl-demo under srun: $(cat "$T/rank0.log")"
}

slurm4_vars()
{
    echo "SLURM_PROCID=$1 SLURM_NTASKS=4 SLURM_LOCALID=$2 SLURM_NODEID=$3"
    echo "SLURM_NTASKS_PER_NODE=1 SLURM_JOB_NODELIST=node[1-4]"
    echo "MASTER_ADDR=node1 MASTER_PORT=29461"
}

# Slurm with MASTER_ADDR/MASTER_PORT given: 4 hosts x 1 task.
t_slurm_master_addr_4x1()
{
    by_hand 4 1 slurm4_vars "$TBIN/boot_check" env
    all_zero && check_topo 4 4 1
}

ompi_vars()
{
    echo "OMPI_COMM_WORLD_RANK=$1 OMPI_COMM_WORLD_SIZE=4"
    echo "OMPI_COMM_WORLD_LOCAL_RANK=$2 OMPI_COMM_WORLD_LOCAL_SIZE=2"
    echo "MASTER_ADDR=node1 MASTER_PORT=29471"
}

# Open MPI's mpirun with MASTER_ADDR exported: 2 hosts x 2 ranks.
t_openmpi_env()
{
    by_hand 2 2 ompi_vars "$TBIN/boot_check" env
    all_zero && check_topo 4 2 2 || return 1
    by_hand 2 2 ompi_vars "$BIN/fccl-demo"
    all_zero && grep -q 'all results correct' "$T/rank0.log" ||
        fail "fccl-demo under Open MPI variables: $(cat "$T/rank0.log")"
}

pmi_vars()
{
    echo "PMI_RANK=$1 PMI_SIZE=4 MPI_LOCALRANKID=$2 MPI_LOCALNRANKS=2"
    echo "MASTER_ADDR=node2 MASTER_PORT=29481"
}

# MPICH/hydra variables; the store on node2 (rank 0 is on node1, so rank
# 0 cannot bind it and someone must serve it: a standalone server).
t_mpich_env()
{
    mh_exec 2 timeout -k 5 60 "$BIN/tcpstore-server" --host node2 \
        --port 29481 > "$T/server.log" 2>&1 &
    by_hand 2 2 pmi_vars "$TBIN/boot_check" env
    all_zero && check_topo 4 2 2
}

# mpirun without MASTER_ADDR: a clear error naming the variable.
t_mpirun_no_master_addr()
{
    bg 1 "$T/ompi.log" "${CLEAN_ENV[@]}" OMPI_COMM_WORLD_RANK=0 \
        OMPI_COMM_WORLD_SIZE=2 "$BIN/fccl-demo"
    bg 1 "$T/pmi.log" "${CLEAN_ENV[@]}" PMI_RANK=1 PMI_SIZE=2 "$TBIN/boot_check" env
    wait_bg
    cat "$T/ompi.log" "$T/pmi.log"
    [ "${BG_RCS[0]}" -ne 0 ] && [ "${BG_RCS[1]}" -ne 0 ] ||
        fail "exit codes ${BG_RCS[*]}, want failures" || return 1
    grep -q 'OMPI_COMM_WORLD_RANK is set) but MASTER_ADDR is not set' "$T/ompi.log" &&
        grep -q 'PMI_RANK is set) but MASTER_ADDR is not set' "$T/pmi.log" ||
        fail "no error naming MASTER_ADDR"
}

# Mixed installs: node 1 pretends another fccl version; init fails on
# every rank with an error naming both versions and a rank of each.
t_mixed_versions()
{
    NODE_ENV_1=FCCL_FAKE_VERSION=9.9.9 run_nodes 2 1 29491 "$TBIN/boot_check" env
    cat "$T"/node*.log
    [ "${BG_RCS[0]}" -ne 0 ] && [ "${BG_RCS[1]}" -ne 0 ] ||
        fail "exit codes ${BG_RCS[*]}, want failures" || return 1
    local v
    v=$(sed -n 's/^#define FCCL_VERSION_STRING "\(.*\)"/\1/p' \
        "$ROOT/include/fccl/core.h")
    local want="rank 0 runs fccl $v wire 3 eager 32768, rank 1 runs fccl 9.9.9 wire 3 eager 32768"
    grep -q "^\[0\] .*$want" "$T/node0.log" && grep -q "^\[1\] .*$want" "$T/node1.log" ||
        fail "no error naming both versions on both nodes"
}

# IPv6 only: node5 and node6 have no IPv4 address but loopback's; the
# store at [fd00:231::5] and the ranks' traffic over IPv6.
t_ipv6_2x2()
{
    local k hs store="[$(mh_addr 5 v6)]:29501"
    for k in 0 1; do
        hs=
        [ "$k" -eq 0 ] && hs=--host-store
        bg $((k + 5)) "$T/node$k.log" env FCCL_LOG_LEVEL=info "$BIN/fccl-run" \
            -n 2 --nnodes 2 --node-rank "$k" --store "$store" $hs "$BIN/fccl-demo"
    done
    wait_bg
    all_zero && net_on_eth0 4 || return 1
    grep -q '^\[0\] fccl-demo: 4 ranks on 2 node(s)' "$T/node0.log" &&
        grep -q '^\[0\] fccl-demo: all results correct' "$T/node0.log" ||
        fail "fccl-demo over IPv6: $(cat "$T/node0.log")"
}

# A rank SIGKILLed mid-job: every node's fccl-run exits 137 (128 + 9), and
# no rank of the job leaves its libfabric shm file ("/dev/shm/<pid>:...").
t_killed_rank_shm_cleanup()
{
    local k hs pids=() i p left
    for k in 0 1; do
        hs=
        [ "$k" -eq 0 ] && hs=--host-store
        bg $((k + 1)) "$T/node$k.log" "$BIN/fccl-run" -n 2 --nnodes 2 \
            --node-rank "$k" --store node1:29511 $hs "$TBIN/boot_check" hold 30000
    done
    for i in $(seq 100); do
        [ "$(cat "$T"/node*.log | grep -c ' ready$')" -eq 4 ] && break
        sleep 0.1
    done
    pids=($(sed -n 's/^\[[0-9]*\] R[0-9]* pid \([0-9]*\) ready$/\1/p' "$T"/node*.log))
    [ ${#pids[@]} -eq 4 ] || { wait_bg; fail "ranks not ready: $(cat "$T"/node*.log)"; return 1; }
    for p in "${pids[@]}"; do
        ls /dev/shm | grep -q "^$p:" || echo "note: no shm file of pid $p before the kill"
    done
    p=$(sed -n 's/^\[1\] R1 pid \([0-9]*\) ready$/\1/p' "$T/node0.log")
    local t0 ms
    t0=$(now_ms)
    kill -9 "$p"
    wait_bg
    ms=$(( $(now_ms) - t0 ))
    echo "measured: rank 1 killed; both nodes' fccl-run exited after $ms ms"
    cat "$T"/node*.log | grep -v ' ready$'
    [ "${BG_RCS[0]}" -eq 137 ] && [ "${BG_RCS[1]}" -eq 137 ] ||
        fail "exit codes ${BG_RCS[*]}, want 137 137" || return 1
    left=
    for p in "${pids[@]}"; do
        left="$left$(ls /dev/shm | grep "^$p:")"
    done
    [ -z "$left" ] || fail "left in /dev/shm: $left"
}

# 2 hosts x 3 ranks: the collective test matrix (tests/coll_check -e):
# every operation, dtype, op and forced algorithm, checked against
# references on every rank and compared across ranks; shm within a host,
# net (the default network provider) between them.
t_coll_matrix_2x3()
{
    run_nodes 2 3 29521 "$TBIN/coll_check" -e -m matrix -t 200 ${COLL_ARGS:-}
    coll_matrix_ok 6
}

# The same on 2 hosts x 2 ranks with tcp;ofi_rxm between the hosts
# (FCCL_NET_PROVIDER), and that provider's endpoint on eth0.
t_coll_matrix_2x2_rxm()
{
    local e="FCCL_NET_PROVIDER=tcp;ofi_rxm FCCL_LOG_LEVEL=info"
    NODE_ENV_0=$e NODE_ENV_1=$e \
        run_nodes 2 2 29531 "$TBIN/coll_check" -e -m matrix -t 200 ${COLL_ARGS:-}
    coll_matrix_ok 4 && net_on_eth0 4 "tcp;ofi_rxm"
}

# coll_check's summary on node 0: all cases passed on $1 ranks.
coll_matrix_ok()
{
    local line
    line=$(grep -h 'coll_check: ' "$T/node0.log")
    echo "$line"
    echo "measured: ${line#*coll_check: }"
    all_zero || return 1
    local cases failed mism
    read -r cases failed mism <<< "$(echo "$line" |
        sed -n 's/.*: \([0-9]*\) cases, \([0-9]*\) failed, \([0-9]*\) hash.*/\1 \2 \3/p')"
    [ -n "$cases" ] && [ "$cases" -ge 300 ] && [ "$failed" -eq 0 ] && [ "$mism" -eq 0 ] ||
        fail "cases='$cases' failed='$failed' mismatches='$mism'"
    echo "$line" | grep -q "(env, 2 hosts) ranks=$1" || fail "not $1 ranks on 2 hosts"
}

# The harness itself: a run interrupted by SIGTERM removes its namespaces;
# a run killed outright leaves them, and the next run's mh_reap_stale
# removes them (and nothing of a live run).  The nested runs keep their
# logs under $T (TMPDIR): one killed outright cannot remove them, and
# this run's removal of its own logs takes them too.
t_harness_cleanup()
{
    local sig pid n
    for sig in TERM KILL; do
        TMPDIR=$T MH_PREFIX=fcclmhn FCCL_MH_TEST_TIMEOUT=60 setsid "$HERE/run.sh" \
            "$BUILD" t_nnodes_failure > "$T/nested-$sig.log" 2>&1 &
        pid=$!
        for _ in $(seq 100); do
            n=$(ip netns list | grep -c "^fcclmhn-$pid-h")
            [ "$n" -ge 6 ] && break
            sleep 0.05
        done
        [ "$n" -ge 6 ] || { kill -9 "$pid"; fail "nested run made $n hosts"; return 1; }
        kill -"$sig" "$pid"
        wait "$pid"
        n=$(ip netns list | grep -c "^fcclmhn-$pid-")
        echo "after SIG$sig: $n namespaces of the nested run left"
        if [ "$sig" = TERM ]; then
            [ "$n" -eq 0 ] || fail "SIGTERM left $n namespaces" || return 1
            n=$(find "$T" -maxdepth 1 -name 'fccl-mh.*' | wc -l)
            [ "$n" -eq 0 ] || fail "SIGTERM left $n log folders" || return 1
        else
            [ "$n" -ge 1 ] || fail "SIGKILL left nothing to reap?" || return 1
            ( MH_PREFIX=fcclmhn; . "$HERE/netns.sh"; mh_reap_stale )
            n=$(ip netns list | grep -c "^fcclmhn-$pid-")
            [ "$n" -eq 0 ] || fail "reap left $n namespaces" || return 1
            [ ! -e "/etc/netns/fcclmhn-$pid-h1" ] || fail "/etc/netns entry left" || return 1
        fi
    done
    # our own hosts are alive and untouched
    [ "$(ip netns list | grep -c "^$MH_ID-h")" -eq 6 ] || fail "our hosts were touched"
}

# A given job id reused after a launch whose node was killed outright: its
# stale failure key must not fail the next launch.
t_nnodes_job_id_reused()
{
    store_on_node1 29531 || return 1
    mh_exec 1 "$BIN/tcpstore" --addr node1:29531 set fccl-run/jobx/failed "9 stale" &&
        mh_exec 1 "$BIN/tcpstore" --addr node1:29531 add fccl-run/jobx/exited 1 > /dev/null ||
        fail "cannot seed the store" || return 1
    # node 1 first: it sees the stale key before node 0 deletes it
    local k
    for k in 1 0; do
        bg $((k + 1)) "$T/node$k.log" "$BIN/fccl-run" -n 2 --nnodes 2 \
            --node-rank "$k" --store node1:29531 --job-id jobx "$BIN/fccl-demo"
        sleep 0.6
    done
    wait_bg
    all_zero || return 1
    local keys
    keys=$(store_keys 29531)
    [ -z "$keys" ] || fail "keys left on the store: $keys"
}

# ^C on one node's fccl-run: its ranks get SIGINT, and the other node
# stops too; both exit non-zero (130 for the interrupted one).
t_nnodes_sigint()
{
    local k hs i
    for k in 0 1; do
        hs=
        [ "$k" -eq 0 ] && hs=--host-store
        bg $((k + 1)) "$T/node$k.log" "$BIN/fccl-run" -n 2 --nnodes 2 \
            --node-rank "$k" --store node1:29541 $hs "$TBIN/boot_check" hold 30000
    done
    for i in $(seq 100); do
        [ "$(cat "$T"/node*.log | grep -c ' ready$')" -eq 4 ] && break
        sleep 0.1
    done
    local p
    for p in $(mh_pids_on 2); do
        [ "$(cat /proc/"$p"/comm 2> /dev/null)" = fccl-run ] && kill -INT "$p"
    done
    wait_bg
    cat "$T"/node*.log | grep -v ' ready$'
    [ "${BG_RCS[1]}" -eq 130 ] && [ "${BG_RCS[0]}" -eq 130 ] ||
        fail "exit codes ${BG_RCS[*]}, want 130 130" || return 1
    grep -q "node 0: fccl-run interrupted by signal 2 (Interrupt) on node 1" "$T/node0.log" ||
        fail "node 0 does not say why it stopped"
}

# ---- dead hosts found in seconds (FCCL_PEER_TIMEOUT, coll/transport/hb.c) ----

PEER_T=3        # FCCL_PEER_TIMEOUT in these tests
DEADLINE_MS=15000

# torchrun's variables for FAULT_HOSTS hosts x FAULT_PER ranks (default
# 2 x 2), store on node1:$FAULT_PORT.
fault_vars()
{
    local per=${FAULT_PER:-2}
    echo "RANK=$1 WORLD_SIZE=$(( ${FAULT_HOSTS:-2} * per )) LOCAL_RANK=$2 LOCAL_WORLD_SIZE=$per"
    echo "MASTER_ADDR=node1 MASTER_PORT=$FAULT_PORT FCCL_PEER_TIMEOUT=$PEER_T"
    echo "FAULT_LINGER_MS=${FAULT_LINGER_MS:-0}"
}

# Start FAULT_HOSTS x FAULT_PER ranks of fault_check ARGS (no launcher:
# nothing but the library may notice a fault); wait until all are ready.
# PIDS[r].
fault_start()
{
    local k l r i hosts=${FAULT_HOSTS:-2} per=${FAULT_PER:-2} n
    n=$((hosts * per))
    ip -n "$(mh_ns 2)" link set eth0 up # should a link-down test have died
    store_on_node1 "$FAULT_PORT" || return 1
    for k in $(seq 0 $((hosts - 1))); do
        for l in $(seq 0 $((per - 1))); do
            r=$((k * per + l))
            bg $((k + 1)) "$T/rank$r.log" "${CLEAN_ENV[@]}" \
                $(fault_vars "$r" "$l" "$k") "$TBIN/fault_check" "$@"
        done
    done
    for i in $(seq 150); do
        [ "$(cat "$T"/rank*.log | grep -c ' ready$')" -eq "$n" ] && break
        sleep 0.1
    done
    PIDS=()
    for r in $(seq 0 $((n - 1))); do
        PIDS[$r]=$(sed -n "s/^R$r pid \([0-9]*\) ready$/\1/p" "$T/rank$r.log")
        [ -n "${PIDS[$r]}" ] || { fail "ranks not ready: $(cat "$T"/rank*.log)"; return 1; }
    done
    sleep 1 # a few collectives and heartbeats before the fault
}

# fault_named R T0 NAMES: rank R failed with "peer failure" naming one of
# the world ranks in NAMES (e.g. "2 3"), and its next collective failed
# too; prints and checks the time since T0 (epoch ms).
fault_named()
{
    local r=$1 t0=$2 names=$3 line at ms n ok=0
    line=$(grep "^R$r FAILED" "$T/rank$r.log")
    [ -n "$line" ] || { fail "rank $r did not fail: $(cat "$T/rank$r.log")"; return 1; }
    at=$(echo "$line" | sed -n 's/^R[0-9]* FAILED .* at \([0-9]*\): .*/\1/p')
    ms=$((at - t0))
    echo "measured: rank $r failed $ms ms after the fault: ${line#*: }"
    echo "$line" | grep -q "FAILED peer" || { fail "rank $r: not a peer failure: $line"; return 1; }
    # the cause comes last: "rank N is dead: ..." or "rank N failed: ..."
    # (hb.c), "world rank N: ..." (a shared-memory barrier), or this rank
    # itself was declared dead (stopped, or cut off)
    for n in $names; do
        echo "$line" | grep -Eq "(: |world )rank $n (is dead|failed|: )" && ok=1
    done
    echo "$line" | grep -q "this rank ($r) was declared dead" && ok=1
    [ "$ok" = 1 ] || { fail "rank $r names none of ranks $names: $line"; return 1; }
    grep -q "^R$r NEXT peer" "$T/rank$r.log" ||
        { fail "rank $r: next collective: $(grep "^R$r NEXT" "$T/rank$r.log")"; return 1; }
    [ "$ms" -le "$DEADLINE_MS" ] || fail "rank $r took $ms ms (FCCL_PEER_TIMEOUT=$PEER_T)"
}

# No libfabric shm file ("/dev/shm/<pid>:...") of the given pids is left.
shm_clean()
{
    local p left=
    for p in "$@"; do
        left="$left$(ls /dev/shm | grep "^$p:")"
    done
    [ -z "$left" ] || fail "left in /dev/shm: $left"
}

# Host 2's link goes down mid-job: the ranks of host 1 fail naming a rank
# of host 2 (and host 2's ranks name one of host 1) within the deadline.
t_fault_link_down()
{
    FAULT_PORT=29531
    trap 'ip -n "$(mh_ns 2)" link set eth0 up' EXIT
    fault_start loop 60 || return 1
    local t0
    t0=$(date +%s%3N)
    ip -n "$(mh_ns 2)" link set eth0 down
    wait_bg
    ip -n "$(mh_ns 2)" link set eth0 up
    kill "$STORE_PID" 2> /dev/null
    fault_named 0 "$t0" "2 3" && fault_named 1 "$t0" "2 3" &&
        fault_named 2 "$t0" "0 1" && fault_named 3 "$t0" "0 1" || return 1
    shm_clean "${PIDS[@]}"
}

# Every rank on host 2 is killed: the ranks of host 1 fail naming one of
# them.  (A dead host's own /dev/shm goes with it; here, where all hosts
# share one /dev/shm, its launcher fccl-run would remove those files, as
# t_killed_rank_shm_cleanup checks; this test removes them itself.)
t_fault_kill_host()
{
    FAULT_PORT=29541
    fault_start loop 60 || return 1
    local t0
    t0=$(date +%s%3N)
    kill -9 "${PIDS[2]}" "${PIDS[3]}"
    wait_bg
    kill "$STORE_PID" 2> /dev/null
    rm -f /dev/shm/"${PIDS[2]}":* /dev/shm/"${PIDS[3]}":* \
        /dev/shm/fccl-"${PIDS[2]}"-* /dev/shm/fccl-"${PIDS[3]}"-*
    fault_named 0 "$t0" "2 3" && fault_named 1 "$t0" "2 3" || return 1
    shm_clean "${PIDS[0]}" "${PIDS[1]}"
}

# Rank 3 is stopped (SIGSTOP) longer than the peer timeout: ranks 0, 1 and
# 2 fail naming it, over net and over shm (rank 2 shares its
# host).  Then it is killed; rank 2, still up, removes its shm file.
t_fault_sigstop()
{
    FAULT_PORT=29551
    FAULT_LINGER_MS=4000 fault_start loop 60 || return 1
    local t0 i
    t0=$(date +%s%3N)
    kill -STOP "${PIDS[3]}"
    for i in $(seq 200); do
        [ "$(cat "$T"/rank[012].log | grep -c '^R[0-9] NEXT')" -eq 3 ] && break
        sleep 0.1
    done
    kill -9 "${PIDS[3]}"
    wait_bg
    kill "$STORE_PID" 2> /dev/null
    fault_named 0 "$t0" 3 && fault_named 1 "$t0" 3 && fault_named 2 "$t0" 3 ||
        return 1
    shm_clean "${PIDS[@]}"
}

# A rank busy outside fccl for 8 s (> FCCL_PEER_TIMEOUT=3) while the
# others wait for it in an all_reduce is not declared dead.
t_busy_rank_not_dead()
{
    FAULT_PORT=29561
    store_on_node1 "$FAULT_PORT" || return 1
    local k l r t0 ms
    t0=$(now_ms)
    for k in 0 1; do
        for l in 0 1; do
            r=$((k * 2 + l))
            bg $((k + 1)) "$T/rank$r.log" "${CLEAN_ENV[@]}" \
                $(fault_vars "$r" "$l" "$k") "$TBIN/fault_check" busy 8000 3
        done
    done
    wait_bg
    ms=$(( $(now_ms) - t0 ))
    kill "$STORE_PID" 2> /dev/null
    echo "measured: job with rank 3 busy 8 s outside fccl (FCCL_PEER_TIMEOUT=$PEER_T) took $ms ms"
    all_zero || { cat "$T"/rank*.log; return 1; }
    [ "$(cat "$T"/rank*.log | grep -c '^R[0-9] ok$')" -eq 4 ] ||
        fail "not every rank ok: $(cat "$T"/rank*.log)"
}

# One host, 3 ranks, shm only: the all_reduce runs through the shared
# segment, whose barrier used to time out naming no rank.  Rank 1 is
# stopped: ranks 0 and 2 fail naming it; killed, its shm file goes.
t_fault_sigstop_shm()
{
    FAULT_PORT=29581 FAULT_HOSTS=1 FAULT_PER=3
    FAULT_LINGER_MS=4000 fault_start loop 60 || return 1
    local t0 i
    t0=$(date +%s%3N)
    kill -STOP "${PIDS[1]}"
    for i in $(seq 200); do
        [ "$(cat "$T"/rank[02].log | grep -c '^R[0-9] NEXT')" -eq 2 ] && break
        sleep 0.1
    done
    kill -9 "${PIDS[1]}"
    wait_bg
    kill "$STORE_PID" 2> /dev/null
    fault_named 0 "$t0" 1 && fault_named 2 "$t0" 1 || return 1
    grep -q "shared-memory barrier" "$T/rank0.log" "$T/rank2.log" ||
        echo "note: no rank failed inside the shared-memory barrier"
    shm_clean "${PIDS[@]}"
}

# 2 hosts x 2 ranks: the providers of each group as group_check named
# reports them (fccl_group_providers): the world and "all" reach the other
# local rank by shm and the other host's by the network provider; the
# evens (ranks 0 and 2, one per host) by the network provider only; the
# per-group topology is the hosts' (2 nodes, 2 local ranks each).
t_group_providers_2x2()
{
    run_nodes 2 2 29471 "$TBIN/group_check" named
    all_zero || return 1
    local r line want
    for r in 0 1 2 3; do
        for g in world all; do
            line=$(cat "$T"/*.log | sed -n "s/^\[$r\] R$r $g prov //p")
            [ "$line" = "shm,net" ] ||
                { fail "rank $r: $g providers '$line', want 'shm,net'"; return 1; }
            line=$(cat "$T"/*.log | sed -n "s/^\[$r\] R$r $g topo //p")
            want="2 $((r / 2)) $((r % 2)) 2"
            [ "$line" = "$want" ] ||
                { fail "rank $r: $g topology '$line', want '$want'"; return 1; }
        done
        [ $((r % 2)) -eq 0 ] || continue
        line=$(cat "$T"/*.log | sed -n "s/^\[$r\] R$r evens prov //p")
        [ "$line" = net ] ||
            { fail "rank $r: evens providers '$line', want 'net'"; return 1; }
    done
    echo "measured: 2x2 group providers: world shm,net, evens net"
}
