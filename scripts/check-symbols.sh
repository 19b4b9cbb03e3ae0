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
