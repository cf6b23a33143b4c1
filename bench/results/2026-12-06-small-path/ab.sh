#!/bin/bash
# ab.sh SIZE ITERS REPS: interleaved launches of 9c2cea2 (build-prof, the tree before
# these changes), this tree (build-werror) and Open MPI (vader); 2 ranks, shm;
# prints out-of-place/in-place µs per call.
s=$1; it=$2; reps=$3
P=/work/main/build-prof; M=/work/main/build-werror; C=/work/main/build-compare
d(){ $1/tools/dccl-run -n 2 --env DCCL_PROVIDER=shm $1/tools/dccl-perf all_reduce -b $s -e $s -n $it -w 200 -c 0 -z 1 2>&1 | awk -v s=$s '$2==s {print $7"/"$11}'; }
for r in $(seq $reps); do
  p=$(d $P); a=$(d $M)
  c=$(mpirun.openmpi --allow-run-as-root --oversubscribe -np 2 --mca pml ob1 --mca btl vader,self $C/bench/ompi-perf all_reduce -b $s -e $s -n $it -w 200 -c 0 2>&1 | awk -v s=$s '$1==s {print $6"/"$10}')
  echo "$s 9c2cea2 $p after $a ompi $c"
done
