#!/usr/bin/env bash
# bench/bootstrap.sh: job start-up time, fccl against Gloo and two MPIs.
#
#   bench/bootstrap.sh [BUILD]          (BUILD: a build dir, default build)
#
# For each N (NS, default "2 8 32 64") and each system, the wall time of the
# launcher running a job whose ranks init, run one barrier and finalize;
# median of RUNS (default 3) runs, the systems interleaved within each run so
# that background noise spreads over all of them:
#   fccl         $BUILD/bin/fccl-run -n N $BUILD/bench/init_barrier
#   torchrun     torchrun --standalone --nproc_per_node N (torch's defaults,
#                which include a 5 s worker-monitor interval)
#   torchrun-mi  the same with --monitor_interval 0.05
#   gloo-spawn   bench/gloo_init_barrier.py --spawn N: N python ranks started
#                directly with the torchrun variables (no agent)
#   ompi         mpirun.openmpi -n N --oversubscribe mpi_init_barrier (built
#                here from cli/bench/mpi_init_barrier.c)
#   mpich        mpirun.mpich -n N mpi_init_barrier
#   floor-noop   N concurrent "fabric_floor --noop" from a shell loop: what
#                loading libfabric costs N processes (pre-main)
#   floor-shm    N concurrent "fabric_floor shm": load + fi_getinfo + open
#                and enable an shm endpoint, the libfabric floor of a job
#   fccl-noksyms, floor-noksyms: fccl and floor-shm with an LD_PRELOAD shim
#                (built here) that turns libfabric's fopen("/proc/kallsyms")
#                into /dev/null: an experiment measuring what the two
#                kallsyms scans inside the first fi_getinfo cost (they look
#                for kernel peer-memory/dmabuf symbols; nothing here uses them)
# (torchrun also gets "--redirects 2 --tee 2": torch 1.13 crashes on its own
# "0" defaults under Python 3.11.)  Then, once per N, each system's -v run
# for the inside view (last rank's arrival -> init done, per-phase times),
# fccl's store operations per rank counted by a protocol-decoding proxy
# between the ranks and a tcpstore-server, and the libfabric floor
# (fabric_floor: time-to-main vs /bin/true, fi_getinfo, fi_enable).
#
# Environment: NS, RUNS, SYSTEMS (subset of the names above), TIMEOUT
# (seconds per run, default 300), OUT (raw logs; default
# $BUILD/bench/bootstrap-results).  Prints markdown to stdout.
set -u
BUILD=${1:-build}
NS=${NS:-2 8 32 64}
RUNS=${RUNS:-3}
SYSTEMS=${SYSTEMS:-fccl torchrun torchrun-mi gloo-spawn ompi mpich floor-noop floor-shm fccl-noksyms floor-noksyms}
TIMEOUT=${TIMEOUT:-300}
OUT=${OUT:-$BUILD/bench/bootstrap-results}
HERE=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$OUT"
export FCCL_TIMEOUT=${FCCL_TIMEOUT:-120} OMPI_MCA_rmaps_base_oversubscribe=1
. "$HERE/preamble.sh" # PY, CBENCH, ROOTFLAG

die() { echo "bootstrap.sh: $*" >&2; exit 1; }

# floor.sh N ARGS: N concurrent fabric_floor processes; fails if any does.
write_floor() {
    cat >"$OUT/floor.sh" <<EOF
#!/usr/bin/env bash
n=\$1; shift
pids=()
for i in \$(seq 1 "\$n"); do "$(cd "$BUILD" && pwd)/bench/fabric_floor" "\$@" & pids+=(\$!); done
rc=0
for p in "\${pids[@]}"; do wait "\$p" || rc=1; done
exit \$rc
EOF
    chmod +x "$OUT/floor.sh"
}

# The kallsyms experiment's shim: fopen("/proc/kallsyms") opens /dev/null.
write_shim() {
    cat >"$OUT/nokallsyms.c" <<'EOF'
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>
static FILE *(*real_fopen)(const char *, const char *);
FILE *fopen(const char *path, const char *mode)
{
    if (!real_fopen)
        real_fopen = (FILE *(*)(const char *, const char *))dlsym(RTLD_NEXT, "fopen");
    if (path && strcmp(path, "/proc/kallsyms") == 0)
        path = "/dev/null";
    return real_fopen(path, mode);
}
FILE *fopen64(const char *path, const char *mode) { return fopen(path, mode); }
EOF
    cc -O2 -shared -fPIC -o "$OUT/nokallsyms.so" "$OUT/nokallsyms.c" -ldl ||
        die "cannot build the kallsyms shim"
}

