# Sourced by the benchmark scripts that measure every cell (OPS x NPS x
# SIZES) in ROUNDS rounds and print a median of rounds per cell (ab.sh,
# cells.sh).  Defines
#   each_cell CMD...   runs CMD... OP N SIZE for every cell, in order
#   run_rounds CMD...  each_cell CMD... ROUNDS times, "round R done (load)"
#                      on stderr after each
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
