#!/bin/bash
# small3.sh SIZE ITERS REPS: interleaved before (2e367b1) / after (HEAD) / prebusy (5968274) / Open MPI; 2 ranks shm; out-of-place/in-place us
s=$1; it=$2; reps=$3
A=/work/cmp/head0/build; M=/work/main/build-werror; P=/work/cmp/prebusy/build
d(){ $1/tools/dccl-run -n 2 --env DCCL_PROVIDER=shm $1/tools/dccl-perf all_reduce -b $s -e $s -n $it -w 200 -c 0 -z 1 2>&1 | awk -v s=$s '$2==s {print $7"/"$11}'; }
for r in $(seq $reps); do
  a=$(d $A); b=$(d $M); p=$(d $P)
  c=$(mpirun.openmpi --allow-run-as-root --oversubscribe -np 2 --mca pml ob1 --mca btl vader,self $M/bench/ompi-perf all_reduce -b $s -e $s -n $it -w 200 -c 0 2>&1 | awk -v s=$s '$1==s {print $6"/"$10}')
  echo "$s before $a after $b prebusy $p ompi $c"
done
