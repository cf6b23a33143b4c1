#!/bin/bash
# Connection flood (2 emulated hosts x 2 ranks): flooders that never introduce
# themselves (flood.py) hold up to PER connections to every TCP port any rank
# listens on, as the ports come and go: one on an attacker host on the same switch
# (198.18.0.200, its own namespace), one on ranks 0 and 1's host (whose address the
# ranks on the other host expect connections from). Meanwhile every rank, ITERS
# times, allreduces, splits, allreduces on the child and destroys it, and makes a
# new communicator of all ranks from a unique id that rank 0 joins a second late
# (flood_rank.cc). Every result must equal the float64 reference, every split and
# init succeed, and no rank's open files grow by more than FD_BOUND above what it
# had after init (resident memory by more than RSS_BOUND_KIB). Before the data
# plane's limits, a rank's libfabric and socket-path listeners took the flood:
# 169 more open files, 170 MB more memory.
# usage: flood.sh DCCL_RUN FLOOD_RANK FLOOD_PY
# Exit 77 (skipped) where hosts cannot be emulated.
. "$(dirname "$0")/lib.sh"
need_emulation
command -v python3 >/dev/null || skip "the flooder needs python3"
run=$1 prog=$2 flood=$3
iters=4 per=300 fd_bound=96 rss_bound_kib=$((64 * 1024))
dir=$(mktemp -d)
atk=dcclatk-$$
cleanup() {
  touch "$dir/stop"
  [ -n "$watcher" ] && { kill "$watcher" 2>/dev/null; wait "$watcher" 2>/dev/null; }
  for f in "${flooders[@]}"; do kill "$f" 2>/dev/null; wait "$f" 2>/dev/null; done
  ip netns del "$atk" 2>/dev/null
  rm -rf "$dir"
}
trap cleanup EXIT
"$run" --hosts 2 -n 4 --keep-going --timeout 200 --env DCCL_TIMEOUT_S=30 --env DCCL_DEBUG=INFO "$prog" "$dir" $iters >"$dir/log" 2>&1 &
pid=$!
wait_for "$dir/pid.*" 4 60 || { kill -TERM $pid; wait $pid; cat "$dir/log"; fail "the ranks did not start"; }
pids=$(cat "$dir"/pid.* | paste -sd'|')
# The attacker host: a namespace on the job's switch (bridge br0 in dccl-<pid>-sw).
ip netns add "$atk" || fail "cannot create namespace $atk"
ip -n "$atk" link add eth0 type veth peer name atk$$ netns "dccl-$pid-sw" &&
  ip -n "dccl-$pid-sw" link set atk$$ master br0 up &&
  ip -n "$atk" addr add 198.18.0.200/24 dev eth0 && ip -n "$atk" link set eth0 up && ip -n "$atk" link set lo up ||
  fail "cannot attach the attacker host to the switch"
# The sub-communicators' rendezvous stores ("bootstrap store listening on ...
# (advertised as IP:PORT)") are left out: they are the bootstrap's, with limits of
# their own (docs/reliability.md); this test is about the data plane.
listening() {
  grep -ho "advertised as [0-9.]*:[0-9]*" "$dir/log" | awk '{print $3}' >"$dir/stores"
  for h in 0 1; do ip netns exec "dccl-$pid-h$h" ss -ltnpH 2>/dev/null; done |
    grep -E "pid=($pids)," | awk '{print $4}' | grep -vxF -f "$dir/stores"
}
flooders=()
# Every listening port of the ranks, rewritten every 20 ms for flood.py: PER silent
# connections to each. A port is a target from its second sighting on, so that a
# store's log line (written as it starts listening) has arrived by then.
touch "$dir/prev"
(
  while [ ! -e "$dir/stop" ]; do
    listening >"$dir/now"
    grep -xF -f "$dir/prev" "$dir/now" | grep -vxF -f "$dir/stores" >"$dir/targets.tmp"
    mv "$dir/now" "$dir/prev"
    cat "$dir/targets.tmp" >>"$dir/seen"
    mv "$dir/targets.tmp" "$dir/targets"
    sleep 0.02
  done
) &
watcher=$!
ip netns exec "$atk" python3 "$flood" "$dir/targets" $per 300 "$dir/stop" >>"$dir/flood" 2>&1 &
flooders+=($!)
ip netns exec "dccl-$pid-h0" python3 "$flood" "$dir/targets" $per 300 "$dir/stop" >>"$dir/flood" 2>&1 &
flooders+=($!)
sleep 2  # the flooders are connecting before the ranks go on
touch "$dir/go"
wait $pid
rc=$?
touch "$dir/stop"
for f in "${flooders[@]}"; do wait "$f" 2>/dev/null; done
flooders=()
cat "$dir/flood" 2>/dev/null
echo "ports flooded: $(sort -u "$dir/seen" 2>/dev/null | wc -l)"
[ $rc -eq 0 ] || { grep -v " DCCL INFO " "$dir/log" | tail -30; }
bad=0
for r in 0 1 2 3; do
  res=$(cat "$dir/result.$r" 2>/dev/null || echo "no result")
  echo "rank $r: $res"
  set -- $res
  if [ "$1" != ok ]; then bad=1; continue; fi
  [ "$2" -le $fd_bound ] && [ "$3" -le $fd_bound ] ||
    { echo "FAIL: rank $r's open files grew by $2 (child alive) / $3 (after), bound $fd_bound"; bad=1; }
  [ "$4" -le $rss_bound_kib ] || { echo "FAIL: rank $r's resident memory grew by $4 KiB"; bad=1; }
done
[ -z "$(left_of $pid)" ] || fail "namespaces left: $(left_of $pid)"
[ $bad -eq 0 ] || fail "the flood changed a result, a split, or a rank's resources beyond the bounds"
echo "OK: $iters splits and checked allreduces per rank under the flood; open files and memory bounded"
