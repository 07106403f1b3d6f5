#!/usr/bin/env bash
# A single-node Slurm cluster on this machine, every file in one folder: its own munged (key,
# socket), slurmctld and slurmd, on free loopback ports, no cgroups, jobs run as the caller.
# For tests and for trying a sweep's job array before a real cluster; needs root (slurmd
# switches to the job's user) and Debian's slurm-wlm and munge (scripts/setup.sh installs them).
#   local_cluster.sh start DIR   configure DIR, start the daemons, wait (bounded) until the node
#                                takes jobs; then: export SLURM_CONF=DIR/slurm.conf
#   local_cluster.sh stop DIR    stop the daemons started in DIR (by their pids), wait until gone
#   start DIR --owner PID        also stop them once process PID is gone, however it ended (a
#                                test killed by its timeout cannot leave them behind)
# Every wait is bounded (DTSIM_SLURM_WAIT_S, default 60 s) and ends with what the logs say.
set -euo pipefail

wait_s=${DTSIM_SLURM_WAIT_S:-60}

die() {
  echo "local_cluster.sh: $*" >&2
  exit 1
}

# Two TCP ports nobody listens on now (the kernel's choice, released again at once).
free_ports() {
  python3 -c 'import socket
s = [socket.socket() for _ in range(2)]
for x in s: x.bind(("127.0.0.1", 0))
print(" ".join(str(x.getsockname()[1]) for x in s))'
}

write_conf() {
  local dir=$1 ctld_port=$2 slurmd_port=$3 hw
  # This machine's CPUs as slurmd counts them, so the node is not drained for a mismatch.
  hw=$(slurmd -C | head -1 | tr ' ' '\n' | grep -E '^(CPUs|Boards|SocketsPerBoard|CoresPerSocket|ThreadsPerCore)=' | tr '\n' ' ')
  cat > "$dir/slurm.conf" <<CONF
ClusterName=dtsim-local
SlurmctldHost=$(hostname -s)(127.0.0.1)
SlurmctldPort=$ctld_port
SlurmdPort=$slurmd_port
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$dir/munge.socket
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd.pid
SlurmctldLogFile=$dir/slurmctld.log
SlurmdLogFile=$dir/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SwitchType=switch/none
MpiDefault=none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SchedulerType=sched/builtin
ReturnToService=2
SlurmctldTimeout=30
SlurmdTimeout=30
MinJobAge=600
NodeName=dtsim-local NodeAddr=127.0.0.1 NodeHostname=$(hostname -s) $hw State=UNKNOWN
PartitionName=local Nodes=dtsim-local Default=YES MaxTime=INFINITE State=UP
CONF
}

# Runs "$@" until it succeeds, at most $wait_s seconds; else fails with $what and the logs' tails.
wait_for() {
  local what=$1 dir=$2
  shift 2
  local deadline=$((SECONDS + wait_s))
  until "$@" > /dev/null 2>&1; do
    if [ $SECONDS -ge $deadline ]; then
      echo "local_cluster.sh: $what not within ${wait_s} s; the logs end:" >&2
      for f in "$dir"/munged.log "$dir"/slurmctld.log "$dir"/slurmd.log; do
        [ -f "$f" ] && { echo "--- $f" >&2; tail -n 15 "$f" >&2; }
      done
      return 1
    fi
    sleep 0.5
  done
}

node_idle() { [ "$(sinfo -h -n dtsim-local -o %t)" = idle ]; }

start() {
  local dir=$1 owner=${2:-} ports
  [ "$(id -u)" -eq 0 ] || die "needs root: slurmd starts each job as its user"
  for b in munged mungekey slurmctld slurmd sbatch sinfo python3; do
    command -v "$b" > /dev/null || die "$b is missing: run scripts/setup.sh (it installs slurm-wlm and munge)"
  done
  mkdir -p "$dir/state" "$dir/spool"
  chmod 700 "$dir"
  dir=$(cd "$dir" && pwd)
  if [ -n "$owner" ]; then
    setsid bash "$0" watch "$dir" "$owner" > "$dir/watchdog.log" 2>&1 < /dev/null &
    echo $! > "$dir/watchdog.pid"
  fi
  read -r ctld_port slurmd_port < <(free_ports)
  write_conf "$dir" "$ctld_port" "$slurmd_port"
  mungekey --create --keyfile="$dir/munge.key" --force
  munged --force --socket="$dir/munge.socket" --key-file="$dir/munge.key" --pid-file="$dir/munged.pid" \
    --log-file="$dir/munged.log" --seed-file="$dir/munged.seed"
  wait_for "munged's socket" "$dir" test -S "$dir/munge.socket"
  export SLURM_CONF=$dir/slurm.conf
  slurmctld -f "$SLURM_CONF"
  wait_for "slurmctld answering" "$dir" scontrol ping
  slurmd -f "$SLURM_CONF" -N dtsim-local
  wait_for "the node taking jobs (idle)" "$dir" node_idle
  echo "local Slurm up: export SLURM_CONF=$SLURM_CONF"
}

# Ends the daemon whose pid file is $2 (TERM, then KILL after 10 s); a missing file is no error.
stop_one() {
  local name=$1 pidfile=$2 pid
  [ -f "$pidfile" ] || return 0
  pid=$(cat "$pidfile")
  [ -n "$pid" ] && kill -0 "$pid" 2> /dev/null || return 0
  # The pid must still be this daemon (a stale file must not end an unrelated process).
  grep -q "$name" "/proc/$pid/comm" 2> /dev/null || return 0
  kill -TERM "$pid" 2> /dev/null || true
  for _ in $(seq 1 40); do
    kill -0 "$pid" 2> /dev/null || return 0
    sleep 0.25
  done
  echo "local_cluster.sh: $name ($pid) ignored TERM for 10 s, killing it" >&2
  kill -KILL "$pid" 2> /dev/null || true
}

stop() {
  local dir=$1
  [ -d "$dir" ] || return 0
  dir=$(cd "$dir" && pwd)
  # Jobs still running end first (their steps are not slurmd's children), for at most 20 s.
  if [ -f "$dir/slurm.conf" ] && [ -f "$dir/slurmctld.pid" ] && kill -0 "$(cat "$dir/slurmctld.pid")" 2> /dev/null; then
    export SLURM_CONF=$dir/slurm.conf
    timeout 10 scancel --partition=local 2> /dev/null || true
    local deadline=$((SECONDS + 20))
    while [ -n "$(timeout 5 squeue -h -o %i 2> /dev/null)" ] && [ $SECONDS -lt $deadline ]; do sleep 0.5; done
  fi
  # The watchdog first, unless this is the watchdog stopping the cluster itself.
  [ -f "$dir/watchdog.pid" ] && [ "$(cat "$dir/watchdog.pid")" != $$ ] && stop_one bash "$dir/watchdog.pid"
  stop_one slurmd "$dir/slurmd.pid"
  stop_one slurmctld "$dir/slurmctld.pid"
  stop_one munged "$dir/munged.pid"
}

# The watchdog of `start --owner`: waits for the owner to end, then stops the cluster.
watch() {
  local dir=$1 owner=$2
  while kill -0 "$owner" 2> /dev/null; do sleep 1; done
  stop "$dir"
}

case "${1:-}:${2:-}:${3:-}" in
  start:?*::) start "$2" ;;
  start:?*:--owner) start "$2" "${4:?--owner needs a PID}" ;;
  stop:?*:) stop "$2" ;;
  watch:?*:?*) watch "$2" "$3" ;;
  *) die "usage: local_cluster.sh start DIR [--owner PID] | stop DIR" ;;
esac
