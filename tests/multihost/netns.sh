# tests/multihost/netns.sh: several "hosts" on one machine, for the
# multi-host tests.  Sourced (bash), needs root.
#
# A run owns network namespaces named "$MH_PREFIX-<pid>-br" (a bridge) and
# "$MH_PREFIX-<pid>-hI" (host I, 1-based), <pid> being the creating shell's
# pid, so runs never share a name and a namespace whose creator is gone is
# recognisably stale (mh_reap_stale removes those).  Each host has one veth
# "eth0" plugged into the bridge, which lives in its own namespace: nothing
# is added to the root namespace, and the only addresses are the hosts' own:
#   IPv4  10.231.0.I/24     IPv6  fd00:231::I/64 (a ULA prefix)
# Host I is called "nodeI": its hostname (a UTS namespace per process, see
# mh_exec) and /etc/netns/<ns>/hosts, which names every host of the run.
#
#   mh_reap_stale            remove namespaces of dead runs of this prefix
#   mh_add_host I [v4|v6|both]  create host I (default both families)
#   mh_hosts_file            (re)write every host's /etc/hosts view
#   mh_exec I CMD ARGS...    run CMD on host I, hostname nodeI
#   mh_addr I [v4|v6]        host I's address
#   mh_ns I                  host I's namespace name
#   mh_pids_on I             pids of processes on host I
#   mh_kill_all              kill everything running on our hosts
#   mh_cleanup               kill everything on our hosts, delete all
#   mh_trap                  mh_cleanup on exit, INT, TERM, HUP

MH_PREFIX=${MH_PREFIX:-fcclmh}
MH_ID="$MH_PREFIX-$$"
MH_V4=10.231.0.
MH_V6=fd00:231::
MH_HOSTS=()         # host numbers created by this run
declare -A MH_FAMILY

mh_ns() { echo "$MH_ID-h$1"; }

mh_addr()
{
    case "${2:-v4}" in
    v6) echo "$MH_V6$1" ;;
    *) echo "$MH_V4$1" ;;
    esac
}

# Kill every process in namespace $1 (they are our test's) and remove the
# shm files they can no longer remove (libfabric's "/dev/shm/<pid>:...",
# and fccl's "/dev/shm/fccl-<pid>-<n>" of a rank killed while it set up a
# group's segment), then delete the namespace and its /etc/netns directory.
mh_del_ns()
{
    local ns=$1 pids p
    pids=$(ip netns pids "$ns" 2>/dev/null)
    [ -n "$pids" ] && kill -9 $pids 2>/dev/null
    for p in $pids; do rm -f /dev/shm/"$p":* /dev/shm/fccl-"$p"-*; done
    for _ in 1 2 3 4 5 6 7 8 9 10; do
        [ -z "$(ip netns pids "$ns" 2>/dev/null)" ] && break
        sleep 0.1
    done
    ip netns del "$ns" 2>/dev/null
    rm -rf "/etc/netns/$ns"
}

# Namespaces "$MH_PREFIX-<pid>-*" whose <pid> is not a live process are
# left by a killed run: remove them.
mh_reap_stale()
{
    local ns pid
    for ns in $(ip netns list 2>/dev/null | awk '{print $1}'); do
        case "$ns" in "$MH_PREFIX"-*-*) ;; *) continue ;; esac
        pid=${ns#"$MH_PREFIX"-}
        pid=${pid%%-*}
        case "$pid" in '' | *[!0-9]*) continue ;; esac
        kill -0 "$pid" 2>/dev/null && continue
        echo "multihost: removing stale namespace $ns (its run, pid $pid, is gone)"
        mh_del_ns "$ns"
    done
}

mh_bridge()
{
    ip netns list | grep -q "^$MH_ID-br\b" && return 0
    ip netns add "$MH_ID-br" &&
        ip -n "$MH_ID-br" link add br0 type bridge &&
        ip -n "$MH_ID-br" link set br0 up
}

mh_add_host()
{
    local i=$1 fam=${2:-both} ns
    ns=$(mh_ns "$i")
    mh_bridge || return 1
    ip netns add "$ns" || return 1
    MH_HOSTS+=("$i")
    MH_FAMILY[$i]=$fam
    ip -n "$MH_ID-br" link add "v$i" type veth peer name eth0 netns "$ns" ||
        return 1
    ip -n "$MH_ID-br" link set "v$i" master br0 up
    ip -n "$ns" link set lo up
    # No link-local address: the ULA is the host's only IPv6 address,
    # and no duplicate-address detection delays its use.
    ip netns exec "$ns" sysctl -qw net.ipv6.conf.eth0.addr_gen_mode=1 2>/dev/null
    if [ "$fam" != v6 ]; then
        ip -n "$ns" addr add "$(mh_addr "$i")/24" dev eth0 || return 1
    fi
    if [ "$fam" != v4 ]; then
        ip -n "$ns" addr add "$(mh_addr "$i" v6)/64" dev eth0 nodad || return 1
    fi
    ip -n "$ns" link set eth0 up
    mkdir -p "/etc/netns/$ns"
    mh_hosts_file
}

# Every host resolves every host's name: nodeI to its IPv4 address, or to
# its IPv6 address on v6-only hosts; nodeI-v6 always to the IPv6 one.
mh_hosts_file()
{
    local i j f
    for i in "${MH_HOSTS[@]}"; do
        f="/etc/netns/$(mh_ns "$i")/hosts"
        {
            echo "127.0.0.1 localhost"
            echo "::1 localhost ip6-localhost"
            for j in "${MH_HOSTS[@]}"; do
                if [ "${MH_FAMILY[$j]}" = v6 ]; then
                    echo "$(mh_addr "$j" v6) node$j node$j-v6"
                else
                    echo "$(mh_addr "$j") node$j"
                    if [ "${MH_FAMILY[$j]}" = both ]; then
                        echo "$(mh_addr "$j" v6) node$j-v6"
                    fi
                fi
            done
        } > "$f.tmp" && mv "$f.tmp" "$f"
    done
}

# Run a command on host $1 in its own UTS namespace named node$1.
mh_exec()
{
    local i=$1
    shift
    ip netns exec "$(mh_ns "$i")" unshare --uts \
        sh -c 'hostname "$0" && exec "$@"' "node$i" "$@"
}

mh_pids_on() { ip netns pids "$(mh_ns "$1")" 2>/dev/null; }

# Kill every process on our hosts (the hosts stay) and remove the shm files
# the killed ones can no longer remove (as mh_del_ns).
mh_kill_all()
{
    local i p
    for i in "${MH_HOSTS[@]}"; do
        for p in $(mh_pids_on "$i"); do
            kill -9 "$p" 2>/dev/null
            rm -f /dev/shm/"$p":* /dev/shm/fccl-"$p"-*
        done
    done
}

mh_cleanup()
{
    local i
    for i in "${MH_HOSTS[@]}"; do
        mh_del_ns "$(mh_ns "$i")"
    done
    MH_HOSTS=()
    ip netns list 2>/dev/null | grep -q "^$MH_ID-br\b" && mh_del_ns "$MH_ID-br"
    return 0
}

mh_trap()
{
    trap 'mh_cleanup' EXIT
    trap 'exit 130' INT
    trap 'exit 143' TERM
    trap 'exit 129' HUP
}
