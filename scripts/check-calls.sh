#!/usr/bin/env bash
# Fail when an object calls a function that a unit above it defines: the
# one-way call orders the headers state, held on the built objects.
# Include paths stop a file from seeing an upper floor's internal header,
# but not a call through a public header (every floor sees include/fccl)
# or a hand-written declaration; the symbol tables show every call.
#
#   check-calls.sh BASE UNIT... -- OBJ...
#   check-calls.sh BASE --map HEADER -- OBJ...
#
# The objects below the folder BASE are checked (others are ignored, so a
# caller may pass all it links).  An object's unit is the folder it lies
# in directly below BASE, or, directly in BASE, its own name (x.o: x).
# Units are listed top-down, or read from HEADER's "Module map" (the .c
# files it lists, in order).  A unit may call itself and the units after
# it, never one before it; an object whose unit is not listed fails too,
# so a new file or folder has to be given its place first.  Units joined
# by commas ("client,server") stand side by side on one floor: each may
# call the units after them, neither may call the other.
set -euo pipefail
usage() { echo "usage: $0 BASE (UNIT... | --map HEADER) -- OBJ..." >&2
          exit 2; }
[ $# -ge 3 ] || usage
base=${1%/} && shift

units=()
if [ "$1" = --map ]; then
    [ $# -ge 2 ] || usage
    # The map's entries are comment lines " *   a.c  text" or
    # " *   a.c, b.c: text" between "Module map" and "Each file calls".
    map=$(awk '/Module map/ {on = 1; next} /Each file calls/ {on = 0}
               on && /^ \*   [a-z]/ {
                   sub(/^ \*   /, ""); n = split($0, w, /[ ,:]+/)
                   for (i = 1; i <= n && w[i] ~ /^[a-z_0-9]+\.c$/; i++)
                       print w[i] }' "$2" | sed 's/\.c$//')
    [ -n "$map" ] || { echo "check-calls: no module map in $2" >&2; exit 2; }
    read -r -a units <<<"$(echo $map)"
    shift 2
else
    while [ $# -gt 0 ] && [ "$1" != -- ]; do units+=("$1"); shift; done
fi
[ "${1:-}" = -- ] || usage
shift

declare -A rank_of
for i in "${!units[@]}"; do
    IFS=, read -r -a side <<<"${units[$i]}"
    for u in "${side[@]}"; do rank_of[$u]=$i; done
done

# Each object below BASE with the index of its unit, and the unit.
objs=() idx=() unit=()
for o in "$@"; do
    case $o in "$base"/*) ;; *) continue ;; esac
    rel=${o#"$base"/}
    if [[ $rel == */* ]]; then u=${rel%%/*}; else u=${rel%.o}; fi
    if [ -z "${rank_of[$u]:-}" ]; then
        echo "check-calls: $o: '$u' has no place in the order" \
             "(${units[*]})" >&2
        exit 1
    fi
    objs+=("$o") idx+=("${rank_of[$u]}") unit+=("$u")
done

# Which object defines each global symbol, then every undefined symbol
# of every object against it: one nm pass each way, joined in awk.
table=$(for k in "${!objs[@]}"; do
            printf '%s %s %s\n' "${objs[$k]}" "${idx[$k]}" "${unit[$k]}"
        done)
bad=0
{ nm -A --defined-only -g "${objs[@]}" | sed 's/^/D /'
  nm -A -u "${objs[@]}" | sed 's/^/U /'; } |
awk -v table="$table" -v base="$base/" '
    BEGIN { n = split(table, t, "\n")
            for (i = 1; i <= n; i++) { split(t[i], f, " ")
                                        rank[f[1]] = f[2]; unit[f[1]] = f[3] } }
    { file = $2; sub(/:[^:]*$/, "", file); sym = $NF }
    $1 == "D" { def[sym] = file; next }
    $1 == "U" && (sym in def) {
        d = def[sym]; rel = file; sub("^" base, "", rel)
        if (rank[d] + 0 < rank[file] + 0)
            printf "check-calls: %s calls %s of %s, which is above it\n", rel, sym, unit[d]
        else if (rank[d] == rank[file] && unit[d] != unit[file])
            printf "check-calls: %s calls %s of %s, which stands beside it\n", rel, sym, unit[d]
        else next
        bad = 1 }
    END { exit bad }' >&2 || bad=1
[ $bad = 0 ] || exit 1
echo "check-calls: $base: ${#objs[@]} objects, calls go one way" \
     "(${units[*]})"
