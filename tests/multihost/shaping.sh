#!/bin/bash
# --rate shapes the links: a 2-host allreduce of 4 MiB (ring: each rank sends
# 4 MiB over its link) cannot beat 100 Mbit/s, so it takes at least
# 4 MiB / 12.5 MB/s = 335 ms; 300 ms leaves room for tbf's 16 KiB bursts.
# Results are checked by dccl-perf (0 wrong).
# usage: shaping.sh DCCL_RUN DCCL_PERF. Exit 77 (skipped) where hosts cannot be emulated.
. "$(dirname "$0")/lib.sh"
need_emulation
run=$1 perf=$2
out=$("$run" --hosts 2 -n 2 --rate 100mbit --timeout 100 "$perf" all_reduce -b 4M -e 4M -n 2 -w 1 2>&1) ||
  { echo "$out"; fail "the job exited with $?"; }
echo "$out"
# [0] size count type redop root time algbw busbw #wrong time algbw busbw #wrong
row=$(echo "$out" | awk '$1 == "[0]" && $2 == 4194304 && $4 == "float"')
[ -n "$row" ] || fail "no 4 MiB row in dccl-perf's output"
echo "$row" | awk '{ exit !($7 >= 300000 && $11 >= 300000 && $10 == 0 && $14 == 0) }' ||
  fail "4 MiB allreduce at 100mbit took $(echo "$row" | awk '{print $7 " and " $11}') us (expected >= 300000, 0 wrong)"
echo "OK: 4 MiB allreduce over 100mbit links: $(echo "$row" | awk '{print $7 " and " $11}') us"
