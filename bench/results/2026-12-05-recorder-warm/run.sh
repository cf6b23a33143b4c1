#!/bin/bash
# The flight recorder's ring warm or cold: 2 ranks on one host, shared memory,
# blocking float32 allreduce, 8 B and 1 KiB, out of place and in place; a short
# loop (200 calls after 20 warm-up, as bench/contention's) and a long one (20,000
# after 2,000). Builds side by side, interleaved, ROUNDS rounds, Open MPI beside.
# usage: run.sh BASE_BUILD NEW_BUILD OMPI_PERF OUT [ROUNDS]
set -u
base=$1 new=$2 ompi=$3 out=$4 rounds=${5:-5}
mkdir -p "$out"
for r in $(seq 1 "$rounds"); do
  for loop in "200 20" "20000 2000"; do
    set -- $loop
    n=$1 w=$2
    for v in base new recorder-off ompi; do
      f="$out/$v-n$n-r$r.txt"
      case $v in
        base) DCCL_PROVIDER=shm "$base/tools/dccl-run" -n 2 "$base/tools/dccl-perf" all_reduce -b 8 -e 1K -f 128 -n $n -w $w -z 1 -c 1 >"$f" 2>&1 ;;
        new) DCCL_PROVIDER=shm "$new/tools/dccl-run" -n 2 "$new/tools/dccl-perf" all_reduce -b 8 -e 1K -f 128 -n $n -w $w -z 1 -c 1 >"$f" 2>&1 ;;
        recorder-off) DCCL_RECORDER=0 DCCL_PROVIDER=shm "$new/tools/dccl-run" -n 2 "$new/tools/dccl-perf" all_reduce -b 8 -e 1K -f 128 -n $n -w $w -z 1 -c 1 >"$f" 2>&1 ;;
        ompi) mpirun.openmpi --allow-run-as-root --oversubscribe -np 2 --mca pml ob1 --mca btl vader,self "$ompi" all_reduce -b 8 -e 1K -f 128 -n $n -w $w -c 1 >"$f" 2>&1 ;;
      esac
    done
  done
done
# Median per (variant, loop, size): out-of-place and in-place time, us.
for v in base new recorder-off ompi; do
  for n in 200 20000; do
    for s in 8 1024; do
      oop=$(cat "$out"/$v-n$n-r*.txt | sed 's/^\[0\] *//' | awk -v s=$s '$1 == s && $2 ~ /^[0-9]+$/ {print $6}' | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}')
      inp=$(cat "$out"/$v-n$n-r*.txt | sed 's/^\[0\] *//' | awk -v s=$s '$1 == s && $2 ~ /^[0-9]+$/ {print $10}' | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}')
      echo "$v calls=$n size=$s out-of-place $oop us, in-place $inp us"
    done
  done
done
