#!/usr/bin/env bash
# The Python suites of `make test`: the single-process ones (the store, a
# killed rank, pip and make install), then the multi-rank ones under
# fccl-run, one launch per provider and rank count running every case,
# fccl.torch's (jobs, the ReconfigurableProcessGroup suite, then the
# multi-rank suites per provider and rank count), then the README's
# example.  Debian's /usr/bin/python3 and pytest;
# PYTHONPATH=BUILD/python.  Prints "N passed, N failed" launches at the end.
#
# FCCL_TEST_QUICK=1 (`make check`, the quick tier) runs the fast cases
# only: no case marked slow (over 10 s), the multi-rank suites on shm with
# 4 ranks and on tcp with 2, fccl.torch's on shm with 2, no torch job
# launches (test_torch_jobs.py: whole jobs, 40 s), the examples; the
# single-process suites beside the rest.
set -u
BUILD=${1:-build}
ROOT=$PWD
PY=/usr/bin/python3
LAUNCH_TIMEOUT=${FCCL_PY_TIMEOUT:-300}
if ! ls "$BUILD"/python/fccl/_fccl*.so >/dev/null 2>&1; then
    echo "== python: SKIPPED (no $BUILD/python: python3-dev missing?)"
    exit 0
fi
export PYTHONPATH="$ROOT/$BUILD/python" PYTHONDONTWRITEBYTECODE=1
export FCCL_BIN="$ROOT/$BUILD/bin" FCCL_TIMEOUT=${FCCL_TIMEOUT:-60}
PYTEST=("$PY" -m pytest -q -p no:cacheprovider)
quick=0
case "${FCCL_TEST_QUICK:-0}" in ""|0) ;; *) quick=1 ;; esac
if [ $quick = 1 ]; then
    PYTEST+=(-m "not slow")
    MULTI_RUNS=("shm 4" "tcp;ofi_rxm 2")
    TORCH_RUNS=("shm 2")
else
    MULTI_RUNS=()
    TORCH_RUNS=()
    for prov in shm 'tcp;ofi_rxm'; do
        for n in 1 2 3 4; do MULTI_RUNS+=("$prov $n"); done
    done
    for prov in shm 'tcp;ofi_rxm'; do
        for n in 2 3 4; do TORCH_RUNS+=("$prov $n"); done
    done
fi
pass=0 fail=0 failed=()

run() { # NAME COMMAND...: run it, count it, show the tail on failure
    local name=$1
    shift
    local start out rc secs
    start=$(date +%s)
    out=$(timeout -k 10 "$LAUNCH_TIMEOUT" "$@" 2>&1)
    rc=$?
    secs=$(($(date +%s) - start))
    local summary
    summary=$(printf '%s\n' "$out" | grep -E '^(\[0\] )?[0-9]+ (passed|failed)' | tail -n 1)
    if [ $rc -eq 0 ]; then
        echo "== $name: ok ${summary#\[0\] } [${secs}s]"
        pass=$((pass + 1))
    else
        printf '%s\n' "$out" | tail -n 60
        echo "== $name: FAILED (exit $rc) ${summary#\[0\] } [${secs}s]"
        fail=$((fail + 1))
        failed+=("$name")
    fi
}

single_process() {
    cd "$ROOT/tests/py" || exit 1
    run "py single-process" "${PYTEST[@]}" test_store.py test_fault.py \
        test_ft.py test_grow.py test_elastic.py test_install.py \
        test_torch_idle_cpu.py
}
# The quick tier runs the single-process suites beside the launches below
# (both mostly wait on children and timeouts) and prints their report
# after the others'; `make test` runs them first, alone.
if [ $quick = 1 ]; then
    side=$(mktemp -d)
    trap 'rm -rf "$side"' EXIT
    (single_process; echo "$pass $fail ${failed[*]}" > "$side/sum") \
        > "$side/out" 2>&1 &
    side_pid=$!
else
    single_process
fi
cd "$ROOT/tests/py/multi" || exit 1
for pn in "${MULTI_RUNS[@]}"; do
    prov=${pn% *} n=${pn##* }
    FCCL_PROVIDER=$prov run "py $n ranks $prov" \
        "$ROOT/$BUILD/bin/fccl-run" -n "$n" "${PYTEST[@]}" mr_coll.py mr_groups.py mr_shaped.py
done
# fccl.torch (when it was built: libtorch-dev): jobs launched by the test
# itself, then the multi-rank torch suites, one launch per provider and
# rank count
if [ -d "$ROOT/$BUILD/python/fccl/torch" ]; then
    cd "$ROOT/tests/py" || exit 1
    [ $quick = 1 ] || run "py torch jobs" "${PYTEST[@]}" test_torch_jobs.py
    run "py torch reconfigurable" "${PYTEST[@]}" test_torch_reconf.py
    cd "$ROOT/tests/py/torch" || exit 1
    for pn in "${TORCH_RUNS[@]}"; do
        prov=${pn% *} n=${pn##* }
        FCCL_PROVIDER=$prov run "py torch $n ranks $prov" \
            "$ROOT/$BUILD/bin/fccl-run" -n "$n" "${PYTEST[@]}" mr_ops.py mr_groups.py \
            mr_torch2.py
    done
    cd "$ROOT" || exit 1
    run "py torch example" "$BUILD/bin/fccl-run" -n 2 "$PY" python/torch_train.py
else
    echo "== py torch: SKIPPED (no $BUILD/python/fccl/torch: libtorch-dev missing?)"
fi
cd "$ROOT" || exit 1
run "py example" "$BUILD/bin/fccl-run" -n 2 "$PY" python/example.py
if [ -n "${side_pid:-}" ]; then
    wait "$side_pid"
    cat "$side/out"
    read -r p f names < "$side/sum" || { p=0 f=1 names="py single-process"; }
    pass=$((pass + p)) fail=$((fail + f))
    [ -z "$names" ] || failed+=($names)
fi
[ ${#failed[@]} -gt 0 ] && echo "python failed: ${failed[*]}"
echo "python: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
