#!/bin/bash
# cs.sh K REPS: context switches and futex-backed sleeps per 16 MiB call, main vs wide steps, 2 ranks shm
K=$1; R=$2; M=/work/main/build/tools; B=/work/wt-busy/build/tools
sp=(); for i in $(seq 1 $K); do python3 -c 'while True: pass' & sp+=($!); done; sleep 0.5
for rep in $(seq 1 $R); do for cfg in "main $M" "wide $B"; do set -- $cfg
  perf stat -x, -e context-switches,task-clock -o /tmp/busy/ps.$1 $2/dccl-run -n 2 --env DCCL_PROVIDER=shm $2/dccl-perf all_reduce -b 16M -e 16M -n 40 -w 2 -z 1 -c 0 > /tmp/busy/o.$1 2>&1
  t=$(grep -E "^\[0\] +[0-9]" /tmp/busy/o.$1 | awk '{print $7}')
  echo "$1 time_us $t cs $(grep context-switches /tmp/busy/ps.$1 | cut -d, -f1) task_ms $(grep task-clock /tmp/busy/ps.$1 | cut -d, -f1)"
done; done
for s in "${sp[@]}"; do kill $s; done; wait 2>/dev/null
