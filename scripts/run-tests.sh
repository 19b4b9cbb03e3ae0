#!/usr/bin/env bash
# Run every Criterion test binary of a build directory, each under a hard
# timeout so that a hang fails loudly instead of stalling CI.  Prints a
# closing "N passed, N failed" line and exits non-zero on any failure.
#
# FCCL_TEST_PAR=N runs N binaries at once (default 1; the quick tier,
# FCCL_TEST_QUICK=1, 3): most suites wait on timeouts, servers and
# child processes more than they compute, so the quick tier's wall time
# is mostly waiting.  Each binary's lines are printed in name order as
# soon as it and those before it are done.
set -u
BUILD=${1:-build}
export FCCL_BIN="$PWD/$BUILD/bin" FCCL_TESTBIN="$PWD/$BUILD/tests"
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=0}
export LSAN_OPTIONS=${LSAN_OPTIONS:-suppressions=$PWD/tests/lsan.supp:print_suppressions=0}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
PER_TEST_TIMEOUT=${FCCL_TEST_TIMEOUT:-900}
# Criterion runs a binary's tests in parallel; 2 jobs matches the 2 cores.
JOBS=${FCCL_TEST_JOBS:-2}
case "${FCCL_TEST_QUICK:-0}" in ""|0) PAR=${FCCL_TEST_PAR:-1} ;;
                                  *) PAR=${FCCL_TEST_PAR:-3} ;; esac
RES=$(mktemp -d)
trap 'rm -rf "$RES"' EXIT

# One binary: its report into $RES/NAME.txt, then its counts into
# $RES/NAME.sum ("pass fail"), which marks it done.
run_one() {
    local t=$1 name out rc start ds secs syn p f c
    name=$(basename "$t")
    start=$(date +%s%N)
    out=$(timeout -k 10 "$PER_TEST_TIMEOUT" "$t" --jobs="$JOBS" --timeout=600 2>&1)
    rc=$?
    ds=$(( ($(date +%s%N) - start) / 100000000 )); secs="$((ds / 10)).$((ds % 10))"
    syn=$(printf '%s\n' "$out" | grep -E 'Synthesis: Tested' | tail -n 1)
    p=$(printf '%s' "$syn" | sed -n 's/.*Passing: \([0-9]*\).*/\1/p')
    f=$(printf '%s' "$syn" | sed -n 's/.*Failing: \([0-9]*\).*/\1/p')
    c=$(printf '%s' "$syn" | sed -n 's/.*Crashing: \([0-9]*\).*/\1/p')
    p=${p:-0} f=${f:-0} c=${c:-0}
    if [ "$rc" -ne 0 ] || [ "$f" -ne 0 ] || [ "$c" -ne 0 ] || [ -z "$syn" ]; then
        { [ "$rc" -eq 124 ] && echo "== $name: TIMED OUT after ${PER_TEST_TIMEOUT}s"
          printf '%s\n' "$out" | tail -n 60
          echo "== $name: FAILED (exit $rc) ${syn} [${secs}s]"; } > "$RES/$name.txt"
        # what failed, for the recap at the end (a CI log may show only
        # its tail): Criterion's failed assertions and cases, a helper's
        # own failure lines ([rank N] case ...)
        { [ "$rc" -eq 124 ] && echo "timed out after ${PER_TEST_TIMEOUT}s"
          printf '%s\n' "$out" | grep -E '^\[(----|FAIL)\]|^\[rank [0-9]+\] case |unexpected outcome|survivors named|Sanitizer' \
              | grep -vE '^\[----\] *$' | head -n 20; } > "$RES/$name.why"
        echo "$p $((f + c + ( (f + c) == 0 ? 1 : 0 )))" > "$RES/$name.sum"
    else
        echo "== $name: ok ${syn#*Synthesis: } [${secs}s]" > "$RES/$name.txt"
        echo "$p 0" > "$RES/$name.sum"
    fi
}

names=()
for t in "$BUILD"/tests/test_*; do
    [ -x "$t" ] && names+=("$t")
done
pass=0 fail=0 failed_bins=() next=0
# Print, in order, the reports of the binaries done so far.
flush() {
    while [ "$next" -lt ${#names[@]} ]; do
        local name; name=$(basename "${names[$next]}")
        [ -e "$RES/$name.sum" ] || return 0
        cat "$RES/$name.txt"
        local p f; read -r p f < "$RES/$name.sum"
        pass=$((pass + p)) fail=$((fail + f))
        [ "$f" -eq 0 ] || failed_bins+=("$name")
        next=$((next + 1))
    done
}
running=0
for t in "${names[@]}"; do
    if [ "$running" -ge "$PAR" ]; then
        wait -n
        running=$((running - 1))
        flush
    fi
    run_one "$t" &
    running=$((running + 1))
done
wait
flush
for name in "${failed_bins[@]}"; do
    echo "== why $name failed:"
    cat "$RES/$name.why" 2>/dev/null
done
[ ${#failed_bins[@]} -gt 0 ] && echo "failed: ${failed_bins[*]}"
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
