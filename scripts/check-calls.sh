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

# Which unit defines each global symbol (its object's index).
declare -A def
for k in "${!objs[@]}"; do
    for s in $(nm --defined-only -g "${objs[$k]}" | awk '{print $3}'); do
        def[$s]=$k
    done
done

bad=0
for k in "${!objs[@]}"; do
    for s in $(nm -u "${objs[$k]}" | awk '{print $2}'); do
        d=${def[$s]:-}
        [ -n "$d" ] || continue
        j=${idx[$d]}
        if [ "$j" -lt "${idx[$k]}" ]; then
            echo "check-calls: ${objs[$k]#"$base"/} calls $s of" \
                 "${unit[$d]}, which is above it" >&2
            bad=1
        elif [ "$j" -eq "${idx[$k]}" ] && [ "${unit[$d]}" != "${unit[$k]}" ]; then
            echo "check-calls: ${objs[$k]#"$base"/} calls $s of" \
                 "${unit[$d]}, which stands beside it" >&2
            bad=1
        fi
    done
done
[ $bad = 0 ] || exit 1
echo "check-calls: $base: ${#objs[@]} objects, calls go one way" \
     "(${units[*]})"
