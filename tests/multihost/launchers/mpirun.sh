#!/bin/bash
# Open MPI's mpirun across emulated hosts: 2 hosts on a fabric (dccl-run --fabric),
# mpirun started in host 0 with its rsh agent replaced by netns-rsh (which enters
# a host's namespaces), 2 ranks on each host by address. The ranks (dccl-perf) know
# only Open MPI's variables (OMPI_COMM_WORLD_*) and the store's address and secret
# (DCCL_ADDR, DCCL_SECRET, passed with -x). Checks: exit 0, every result right (0
# wrong), ranks 0,1 on dccl-h0 and 2,3 on dccl-h1, nothing left behind.
# usage: mpirun.sh DCCL_RUN DCCL_PERF. Exit 77 (skipped) without emulation or Open MPI.
. "$(dirname "$0")/../lib.sh"
need_emulation
run=$1 perf=$2
command -v mpirun >/dev/null || skip "Open MPI's mpirun is not installed (scripts/install-deps installs openmpi-bin)"
agent=$(cd "$(dirname "$0")" && pwd)/netns-rsh
out=$(mktemp)
trap 'rm -f "$out"; release_hosts' EXIT
trap 'exit 143' TERM
trap 'exit 130' INT
hold_hosts "$run" 2 --fabric
unset DCCL_RANK DCCL_WORLD_SIZE DCCL_ID DCCL_LOCAL_RANK DCCL_LOCAL_SIZE
export DCCL_EMU_NETNS=$emu
secret=$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')
timeout 120 ip netns exec $emu-h0 unshare --uts sh -c 'hostname dccl-h0 && exec "$@"' mpirun \
  mpirun --allow-run-as-root --mca plm_rsh_agent "$agent" --mca oob_tcp_if_include eth0 \
  --mca btl self,tcp --mca btl_tcp_if_include eth0 \
  -H 198.18.0.1:2,198.18.1.2:2 -np 4 -x DCCL_ADDR=198.18.0.1:29555 -x DCCL_SECRET=$secret -x DCCL_TIMEOUT_S=60 \
  "$perf" all_reduce -b 8 -e 512K -f 16 -n 2 -w 1 >"$out" 2>&1
rc=$?
cat "$out"
[ $rc -eq 0 ] || fail "mpirun exited with $rc"
check_2x2 "$out"
release_hosts
echo "OK: mpirun across 2 emulated hosts x 2 ranks, 5 sizes right, nothing left"
