#!/usr/bin/env bash
# Fail when libfccl would export, or define globally, anything but fccl_*
# names: internal symbols must be hidden (shared) or local (static), and
# the library must define nothing of libc (no interposition).
#   check-symbols.sh shared libfccl.so   -- the dynamic symbol table
#   check-symbols.sh static fccl.o       -- the prelinked static object
set -euo pipefail
kind=$1 file=$2
case $kind in
shared) syms=$(nm -D --defined-only "$file" | awk '{print $3}') ;;
static) syms=$(nm --defined-only -g "$file" | awk '{print $3}') ;;
*) echo "usage: $0 shared|static FILE" >&2; exit 2 ;;
esac
# Sanitizer builds add their own instrumentation globals.
bad=$(printf '%s\n' "$syms" | grep -v -E '^(fccl_|$)' |
      grep -v -E '^(__asan|__ubsan|__sanitizer|___asan|__odr_asan)' || true)
if [ -n "$bad" ]; then
    echo "check-symbols: $file ($kind) defines non-fccl_ symbols:" >&2
    printf '  %s\n' $bad | head -40 >&2
    exit 1
fi
n=$(printf '%s\n' "$syms" | grep -c '^fccl_' || true)
echo "check-symbols: $file ($kind): $n symbols, all fccl_*"

# Every function the public headers declare must be marked FCCL_API and
# exported (a forgotten mark would leave a documented call hidden).
if [ "$kind" = shared ] && [ -n "${FCCL_PUBLIC_HEADER:-}" ]; then
    decls=$(${CC:-cc} -E -P -std=c11 -DFCCL_API=FCCL_EXPORT_MARK \
              -I"$(dirname "$(dirname "$FCCL_PUBLIC_HEADER")")" \
              "$FCCL_PUBLIC_HEADER" | tr '\n' ' ' | tr ';{}' '\n\n\n' |
            grep -E '\bfccl_[a-z0-9_]+[[:space:]]*\(' | grep -v typedef)
    unmarked=$(printf '%s\n' "$decls" | grep -v FCCL_EXPORT_MARK |
               grep -oE '\bfccl_[a-z0-9_]+[[:space:]]*\(' | tr -d ' (' || true)
    missing=""
    for f in $(printf '%s\n' "$decls" | grep FCCL_EXPORT_MARK |
               grep -oE '\bfccl_[a-z0-9_]+[[:space:]]*\(' | tr -d ' ('); do
        grep -qx "$f" <<<"$syms" || missing="$missing $f"
    done
    if [ -n "$unmarked$missing" ]; then
        echo "check-symbols: declared but not exported:$missing" \
             "$(printf ' %s' $unmarked) (mark them FCCL_API)" >&2
        exit 1
    fi
    echo "check-symbols: every public declaration is exported"
fi
