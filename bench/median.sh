# Sourced by the benchmark scripts that print a median of rounds per cell
# (ab.sh, cells.sh).  Sets MEDIAN_AWK, awk functions to put in front of
# their own awk program:
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
