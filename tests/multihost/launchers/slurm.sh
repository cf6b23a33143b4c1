#!/bin/bash
# Slurm across emulated hosts: 2 hosts on a fabric (dccl-run --fabric); munged in
# this namespace (its socket is a file, reached from every host), slurmctld in host 0
# and one slurmd per host, each in its host's network namespace and a UTS namespace
# named after it (dccl-h<h>), with a private slurm.conf, spool and state. Then, from
# host 0, `srun -N 2 --ntasks-per-node 2 dccl-perf`: the ranks know only Slurm's
# variables (SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID) and the store's address and
# secret (DCCL_ADDR, DCCL_SECRET, which srun passes on). Checks: exit 0, every result
# right, ranks 0,1 on dccl-h0 and 2,3 on dccl-h1, no daemon and no namespace left.
# usage: slurm.sh DCCL_RUN DCCL_PERF. Exit 77 (skipped) without emulation or Slurm.
. "$(dirname "$0")/../lib.sh"
need_emulation
run=$1 perf=$2
for t in slurmctld slurmd srun munged; do
  command -v $t >/dev/null || skip "$t is not installed (scripts/install-deps installs slurm-wlm and munge)"
done
dir=$(mktemp -d /tmp/dccl-slurm.XXXXXX)
chmod 755 "$dir"
daemons=()
stop_daemons() {
  local p
  for p in "${daemons[@]}"; do kill "$p" 2>/dev/null; done
  for p in "${daemons[@]}"; do
    for i in $(seq 1 50); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$p" 2>/dev/null
  done
  daemons=()
}
trap 'stop_daemons; release_hosts; rm -rf "$dir"' EXIT
trap 'exit 143' TERM
trap 'exit 130' INT
show_logs() { for f in "$dir"/*.log "$dir"/*.out; do echo "== $f"; tail -20 "$f"; done; }

hold_hosts "$run" 2 --fabric
# munge: a key of this job's own, a private socket.
dd if=/dev/urandom of="$dir/munge.key" bs=1024 count=1 status=none
chmod 400 "$dir/munge.key"
munged --foreground --force --socket="$dir/munge.sock" --key-file="$dir/munge.key" --pid-file="$dir/munged.pid" \
  --log-file="$dir/munged.log" --seed-file="$dir/munged.seed" &
daemons+=($!)
wait_for "$dir/munge.sock" 1 10 || { show_logs; fail "munged did not start within 10 s"; }
mkdir -p "$dir/state"
cat >"$dir/slurm.conf" <<CONF
ClusterName=dccl
SlurmctldHost=dccl-h0(198.18.0.1)
AuthType=auth/munge
AuthInfo=socket=$dir/munge.sock
CredType=cred/munge
SlurmUser=root
SlurmdUser=root
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool-%n
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd-%n.pid
SlurmctldLogFile=$dir/slurmctld.log
SlurmdLogFile=$dir/slurmd-%n.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
MpiDefault=none
SchedulerType=sched/builtin
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
ReturnToService=2
SlurmctldPort=6817
SlurmdPort=6818
NodeName=dccl-h0 NodeAddr=198.18.0.1 CPUs=2 State=UNKNOWN
NodeName=dccl-h1 NodeAddr=198.18.1.2 CPUs=2 State=UNKNOWN
PartitionName=emu Nodes=ALL Default=YES MaxTime=10 State=UP
CONF
# slurmd needs a cgroup plugin even with proctrack/linuxproc and task/none (22.05 has
# no "disabled" one), and cgroups mounted; `ip netns exec` gives slurmd a mount
# namespace with a fresh /sys without them, so they are mounted there. Machines with v1 controllers get the v1 hierarchies (cgroup/v2 fails
# on them: "Hybrid mode is not supported"); pure v2 machines get cgroup2.
if grep -qv '^0::' /proc/self/cgroup; then
  printf 'CgroupPlugin=cgroup/v1\nCgroupMountpoint=/sys/fs/cgroup\n' >"$dir/cgroup.conf"
  cgmount='mount -t tmpfs cgroup /sys/fs/cgroup && for c in freezer cpuset memory devices cpu cpuacct; do
    mkdir -p /sys/fs/cgroup/$c && mount -t cgroup -o $c cgroup /sys/fs/cgroup/$c || exit 1; done && exec "$@"'
else
  printf 'CgroupPlugin=cgroup/v2\nIgnoreSystemd=yes\n' >"$dir/cgroup.conf"
  cgmount='mount -t cgroup2 cgroup2 /sys/fs/cgroup && exec "$@"'
fi
mkdir -p "$dir/spool-dccl-h0" "$dir/spool-dccl-h1"
export SLURM_CONF=$dir/slurm.conf
# on HOST CMD...: CMD in emulated host HOST's network namespace, with hostname dccl-hHOST.
on() {  # (exec: a background "on" is the daemon itself, its pid in $!)
  local h=$1
  shift
  exec ip netns exec $emu-h$h unshare --uts /bin/sh -c 'hostname "$0" && exec "$@"' dccl-h$h "$@"
}
on 0 slurmctld -D -f "$SLURM_CONF" >"$dir/slurmctld.out" 2>&1 &
daemons+=($!)
for h in 0 1; do
  on $h /bin/sh -c "$cgmount" slurmd slurmd -D -N dccl-h$h -f "$SLURM_CONF" >"$dir/slurmd-$h.out" 2>&1 &
  daemons+=($!)
done
# Both nodes up (idle) within 30 s.
for i in $(seq 1 150); do
  [ "$(on 0 sinfo -h -N -o '%N %t' 2>/dev/null | grep -c ' idle')" = 2 ] && break
  sleep 0.2
done
(on 0 sinfo -N -o '%N %t %c') || true
[ "$(on 0 sinfo -h -N -o '%t' 2>/dev/null | grep -c idle)" = 2 ] || { show_logs; fail "the 2 slurmd did not come up within 30 s"; }

unset DCCL_RANK DCCL_WORLD_SIZE DCCL_ID DCCL_LOCAL_RANK DCCL_LOCAL_SIZE
export DCCL_ADDR=198.18.0.1:29556 DCCL_SECRET=$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n') DCCL_TIMEOUT_S=60
out=$dir/out
timeout 120 ip netns exec $emu-h0 srun -N 2 --ntasks-per-node 2 "$perf" all_reduce -b 8 -e 512K -f 16 -n 2 -w 1 \
  >"$out" 2>&1
rc=$?
cat "$out"
[ $rc -eq 0 ] || { show_logs; fail "srun exited with $rc"; }
check_2x2 "$out"
stop_daemons
release_hosts
echo "OK: srun -N 2 --ntasks-per-node 2 across 2 emulated hosts, 5 sizes right, nothing left"
