#!/bin/bash
# usage: busy-ab.sh BUILD K NP ROUNDS sizes-args -- modes...
B=$1; K=$2; NP=$3; R=$4; shift 4
pids=()
for i in $(seq 1 $K); do python3 -c 'while True: pass' & pids+=($!); done
sleep 0.3
for r in $(seq 1 $R); do for m in "$@"; do
  out=$(timeout 120 $B/tools/dccl-run -n $NP ${PENV:---env DCCL_PROVIDER=tcp --env DCCL_SMEM_BYTES=0 --env DCCL_SMEM_CHUNK_BYTES=0} --env DCCL_XMODE=$m $B/tools/dccl-perf all_reduce ${SZ:--b 8 -e 1M -f 128} -n ${ITERS:-100} -w 5 -z 1 2>&1 | grep -E "^\[0\] *[0-9]" | awk '{printf "%s:%s ", $2, $7}')
  echo "K=$K r=$r mode=$m $out"
done; done
for p in "${pids[@]}"; do kill $p; done; wait 2>/dev/null
