# Sourced by the benchmark scripts that measure every cell (OPS x NPS x
# SIZES) in ROUNDS rounds and print a median of rounds per cell (ab.sh,
# cells.sh).  Defines
#   each_cell CMD...   runs CMD... OP N SIZE for every cell, in order
#   run_rounds CMD...  each_cell CMD... ROUNDS times, "round R done (load)"
#                      on stderr after each
#   load_on N          starts N busy loops at normal priority, each in a
#                      session of its own (see below); load_off kills them
# and sets MEDIAN_AWK, awk functions to put in front of their own awk
# program:
#   med(a, k)   the median of a[1..k] (sorts a in place)
#   span(q, k)  sets the globals lo and hi to the min and max of q[1..k]
MEDIAN_AWK='
function med(a, k,   i, j, t) {
    for (i = 1; i <= k; i++) for (j = i + 1; j <= k; j++)
        if (a[j] < a[i]) { t = a[i]; a[i] = a[j]; a[j] = t }
    return k % 2 ? a[(k + 1) / 2] : (a[k / 2] + a[k / 2 + 1]) / 2
}
function span(q, k,   i) {
    lo = q[1]; hi = q[1]
    for (i = 1; i <= k; i++) { if (q[i] < lo) lo = q[i]; if (q[i] > hi) hi = q[i] }
}
'

each_cell() {
    local op n s
    for op in $OPS; do for n in $NPS; do for s in $SIZES; do
        "$@" "$op" "$n" "$s"
    done; done; done
}

run_rounds() {
    local r
    for r in $(seq "$ROUNDS"); do
        each_cell "$@"
        echo "round $r done ($(uptime | sed 's/.*load/load/'))" >&2
    done
}

# Sessions.  With the kernel's autogroup scheduling (on by default,
# /proc/sys/kernel/sched_autogroup_enabled) CPU is shared fairly between
# sessions first, then between the tasks of a session.  mpirun.mpich's
# hydra puts its ranks in a session of their own, fccl-run and Open MPI's
# mpirun leave them in the caller's: with the busy loops in the script's
# session MPICH's ranks got a session's share each while fccl's split one
# with the loops.  So every busy loop runs in a session of its own, as
# other users' work does (and the scripts start every system measured
# with setsid too).
LOADPIDS=""
load_on() {
    local i
    for i in $(seq "$1"); do
        setsid sh -c 'while :; do :; done' &
        LOADPIDS="$LOADPIDS $!"
    done
}
load_off() {
    local p
    for p in $LOADPIDS; do kill "$p" 2>/dev/null; done
    wait 2>/dev/null
    LOADPIDS=""
}
