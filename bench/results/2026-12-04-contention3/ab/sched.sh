#!/bin/bash
# usage: sched.sh BUILD_TOOLS SIZE ITERS K [extra env...]
M=$1; SZ=$2; N=$3; K=$4; shift 4
envs=(); for e in "$@"; do envs+=(--env "$e"); done
sp=(); for i in $(seq 1 $K); do python3 -c 'while True: pass' & sp+=($!); done; sleep 0.5
$M/dccl-run -n 2 "${envs[@]}" $M/dccl-perf all_reduce -b $SZ -e $SZ -n $N -w 2 -z 1 -c 0 > /tmp/busy/out.$$ 2>&1 &
L=$!
sleep 1.5
for p in $(pgrep -P $L dccl-perf; pgrep -f "dccl-perf all_reduce -b $SZ" ); do :; done
pids=$(pgrep -f "^$M/dccl-perf all_reduce -b $SZ")
declare -A a
for p in $pids; do for t in /proc/$p/task/*; do a[$t]="$(cat $t/schedstat) $(grep ctxt $t/status | awk '{print $2}' | tr '\n' ' ')"; done; done
sleep 2
for p in $pids; do for t in /proc/$p/task/*; do b="$(cat $t/schedstat 2>/dev/null) $(grep ctxt $t/status 2>/dev/null| awk '{print $2}' | tr '\n' ' ')"; echo "$t $(cat $t/comm) before: ${a[$t]} after: $b"; done; done
wait $L
for s in "${sp[@]}"; do kill $s; done; wait 2>/dev/null
grep -E "^\[0\] +[0-9]" /tmp/busy/out.$$; rm -f /tmp/busy/out.$$