build_mpi() {
    mpicc.openmpi -O2 -o "$OUT/mpi_init_barrier.openmpi" \
        "$CBENCH/mpi_init_barrier.c" || die "mpicc.openmpi failed"
    mpicc.mpich -O2 -o "$OUT/mpi_init_barrier.mpich" \
        "$CBENCH/mpi_init_barrier.c" || die "mpicc.mpich failed"
}

# The command line of system $1 for $2 ranks ($3: extra program args).
cmd_for() {
    local sys=$1 n=$2 extra=${3:-}
    case $sys in
    fccl) echo "$BUILD/bin/fccl-run -n $n $BUILD/bench/init_barrier $extra" ;;
    torchrun) echo "$PY -m torch.distributed.run --standalone --redirects 2" \
        "--tee 2 --nproc_per_node $n $HERE/gloo_init_barrier.py $extra" ;;
    torchrun-mi) echo "$PY -m torch.distributed.run --standalone --redirects" \
        "2 --tee 2 --monitor_interval 0.05 --nproc_per_node $n" \
        "$HERE/gloo_init_barrier.py $extra" ;;
    gloo-spawn) echo "$PY $HERE/gloo_init_barrier.py --spawn $n $extra" ;;
    ompi) echo "mpirun.openmpi $ROOTFLAG --oversubscribe -n $n" \
        "$OUT/mpi_init_barrier.openmpi $extra" ;;
    mpich) echo "mpirun.mpich -n $n $OUT/mpi_init_barrier.mpich $extra" ;;
    floor-noop) echo "$OUT/floor.sh $n --noop" ;;
    floor-shm) echo "$OUT/floor.sh $n shm" ;;
    fccl-noksyms) echo "env LD_PRELOAD=$OUT/nokallsyms.so" \
        "$BUILD/bin/fccl-run -n $n $BUILD/bench/init_barrier $extra" ;;
    floor-noksyms) echo "env LD_PRELOAD=$OUT/nokallsyms.so $OUT/floor.sh $n shm" ;;
    *) die "unknown system $sys" ;;
    esac
}

# Run a command under the timeout; print its wall seconds, or FAIL(rc).
wall() {
    local log=$1; shift
    local t0 t1 rc
    t0=$(date +%s%N)
    timeout -k 5 "$TIMEOUT" "$@" >"$log" 2>&1
    rc=$?
    t1=$(date +%s%N)
    if [ $rc -ne 0 ]; then echo "FAIL($rc)"; return; fi
    awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.3f", (b - a) / 1e9 }'
}

median() { # numbers (FAIL entries dropped) -> median or "n/a"
    printf '%s\n' "$@" | grep -E '^[0-9.]+$' | sort -g |
        awk '{ v[NR] = $1 } END { if (NR == 0) print "n/a";
              else if (NR % 2) print v[(NR + 1) / 2];
              else printf "%.3f\n", (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}

ratio() { # ours theirs -> ours/theirs
    awk -v a="$1" -v b="$2" 'BEGIN { if (a + 0 > 0 && b + 0 > 0)
        printf "%.2f", a / b; else print "n/a" }'
}

declare -A T # T[sys,n] = "t1 t2 t3"

time_all() {
    local n r sys
    for n in $NS; do
        for r in $(seq 1 "$RUNS"); do
            for sys in $SYSTEMS; do
                # shellcheck disable=SC2046
                t=$(wall "$OUT/$sys-n$n-run$r.log" $(cmd_for "$sys" "$n"))
                T[$sys,$n]="${T[$sys,$n]:-} $t"
                echo "  N=$n run $r $sys: $t s" >&2
            done
        done
    done
}

