#!/bin/bash
# 2 emulated hosts x 1 rank, 2 rails at 1 Gbit/s, rail 1 of each host degraded to
# 250 Mbit/s (degrade.sh); libfabric tcp;ofi_rxm striped over the 2 rails, 1 flow
# each; equal pieces against DCCL_NET_LANE_BALANCE=1, interleaved, ROUNDS rounds.
# usage: run.sh BUILD OUT [ROUNDS]
set -eu
build=$1 out=$2 rounds=${3:-3}
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$out"
for r in $(seq 1 "$rounds"); do
  for v in equal balance; do
    bal=0; [ $v = balance ] && bal=1
    for op in all_reduce all_gather; do
      "$build/tools/dccl-run" --hosts 2 -n 2 --rails 2 --rate 1gbit --timeout 300 --no-prefix \
        --env DCCL_TRUST_NETWORK=1 --env DCCL_NET_SOCK_BYTES=0 --env DCCL_NET_FLOWS=1 \
        --env DCCL_NET_LANE_BALANCE=$bal \
        "$here/degrade.sh" 250mbit "$build/tools/dccl-perf" $op -b 16M -e 16M -n 10 -w 3 \
        > "$out/$v-$op-$r.txt" 2>&1
      t=$(awk '$1 == 16777216 {print $6}' "$out/$v-$op-$r.txt" | head -1)
      echo "round $r $v $op 16MiB ${t:-?} us"
    done
  done
done
