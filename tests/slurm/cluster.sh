#!/usr/bin/env bash
# A real single-node SLURM cluster for the tests of `pkmixer launch --executor slurm`.
#
#   tests/slurm/cluster.sh up      install slurm-wlm and munge if missing (as `install`), write a single-node
#                                  slurm.conf into $PKMIXER_SLURM_DIR (default /tmp/pkmixer-slurm), start munged,
#                                  slurmctld and slurmd, wait until `sinfo` shows the node idle; print
#                                  `export SLURM_CONF=…`. Does nothing but print when the cluster is already up.
#   tests/slurm/cluster.sh install install slurm-wlm and munge with apt-get (root; `apt-get update` first only when
#                                  apt knows neither package); nothing more where they are installed
#   tests/slurm/cluster.sh down    stop the three daemons this script started (by their pid files)
#   tests/slurm/cluster.sh status  exit 0 when the cluster answers
#
# apt-get waits while another apt-get or dpkg holds its lock (an unattended upgrade, a second install), up to
# $PKMIXER_APT_LOCK_WAIT seconds (default 600), saying so on stderr.
#
# Exit status 3: SLURM cannot be had on this machine (not root, or no apt-get); the message says why, and the SLURM
# tests skip with it. Any other failure, an install that fails on a machine with root and apt-get included, is an
# error (exit 1): the tests fail rather than skip.
set -euo pipefail

DIR="${PKMIXER_SLURM_DIR:-/tmp/pkmixer-slurm}"
CONF="$DIR/slurm.conf"
PARTITION=debug
HOST="$(hostname -s)"

unavailable() { echo "SLURM unavailable: $*" >&2; exit 3; }
fail() { echo "cluster.sh: $*" >&2; exit 1; }
LOCK_WAIT="${PKMIXER_APT_LOCK_WAIT:-600}"

apt_get() {  # apt-get "$@", its output on stderr, waiting up to $LOCK_WAIT s while another process holds apt's lock
    local log held start=$SECONDS said=''
    log="$(mktemp)"
    while ! DEBIAN_FRONTEND=noninteractive apt-get -q "$@" >"$log" 2>&1; do
        held="$(grep -m1 '^E: Could not get lock' "$log" | cut -c4-)" || true
        if [ -z "$held" ]; then
            cat "$log" >&2; rm -f "$log"; return 1
        fi
        if [ $((SECONDS - start)) -ge "$LOCK_WAIT" ]; then
            rm -f "$log"
            fail "apt-get $*: the lock was still held after ${LOCK_WAIT} s ($held); run again once that process is" \
                "done (PKMIXER_APT_LOCK_WAIT sets the wait, in seconds)"
        fi
        if [ -z "$said" ]; then
            echo "apt-get $1: $held; waiting up to ${LOCK_WAIT} s for it …" >&2
            said=1
        fi
        sleep 2
    done
    cat "$log" >&2; rm -f "$log"
}

apt_install() {
    [ "$(id -u)" = 0 ] || unavailable "slurm-wlm and munge are not installed and installing them needs root"
    command -v apt-get >/dev/null || unavailable "slurm-wlm and munge are not installed and there is no apt-get"
    [[ "$LOCK_WAIT" =~ ^[0-9]+$ ]] || fail "PKMIXER_APT_LOCK_WAIT must be a whole number of seconds, got '$LOCK_WAIT'"
    echo "installing slurm-wlm and munge (apt-get) …" >&2
    if ! apt-cache show slurm-wlm munge >/dev/null 2>&1; then
        apt_get update || fail "apt-get update failed (its output is above); slurm-wlm and munge cannot be installed"
    fi
    apt_get install -y slurm-wlm munge || fail "apt-get install -y slurm-wlm munge failed (its output is above)"
}

install_packages() {
    if command -v slurmctld >/dev/null && command -v slurmd >/dev/null && command -v munged >/dev/null \
        && command -v sbatch >/dev/null; then
        return
    fi
    apt_install
}