print_wall_table() {
    local n sys hdr="| N |" sep="|---|"
    for sys in $SYSTEMS; do hdr="$hdr $sys (s) |"; sep="$sep---:|"; done
    for sys in $SYSTEMS; do
        [ "$sys" = fccl ] || { hdr="$hdr fccl/$sys |"; sep="$sep---:|"; }
    done
    echo "$hdr"; echo "$sep"
    for n in $NS; do
        local row="| $n |" ours
        # shellcheck disable=SC2086
        ours=$(median ${T[fccl,$n]:-})
        for sys in $SYSTEMS; do
            # shellcheck disable=SC2086
            row="$row $(median ${T[$sys,$n]:-}) |"
        done
        for sys in $SYSTEMS; do
            # shellcheck disable=SC2086
            [ "$sys" = fccl ] || row="$row $(ratio "$ours" \
                "$(median ${T[$sys,$n]:-})") |"
        done
        echo "$row"
    done
    echo
    echo "All runs (s):"
    echo
    for n in $NS; do
        for sys in $SYSTEMS; do echo "- N=$n $sys:${T[$sys,$n]:-}"; done
    done
}

# One -v run per system and N: the systems' own view of their start-up.
inside_view() {
    local n sys
    echo "| N | system | rank 0's report (one -v run) |"
    echo "|---|---|---|"
    for n in $NS; do
        for sys in $SYSTEMS; do
            case $sys in torchrun | floor-*) continue ;; esac
            [ "$sys" = fccl-noksyms ] && [ "$n" -lt 32 ] && continue
            local log="$OUT/$sys-n$n-verbose.log" line
            # shellcheck disable=SC2046
            wall "$log" $(cmd_for "$sys" "$n" -v) >/dev/null
            line=$(grep -hE '^(\[0\] )?(fccl N=|gloo rank0|mpi rank0)' "$log" |
                sed 's/^\[0\] //' | head -n 1)
            echo "| $n | $sys | ${line:-no report (see $log)} |"
        done
    done
}

# A TCPStore proxy that decodes the modern dialect's requests (PROTOCOL.md)
# on their way to the server and counts them per type and connection.
write_proxy() {
    cat >"$OUT/store_proxy.py" <<'PYEOF'
import asyncio, collections, signal, struct, sys

NAMES = {0: "VALIDATE", 1: "SET", 2: "COMPARE_SET", 3: "GET", 4: "ADD",
         5: "CHECK", 6: "WAIT", 7: "GETNUMKEYS", 8: "DELETE_KEY", 9: "APPEND",
         10: "MULTI_GET", 11: "MULTI_SET", 12: "CANCEL_WAIT", 13: "PING",
         14: "QUEUE_PUSH", 15: "QUEUE_POP", 16: "QUEUE_LEN", 0x80: "LIST_KEYS"}
# Argument shapes: u32, s(tring), i(64), n s (count + strings), n ss (pairs).
SHAPE = {0: "u", 13: "u", 1: "ss", 2: "sss", 3: "s", 4: "si", 5: "N", 6: "N",
         7: "", 8: "s", 9: "ss", 10: "N", 11: "P", 12: "", 14: "ss", 15: "s",
         16: "s", 0x80: "s"}
counts = collections.Counter()
conns = 0

def parse(buf):
    """One request at the front of buf: (bytes used, type) or None."""
    if not buf:
        return None
    t, off = buf[0], 1
    def string(off):
        if len(buf) < off + 8:
            return None
        n = struct.unpack_from("<Q", buf, off)[0]
        return off + 8 + n if len(buf) >= off + 8 + n else None
    for kind in SHAPE.get(t, "?"):
        if kind == "?":
            raise ValueError("unknown request type %d" % t)
        if kind == "u":
            off = off + 4 if len(buf) >= off + 4 else None
        elif kind == "i":
            off = off + 8 if len(buf) >= off + 8 else None
        elif kind == "s":
            off = string(off)
        else:
            if len(buf) < off + 8:
                return None
            n = struct.unpack_from("<Q", buf, off)[0]
            off += 8
            for _ in range(n * (2 if kind == "P" else 1)):
                off = string(off)
                if off is None:
                    return None
        if off is None:
            return None
    return off, t

async def pump(reader, writer, decode):
    buf = bytearray()
    try:
        while data := await reader.read(65536):
            writer.write(data)
            if decode:
                buf += data
                while (r := parse(buf)) is not None:
                    counts[NAMES[r[1]]] += 1
                    del buf[:r[0]]
            await writer.drain()
    except (ConnectionError, ValueError) as e:
        print("proxy:", e, file=sys.stderr)
    finally:
        writer.close()

async def main(up_host, up_port):
    async def client(cr, cw):
        global conns
        conns += 1
        sr, sw = await asyncio.open_connection(up_host, up_port)
        await asyncio.gather(pump(cr, sw, True), pump(sr, cw, False))
    server = await asyncio.start_server(client, "127.0.0.1", 0)
    print("proxy listening on 127.0.0.1:%d" % server.sockets[0].getsockname()[1],
          flush=True)
    stop = asyncio.Event()
    for s in (signal.SIGINT, signal.SIGTERM):
        asyncio.get_running_loop().add_signal_handler(s, stop.set)
    await stop.wait()
    print("connections %d; %s; total %d" % (conns, ", ".join(
        "%s %d" % kv for kv in sorted(counts.items())), sum(counts.values())),
        flush=True)

host, port = sys.argv[1].rsplit(":", 1)
asyncio.run(main(host, int(port)))
PYEOF
}

