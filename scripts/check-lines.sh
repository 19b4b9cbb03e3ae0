#!/usr/bin/env bash
# Fail when a .c or .cpp file of the library, the programs or the Python
# bindings is over MAX lines (900 unless given): past that a file holds
# more than one job and wants splitting by job (STYLE.md: one idea per
# file).  Tests, fuzz targets and generated files are not held to it.
#
#   check-lines.sh [MAX]
#
# Run from the top of the tree; part of `make check` (the quick tier),
# so a change that grows a file past the limit fails there first.
set -euo pipefail
max=${1:-900}
dirs=()
for d in common store coll bootstrap moe preload cli python; do
    [ -d "$d" ] && dirs+=("$d")
done
bad=0 n=0
while IFS= read -r -d '' f; do
    n=$((n + 1))
    lines=$(wc -l <"$f")
    if [ "$lines" -gt "$max" ]; then
        echo "check-lines: $f: $lines lines, over $max (split it by job)" >&2
        bad=1
    fi
done < <(find "${dirs[@]}" -type f \( -name '*.c' -o -name '*.cpp' \) -print0)
[ $bad = 0 ] || exit 1
echo "check-lines: $n files of the library, programs and bindings, none" \
     "over $max lines"
