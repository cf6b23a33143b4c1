#!/bin/bash
# DCCL_NET_FLOWS side by side on the emulated leaf-spine fabric: 4 hosts x 1 rank,
# 2 leaves, 2 spines, links at 1gbit, a per-flow cap of 250mbit (a quarter).
# Rounds alternate the settings (0: the automatic default). Prints one line per run:
# "FLOWS COLL BYTES time_us busbw_GBps round load", rank 0's out-of-place row of dccl-perf.
# usage: run.sh BUILD_DIR ROUNDS "FLOWS..." (root)
b=${1:-build} rounds=${2:-3} set=${3:-"1 0"}
fab="--hosts 4 -n 4 --fabric --leaves 2 --spines 2 --rate 1gbit --flow-rate 250mbit"
for r in $(seq 1 "$rounds"); do
  for f in $set; do
    for job in "all_reduce 16M 5" "all_gather 16M 5" "all_reduce 8 500"; do
      set -- $job
      row=$("$b/tools/dccl-run" $fab --env DCCL_NET_FLOWS=$f "$b/tools/dccl-perf" "$1" -b "$2" -e "$2" -n "$3" -w 5 2>&1 |
        grep -E '^\[0\] +[0-9]+ ' | tail -1)
      # [0] size count type redop root time algbw busbw #wrong ...
      echo "$f $1 $2 $(echo "$row" | awk '{ print $7, $9 }') round=$r load=$(cut -d' ' -f1 /proc/loadavg)"
    done
  done
done
