#!/usr/bin/env bash
# The multi-host suite: jobs across network-namespace "hosts" (netns.sh),
# tests in tests.sh and ft_tests.sh,
# started by fccl-run --nnodes, by Slurm-, Open MPI- and MPICH-like
# environments set by hand, over IPv4 and IPv6.
#
#   tests/multihost/run.sh [BUILD_DIR] [TEST_NAME...]
#
# Needs root (network namespaces); without it prints why and a
# "0 passed, 0 failed" line and exits 0.  Each test runs under a hard
# timeout; the last line is "N passed, N failed", and the exit status is
# non-zero when any test failed.  Everything the run creates is removed on
# exit, also when a test fails or the run is interrupted; namespaces left
# by a run that was killed outright are removed by the next run.
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
BUILD=${1:-build}
[ $# -gt 0 ] && shift
case "$BUILD" in /*) ;; *) BUILD="$ROOT/$BUILD" ;; esac
BIN=$BUILD/bin
TBIN=$BUILD/tests
TEST_TIMEOUT=${FCCL_MH_TEST_TIMEOUT:-120}
# as scripts/run-tests.sh, for a sanitized build
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=0}
export LSAN_OPTIONS=${LSAN_OPTIONS:-suppressions=$ROOT/tests/lsan.supp:print_suppressions=0}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
export FCCL_TIMEOUT=${FCCL_TIMEOUT:-60}

if [ "$(id -u)" -ne 0 ]; then
    echo "multihost: SKIPPED: needs root to create network namespaces"
    echo "0 passed, 0 failed"
    exit 0
fi
for t in ip unshare timeout; do
    if ! command -v "$t" > /dev/null; then
        echo "multihost: SKIPPED: '$t' not found"
        echo "0 passed, 0 failed"
        exit 0
    fi
done

. "$HERE/netns.sh"
mh_reap_stale
mh_trap
if ! ip netns add "$MH_ID-probe" 2> /dev/null; then
    echo "multihost: SKIPPED: cannot create network namespaces here"
    echo "0 passed, 0 failed"
    exit 0
fi
ip netns del "$MH_ID-probe"

OUT=$(mktemp -d "${TMPDIR:-/tmp}/fccl-mh.XXXXXX")
# FCCL_MH_KEEP=1 keeps the logs (the path is printed at the end).
if [ "${FCCL_MH_KEEP:-0}" = 1 ]; then
    trap 'mh_cleanup; echo "multihost: logs kept in $OUT"' EXIT
else
    trap 'mh_cleanup; rm -rf "$OUT"' EXIT
fi

. "$HERE/tests.sh"
. "$HERE/ft_tests.sh"

# ---- runner ----
pass=0 fail=0 failed=()
run_test()
{
    local name=$1 start rc secs
    start=$(date +%s%N)
    mkdir -p "$OUT/$name"
    # A test is a function run in a subshell under a hard timeout: it
    # returns 0 or prints why it failed.
    (
        T="$OUT/$name"
        "$name"
    ) > "$OUT/$name/log" 2>&1 &
    local pid=$! waited=0
    while kill -0 "$pid" 2> /dev/null; do
        if [ "$waited" -ge $((TEST_TIMEOUT * 10)) ]; then
            echo "timed out after ${TEST_TIMEOUT}s" >> "$OUT/$name/log"
            kill -9 "$pid" 2> /dev/null
            break
        fi
        sleep 0.1
        waited=$((waited + 1))
    done
    wait "$pid"
    rc=$?
    [ "$waited" -ge $((TEST_TIMEOUT * 10)) ] && rc=124
    # Whatever a test left running on our hosts goes now.
    mh_kill_all
    secs=$(( ($(date +%s%N) - start) / 100000000 ))
    secs="$((secs / 10)).$((secs % 10))"
    if [ "$rc" -eq 0 ]; then
        echo "== $name: ok [${secs}s]"
        grep '^measured:' "$OUT/$name/log" | sed 's/^/   /'
        pass=$((pass + 1))
    else
        tail -n 40 "$OUT/$name/log"
        echo "== $name: FAILED (exit $rc) [${secs}s]"
        fail=$((fail + 1))
        failed+=("$name")
    fi
}

suite_start=$(date +%s)
mh_setup_hosts
if [ $# -gt 0 ]; then
    names=("$@")
else
    # every t_ function, in the files' order
    names=($(cat "$HERE/tests.sh" "$HERE/ft_tests.sh" |
        grep -o '^t_[a-z0-9_]*()' | tr -d '()'))
fi
for n in "${names[@]}"; do
    run_test "$n"
done
echo "multihost: $(( $(date +%s) - suite_start )) s in all"
[ ${#failed[@]} -gt 0 ] && echo "failed: ${failed[*]}"
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
