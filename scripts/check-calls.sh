#!/usr/bin/env bash
# Fail when an object calls a function that a unit above it defines: the
# one-way call orders the headers state, held on the built objects.
# Include paths stop a file from seeing an upper floor's internal header,
# but not a call through a public header (every floor sees include/fccl)
# or a hand-written declaration; the symbol tables show every call.
#
#   check-calls.sh OBJDIR UNIT...        units listed top-down; a unit is
#                                        OBJDIR/UNIT.o, or every object
#                                        below the folder OBJDIR/UNIT
#   check-calls.sh OBJDIR --map HEADER   the units are the .c files that
#                                        HEADER's "Module map" lists, in
#                                        its order
#
# A unit may call itself and the units after it, never one before it.
# Every object directly in OBJDIR and every folder below it must be a
# unit, so a new file or folder has to be given its place first.
set -euo pipefail
[ $# -ge 2 ] || { echo "usage: $0 OBJDIR UNIT... | OBJDIR --map HEADER" >&2
                  exit 2; }
dir=${1%/} && shift

if [ "$1" = --map ]; then
    # The map's entries are comment lines " *   a.c  text" or
    # " *   a.c, b.c: text" between "Module map" and "Each file calls".
    units=$(awk '/Module map/ {on = 1; next} /Each file calls/ {on = 0}
                 on && /^ \*   [a-z]/ {
                     sub(/^ \*   /, ""); n = split($0, w, /[ ,:]+/)
                     for (i = 1; i <= n && w[i] ~ /^[a-z_0-9]+\.c$/; i++)
                         print w[i] }' "$2" | sed 's/\.c$//')
    [ -n "$units" ] || { echo "check-calls: no module map in $2" >&2; exit 2; }
    set -- $units
fi

objs_of() {
    if [ -f "$dir/$1.o" ]; then echo "$dir/$1.o"
    elif [ -d "$dir/$1" ]; then find "$dir/$1" -name '*.o' | sort
    fi
}

# Everything in OBJDIR must be placed.
declare -A listed
for u in "$@"; do listed[$u]=1; done
for e in "$dir"/*; do
    b=$(basename "$e")
    if [ -d "$e" ]; then name=$b
    elif [[ $b == *.o ]]; then name=${b%.o}
    else continue
    fi
    if [ -z "${listed[$name]:-}" ]; then
        echo "check-calls: $e has no place in the order ($*)" >&2
        exit 1
    fi
done

# Which unit (its index, top = 0) defines each global symbol.
declare -A def
i=0
for u in "$@"; do
    for o in $(objs_of "$u"); do
        for s in $(nm --defined-only -g "$o" | awk '{print $3}'); do
            def[$s]=$i
        done
    done
    i=$((i + 1))
done

units=("$@")
bad=0
i=0
for u in "$@"; do
    for o in $(objs_of "$u"); do
        for s in $(nm -u "$o" | awk '{print $2}'); do
            j=${def[$s]:-}
            if [ -n "$j" ] && [ "$j" -lt "$i" ]; then
                echo "check-calls: ${o#"$dir"/} calls $s of ${units[$j]}," \
                     "which is above it" >&2
                bad=1
            fi
        done
    done
    i=$((i + 1))
done
[ $bad = 0 ] || exit 1
echo "check-calls: $dir: calls go one way ($*)"