# Wait until file $1 has a line "... listening on HOST:PORT"; echo HOST:PORT.
await_listen() {
    local i
    for i in $(seq 1 100); do
        local a
        a=$(grep -m1 -oE 'listening on [^ ]+' "$1" 2>/dev/null | awk '{print $3}')
        [ -n "$a" ] && { echo "$a"; return 0; }
        sleep 0.1
    done
    return 1
}

store_ops() {
    write_proxy
    echo "| N | connections | requests by type (whole job) | requests per rank |"
    echo "|---|---:|---|---:|"
    local n
    for n in $NS; do
        local slog="$OUT/store-n$n-server.log" plog="$OUT/store-n$n-proxy.log"
        "$BUILD/bin/tcpstore-server" --host 127.0.0.1 --port 0 >"$slog" 2>&1 &
        local spid=$! saddr paddr
        saddr=$(await_listen "$slog") || { kill "$spid"; echo "| $n | server did not start |||"; continue; }
        $PY "$OUT/store_proxy.py" "$saddr" >"$plog" 2>&1 &
        local ppid=$!
        paddr=$(await_listen "$plog") || { kill "$spid" "$ppid"; echo "| $n | proxy did not start |||"; continue; }
        timeout -k 5 "$TIMEOUT" "$BUILD/bin/fccl-run" -n "$n" --store "$paddr" \
            "$BUILD/bench/init_barrier" >"$OUT/store-n$n-job.log" 2>&1 ||
            echo "store_ops: job N=$n failed (see $OUT/store-n$n-job.log)" >&2
        kill -TERM "$ppid"; wait "$ppid" 2>/dev/null
        kill -TERM "$spid"; wait "$spid" 2>/dev/null
        local line conns total
        line=$(grep '^connections' "$plog")
        conns=$(echo "$line" | sed -n 's/^connections \([0-9]*\);.*/\1/p')
        total=$(echo "$line" | sed -n 's/.*total \([0-9]*\)$/\1/p')
        echo "| $n | ${conns:-?} | $(echo "$line" | sed 's/^connections [0-9]*; //; s/; total.*//') |" \
            "$(ratio "${total:-0}" "$n") |"
    done
}

fabric_floor() {
    local ff="$BUILD/bench/fabric_floor"
    echo '```'
    hyperfine -N -w 3 -r 20 --export-markdown "$OUT/premain.md" \
        "$ff --noop" /bin/true >"$OUT/hyperfine.log" 2>&1 &&
        cat "$OUT/premain.md"
    for i in 1 2 3; do "$ff" shm; done
    for i in 1 2 3; do "$ff" "tcp;ofi_rxm"; done
    echo '```'
}

machine() {
    echo "Machine: $(nproc) cores, $(lscpu | sed -n 's/^Model name: *//p')," \
        "$(free -g | awk '/^Mem:/ {print $2}') GiB; load before:" \
        "$(cut -d' ' -f1-3 /proc/loadavg); $(date -u '+%Y-%m-%d %H:%M UTC')"
}

[ -x "$BUILD/bin/fccl-run" ] && [ -x "$BUILD/bench/init_barrier" ] ||
    die "build $BUILD first (make BUILD=$BUILD all)"
build_mpi
write_floor
write_shim
echo "## Bootstrap run ($(machine))"
echo
echo "### Launcher wall time, init + barrier + finalize (median of $RUNS)"
echo
time_all
print_wall_table
echo
echo "### Inside view"
echo
inside_view
echo
echo "### fccl store requests (decoded by a proxy in front of tcpstore-server)"
echo
store_ops
echo
echo "### libfabric floor"
echo
fabric_floor
