#!/bin/sh
# bench/netns-rsh.sh: the "rsh" that bench/net.sh gives MPI launchers
# (Open MPI's plm_rsh_agent, hydra's -launcher-exec) to start processes on
# its network-namespace hosts instead of over ssh.
#
#   netns-rsh.sh [-OPTION...] HOST COMMAND...
#
# HOST is nodeI or 10.231.0.I (host I of the run); the command runs in
# namespace "${NB_NS_PREFIX}I" (set by bench/net.sh, e.g. fcclnb-1234-h),
# with hostname nodeI (its own UTS namespace, as tests/multihost/netns.sh's
# mh_exec) and that namespace's /etc/hosts (ip netns exec binds
# /etc/netns/<ns>/hosts) and, when NB_BOOT_IDS names a directory, the boot
# id in its file "I" bound over /proc/sys/kernel/random/boot_id (in the
# mount namespace ip netns exec makes): UCX (MPICH's ch4:ucx) takes two
# processes with one boot id for one machine and would move "inter-host"
# messages through shared memory.  As rsh and ssh do, COMMAND's words are joined
# with spaces and run by sh -c.  Leading options (ssh's -x, -q, ...) are
# ignored.  Any other host is refused: nothing leaves the run's namespaces.
while [ $# -gt 0 ]; do
    case $1 in
    -*) shift ;;
    *) break ;;
    esac
done
if [ $# -lt 2 ] || [ -z "${NB_NS_PREFIX:-}" ]; then
    echo "netns-rsh.sh: usage: [NB_NS_PREFIX=...] netns-rsh.sh HOST COMMAND..." >&2
    exit 255
fi
host=$1
shift
case $host in
node[0-9]*) i=${host#node} ;;
10.231.0.[0-9]*) i=${host#10.231.0.} ;;
*) i= ;;
esac
case $i in
'' | *[!0-9]*)
    echo "netns-rsh.sh: '$host' is not a host of this run (nodeI or 10.231.0.I)" >&2
    exit 255
    ;;
esac
ns="$NB_NS_PREFIX$i"
if ! ip netns list | grep -q "^$ns\b"; then
    echo "netns-rsh.sh: no namespace $ns for host $host" >&2
    exit 255
fi
bid=
[ -n "${NB_BOOT_IDS:-}" ] && bid="$NB_BOOT_IDS/$i"
exec ip netns exec "$ns" unshare --uts sh -c '
    hostname "$0" || exit 255
    if [ -n "$1" ]; then
        mount --bind "$1" /proc/sys/kernel/random/boot_id || exit 255
    fi
    exec sh -c "$2"' "node$i" "$bid" "$*"
