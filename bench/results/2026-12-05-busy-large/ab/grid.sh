#!/bin/bash
# grid.sh OUT K NR REPS label=kind ...: ab.py --perf at 8 B, 64 KiB, 1 MiB, 16 MiB, 64 MiB
out=$1 K=$2 NR=$3 R=$4; shift 4
d=$(dirname "$0")
for s in "8 2000" "65536 500" "1M 100" "16M 20" "64M 5"; do set -- $s "$@"
  "$d/ab.py" --perf $K $1 $2 $R $NR "${@:3}" | tee -a "$out"; shift 2
done