answers() { SLURM_CONF="$CONF" timeout 10 sinfo -h -o '%t' 2>/dev/null | grep -qE '^(idle|mix|alloc)'; }

write_conf() {
    local cpus mem
    cpus="$(nproc)"
    mem="$(free -m | awk '/^Mem:/ {print int($2 * 0.9)}')"
    mkdir -p "$DIR/state" "$DIR/spool"
    chmod 755 "$DIR"
    cat > "$CONF" <<EOF
# written by tests/slurm/cluster.sh: one node, no accounting
ClusterName=pkmixer-test
SlurmctldHost=$HOST(127.0.0.1)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$DIR/munge.socket
StateSaveLocation=$DIR/state
SlurmdSpoolDir=$DIR/spool
SlurmctldPidFile=$DIR/slurmctld.pid
SlurmdPidFile=$DIR/slurmd.pid
SlurmctldLogFile=$DIR/slurmctld.log
SlurmdLogFile=$DIR/slurmd.log
SlurmctldPort=${PKMIXER_SLURMCTLD_PORT:-6817}
SlurmdPort=${PKMIXER_SLURMD_PORT:-6818}
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
MpiDefault=none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
JobCompType=jobcomp/none
ReturnToService=2
SchedulerParameters=sched_interval=1
MessageTimeout=30
KillWait=5
MinJobAge=300
NodeName=$HOST NodeAddr=127.0.0.1 CPUs=$cpus RealMemory=$mem State=UNKNOWN
PartitionName=$PARTITION Nodes=$HOST Default=YES MaxTime=INFINITE State=UP
EOF
}

start_munge() {
    if [ -S "$DIR/munge.socket" ] && munge -n --socket="$DIR/munge.socket" >/dev/null 2>&1; then
        return
    fi
    [ -f "$DIR/munge.key" ] || mungekey --create --keyfile="$DIR/munge.key" >/dev/null 2>&1 \
        || dd if=/dev/urandom of="$DIR/munge.key" bs=1024 count=1 status=none
    chmod 600 "$DIR/munge.key"
    munged --force --socket="$DIR/munge.socket" --key-file="$DIR/munge.key" --pid-file="$DIR/munged.pid" \
        --log-file="$DIR/munged.log" --seed-file="$DIR/munged.seed"
}

up() {
    if [ -f "$CONF" ] && answers; then
        echo "export SLURM_CONF=$CONF"
        return
    fi
    [ "$(id -u)" = 0 ] || unavailable "starting slurmctld and slurmd here needs root"
    install_packages
    down >/dev/null 2>&1 || true
    write_conf
    start_munge
    export SLURM_CONF="$CONF"
    slurmctld -f "$CONF"
    slurmd -f "$CONF"
    for _ in $(seq 1 60); do
        if answers; then
            echo "export SLURM_CONF=$CONF"
            return
        fi
        sleep 1
    done
    echo "the node did not become idle in 60 s; sinfo says:" >&2
    SLURM_CONF="$CONF" sinfo >&2 || true
    tail -n 20 "$DIR/slurmctld.log" "$DIR/slurmd.log" >&2 || true
    exit 1
}

stop_pidfile() {
    local file="$1"
    [ -f "$file" ] || return 0
    local pid
    pid="$(cat "$file")"
    if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
        kill "$pid"
        for _ in $(seq 1 20); do kill -0 "$pid" 2>/dev/null || break; sleep 0.5; done
    fi
    rm -f "$file"
}

down() {
    stop_pidfile "$DIR/slurmd.pid"
    stop_pidfile "$DIR/slurmctld.pid"
    stop_pidfile "$DIR/munged.pid"
}

case "${1:-}" in
    up) up ;;
    install) apt_install ;;
    down) down ;;
    status) [ -f "$CONF" ] && answers ;;
    *) echo "usage: $0 up|install|down|status" >&2; exit 2 ;;
esac
