#!/bin/bash
# 8-byte allreduce on 2 ranks of one host (smem), blocking calls, the flight
# recorder on (DCCL_RECORDER=512) and off (0) in alternating launches.
# usage: perf_pairs.sh BUILD_DIR PAIRS   prints: pair rec out_of_place_us in_place_us
build=$1 pairs=${2:-20}
for i in $(seq 1 "$pairs"); do
  for rec in 512 0; do
    t=$(DCCL_RECORDER=$rec timeout 120 "$build/tools/dccl-run" -n 2 "$build/tools/dccl-perf" all_reduce -b 8 -e 8 \
          -n 20000 -w 500 -z 1 2>&1 | awk '$1=="[0]" && $2=="8" {print $7, $11}')
    echo "$i $rec $t"
  done
done
