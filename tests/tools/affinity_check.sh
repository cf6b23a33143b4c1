#!/usr/bin/env bash
# Ranks bound to a core each (as mpirun --bind-to core does) spin; ranks crowded
# onto one core yield. The decision uses the union of the host's ranks' CPU
# affinities, not one rank's binding. Usage: affinity_check.sh BUILD_DIR
set -u
B=$1
T=$(mktemp -d) && trap 'rm -rf "$T"' EXIT
ncpu=$(nproc)
if [ "$ncpu" -lt 2 ]; then echo "needs 2 CPUs, this machine offers $ncpu"; exit 1; fi
run() {  # run OUT CPU_OF_RANK_EXPR
  "$B/tools/dccl-run" -n 2 -x DCCL_DEBUG=INFO --timeout 60 sh -c \
    "exec taskset -c $2 $B/tools/dccl-perf all_reduce -b 8 -e 8 -n 1 -w 0" > "$1" 2>&1
}
fails=0
run "$T/own" '$DCCL_RANK' || { echo "FAIL: bound run failed"; cat "$T/own"; fails=1; }
if grep -q "yielding instead of spinning" "$T/own"; then
  echo "FAIL: ranks bound to a core each were taken for ranks sharing one:"; grep yielding "$T/own"; fails=1
else echo "ok   2 ranks on cores 0 and 1: spinning"; fi
run "$T/one" 0 || { echo "FAIL: crowded run failed"; cat "$T/one"; fails=1; }
if grep -q "2 ranks on 1 cores (the union" "$T/one"; then echo "ok   2 ranks on core 0: yielding"
else echo "FAIL: 2 ranks on one core did not yield:"; grep -E "cores|FAIL|error" "$T/one"; fails=1; fi
exit $fails
