#!/bin/bash
# torchrun across two emulated hosts (the network namespaces of dccl-run --hosts),
# two ranks each, training over dccl. Passes when:
#   - the job exits 0 (the training script's own checks passed on every rank);
#   - every rank reports passed checks, 4 ranks in all;
#   - DirectCCL routed the other host's ranks over tcp;ofi_rxm and its own over shm
#     (DCCL_DEBUG=INFO transport lines);
#   - no namespace of this dccl-run (dccl-<pid>-*) is left afterwards.
# usage: torchrun_hosts.sh DCCL_RUN PYTHON SCRIPT [args...]; exit 77 (skipped) where
# hosts cannot be emulated.
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../../multihost/lib.sh"
need_emulation
run=$1 python=$2
shift 2
out=$(mktemp)
trap 'rm -f "$out"' EXIT
"$run" --hosts 2 -n 2 --timeout 550 --env DCCL_DEBUG=INFO --env OMP_NUM_THREADS=1 \
  "$here/node.sh" "$python" 29400 "$@" >"$out" 2>&1 &
pid=$!
wait $pid
rc=$?
grep -v " DCCL INFO \|^\[[0-9]\] *[WI][0-9]\{4\} " "$out" | tail -n 60
[ $rc -eq 0 ] || fail "the job exited with $rc"
left=$(left_of $pid)
[ -z "$left" ] || fail "dccl-run (pid $pid) left namespaces behind: $left"
passed=$(grep -c "checks passed, 0 failed" "$out")
[ "$passed" = 4 ] || fail "$passed of 4 ranks reported passing checks"
# DirectCCL's transport lines of the 4-rank communicator: 1 peer by shm, 2 by tcp;ofi_rxm.
lines=$(grep -o "net: rank [0-9] of 4 on dccl-h[01][^ ]* uses shm for 2 ranks, tcp;ofi_rxm for 2 ranks" "$out" | sort -u | wc -l)
[ "$lines" -ge 4 ] || { grep " net: rank " "$out" | head; fail "expected 4 ranks with shm within a host and tcp;ofi_rxm across ($lines)"; }
echo "OK: torchrun on 2 emulated hosts x 2 ranks trained over dccl; no namespace of dccl-run $pid left"
