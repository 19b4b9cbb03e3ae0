#!/usr/bin/env bash
# Build and test this tree on Debian 13 (trixie: gcc 14, Python 3.13, torch
# 2.6) in a chroot of its own, from any Debian host (root: debootstrap,
# chroot and mounts).  The chroot is made once (about 2 minutes) and
# reused; the tree's tracked and new files are copied into its /src and
# built there in build/ (the host's build/ is not touched).
#
#   scripts/debian13.sh [COMMAND]   default: install-deps, make -j2, the
#                                   quick tier (make check: the Python and
#                                   torch suites' fast cases, torch 2.x's
#                                   among them), then the torch jobs suite
#                                   (tests/py/test_torch_jobs.py)
#   FCCL_TRIXIE_ROOT=DIR            the chroot (default /var/tmp/fccl-trixie)
#   FCCL_TRIXIE_SRC=/PATH           where in the chroot the tree goes (default
#                                   /src; one per worktree sharing a chroot)
#
# /proc, /sys, /dev and /dev/shm are bind-mounted while it runs and
# unmounted on exit, on failure too.
set -euo pipefail
ROOT=${FCCL_TRIXIE_ROOT:-/var/tmp/fccl-trixie}
SRC=$(cd "$(dirname "$0")/.." && pwd)
CMD=${1:-"scripts/install-deps.sh && make -j2 && make check && cd tests/py \
&& PYTHONPATH=\$PWD/../../build/python FCCL_BIN=\$PWD/../../build/bin \
FCCL_TIMEOUT=60 python3 -m pytest -q -p no:cacheprovider test_torch_jobs.py"}
DST=${FCCL_TRIXIE_SRC:-/src}
MIRROR=http://deb.debian.org/debian

[ "$(id -u)" -eq 0 ] || { echo "debian13.sh: needs root" >&2; exit 2; }

make_root() {
    command -v debootstrap >/dev/null ||
        { apt-get update -qq && apt-get install -y -qq debootstrap; }
    rm -rf "$ROOT.new"
    debootstrap --variant=minbase \
        --include=python3,python3-numpy,python3-torch,ca-certificates,git \
        trixie "$ROOT.new" "$MIRROR"
    mv "$ROOT.new" "$ROOT"
}

mounted=()
unmount_all() {
    local i
    for ((i = ${#mounted[@]} - 1; i >= 0; i--)); do
        umount -l "${mounted[i]}" 2>/dev/null || true
    done
}
trap unmount_all EXIT

bind() { # host path -> the same path in the chroot
    mkdir -p "$ROOT$1"
    mount --bind "$1" "$ROOT$1"
    mounted+=("$ROOT$1")
}

[ -x "$ROOT/usr/bin/python3" ] || make_root
cp /etc/resolv.conf "$ROOT/etc/resolv.conf" 2>/dev/null || true
bind /proc
bind /sys
bind /dev
bind /dev/shm

# the tree as it is here (tracked and untracked files, not ignored ones);
# the chroot's build/ is kept, so a second run rebuilds what changed
mkdir -p "$ROOT$DST"
find "$ROOT$DST" -mindepth 1 -maxdepth 1 ! -name build -exec rm -rf {} +
(cd "$SRC" && git ls-files -z --cached --others --exclude-standard |
    tar --null --ignore-failed-read -T - -cf - 2>/dev/null) |
    tar -xf - -C "$ROOT$DST"
echo "debian13.sh: $(chroot "$ROOT" sh -c '. /etc/os-release; echo $PRETTY_NAME'), running: $CMD"
chroot "$ROOT" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin \
    HOME=/root LANG=C.UTF-8 ${CI:+CI=$CI} /bin/bash -c "cd $DST && $CMD"
