# Sourced by the benchmark scripts that start servers in the background:
# SCRATCH, a fresh folder for their files, and pids, the array to add each
# background process to; on exit, whatever the cause, those processes are
# killed and the folder is removed.
SCRATCH=$(mktemp -d)
pids=()
scratch_cleanup() {
    for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done
    wait 2>/dev/null
    rm -rf "$SCRATCH"
}
trap scratch_cleanup EXIT
