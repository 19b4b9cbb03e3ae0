# Sourced by the benchmark scripts that launch MPI next to fccl, after they
# set HERE (their own folder) and, if they want another default than
# 300 s, FCCL_TIMEOUT.  Sets:
#   PY        the Python with torch (never the first python3 on PATH)
#   CBENCH    the C sources of the benchmark helpers (cli/bench)
#   ROOTFLAG  mpirun's --allow-run-as-root when running as root
# and exports FCCL_TIMEOUT (seconds; default 300).
PY=/usr/bin/python3
CBENCH="$HERE/../cli/bench"
ROOTFLAG=""
[ "$(id -u)" -eq 0 ] && ROOTFLAG="--allow-run-as-root"
export FCCL_TIMEOUT=${FCCL_TIMEOUT:-300}
