#!/bin/bash
# The flight recorder across 3 emulated hosts, one rank each; rank 2 (host dccl-h2)
# is the culprit. After the ranks' first 20 allreduces:
#   stop     rank 2 is stopped (SIGSTOP): it never enters the next call
#   count    rank 2 calls its next allreduce with another count
#   slow     host 2's link is shaped to a fraction of the others' (tc), then every rank dumps
#   kill     rank 2 is killed (SIGKILL)
#   linkcut  host 2's interface is taken down
# In every mode dccl-trace --json on the dumps names rank 2, its host and the call;
# in the hangs (all but slow), dccl-info --job --json during the hang names rank 2 too.
# usage: trace.sh MODE DCCL_RUN TRACE_RANK DCCL_TRACE DCCL_INFO
. "$(dirname "$0")/lib.sh"
need_emulation
mode=$1 run=$2 prog=$3 trace=$4 info=$5
timeout_s=3 count=1024 args=()
case $mode in
  stop|kill|linkcut) ;;
  count) args=(--culprit 2 --bad-count 2048) ;;
  slow) count=65536 args=(--calls 40 --dump) ;;
  *) fail "unknown mode $mode" ;;
esac
dir=$(mktemp -d)
trap '[ -n "$KEEP" ] || rm -rf "$dir"' EXIT
mkdir "$dir/dumps"
secret=$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')
addr="198.18.0.1:$((20000 + RANDOM % 20000))"
"$run" --hosts 3 -n 3 --keep-going --timeout 90 --env DCCL_TIMEOUT_S=$timeout_s --env DCCL_STATUS_MS=200 \
  --env "DCCL_RECORDER_DIR=$dir/dumps" --env DCCL_ID= --env "DCCL_ADDR=$addr" --env "DCCL_SECRET=$secret" \
  "$prog" "$dir" $count "${args[@]}" > "$dir/log" 2>&1 &
pid=$!
if ! wait_for "$dir/ready.*" 3 60; then
  kill -TERM $pid; wait $pid; cat "$dir/log"; fail "the ranks did not start within 60 s"
fi
ns2="dccl-$pid-h2"
case $mode in
  stop) kill -STOP "$(cat "$dir/pid.2")" ;;
  kill) kill -KILL "$(cat "$dir/pid.2")" ;;
  linkcut) ip netns exec "$ns2" ip link set eth0 down || fail "could not take host 2's link down" ;;
  count) touch "$dir/go" ;;
  slow) ip netns exec "$ns2" tc qdisc replace dev eth0 root tbf rate 20mbit burst 32kbit latency 400ms ||
          fail "could not shape host 2's link"
        touch "$dir/go" ;;
esac
check() {  # check WHAT JSON_FILE PYTHON_EXPR_FOR_THE_CULPRIT
  python3 - "$2" "$3" "$1" <<'PY' || { cat "$2"; return 1; }
import json, sys
path, expr, what = sys.argv[1:]
doc = json.load(open(path))
c = eval(expr)
ok = c is not None and c["rank"] == 2 and c["host"] == "dccl-h2" and "all_reduce" in c["call"]
print("%s: culprit %s" % (what, json.dumps(c)))
sys.exit(0 if ok else 1)
PY
}
ok=1
if [ "$mode" != slow ]; then
  # The live view while the others wait (before their timeout ends the call).
  sleep 1.5
  ip netns exec dccl-$pid-h0 "$info" --job "$addr" --secret "$secret" --stale-s 1 || true  # the table, for the log
  ip netns exec dccl-$pid-h0 "$info" --job "$addr" --secret "$secret" --json --stale-s 1 > "$dir/live.json" 2>&1 ||
    { cat "$dir/live.json"; ok=0; }
  [ $ok = 1 ] && { check "live view" "$dir/live.json" 'doc["culprit"]' || ok=0; }
  wait_for "$dir/result.[01]" 2 $((timeout_s + 20)) || { ok=0; echo "ranks 0 and 1 did not fail"; }
else
  wait_for "$dir/result.*" 3 60 || { ok=0; echo "the ranks did not finish their calls"; }
fi
touch "$dir/done"
[ "$mode" = stop ] && kill -KILL "$(cat "$dir/pid.2")"
wait_for "$dir/dumps/*.r0.jsonl" 1 10 || true
wait $pid
"$trace" --json "$dir/dumps" > "$dir/trace.json" 2> "$dir/trace.err" || { cat "$dir/trace.err"; ok=0; }
"$trace" "$dir/dumps" || ok=0
[ $ok = 1 ] && { check "dccl-trace" "$dir/trace.json" 'doc[0]["culprit"]' || ok=0; }
[ -z "$(left_of $pid)" ] || fail "namespaces left: $(left_of $pid)"
[ $ok = 1 ] || { sed -n '1,60p' "$dir/log"; ls -la "$dir" "$dir/dumps"; fail "$mode: the culprit was not named"; }
echo "$mode: dccl-trace and the live view name rank 2 on dccl-h2"
