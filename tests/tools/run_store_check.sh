#!/bin/bash
# dccl-run's store on the job's DCCL_ADDR and DCCL_SECRET (given with --env): an
# observer reaches it with the same address and secret (dccl-info --job lists both
# ranks in a call, and names no culprit in this healthy job; a namespace with no communicator
# and a wrong secret are named, without calling the observer rank 0); a secret that is not 32
# hex digits fails before any rank starts.
# usage: run_store_check.sh BUILD_DIR
set -u
build=$1
dir=$(mktemp -d)
trap 'kill $pid 2>/dev/null; wait $pid 2>/dev/null; rm -rf "$dir"' EXIT
fail() { echo "FAIL: $*"; tail -20 "$dir/log" 2>/dev/null; exit 1; }
secret=$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')
addr=127.0.0.1:$((20000 + RANDOM % 20000))
timeout 60 "$build/tools/dccl-run" -n 2 --env DCCL_ADDR=$addr --env DCCL_SECRET=$secret --env DCCL_STATUS_MS=200 \
  "$build/tools/dccl-perf" all_reduce -b 8 -e 8 -n 100000000 > "$dir/log" 2>&1 &
pid=$!
ok=
for i in $(seq 1 50); do
  sleep 0.2
  "$build/tools/dccl-info" --job "$addr" --secret "$secret" > "$dir/job" 2>&1 || continue
  [ "$(grep -c ' in call ' "$dir/job")" = 2 ] && ok=1 && break
done
[ -n "$ok" ] || { cat "$dir/job"; fail "dccl-info --job $addr did not list both ranks in a call"; }
# A healthy job has no culprit, though its records catch ranks calls apart or between calls.
for i in 1 2 3 4 5; do
  "$build/tools/dccl-info" --job "$addr" --secret "$secret" --json > "$dir/json" 2>&1 || fail "dccl-info --job --json"
  grep -q '"culprit":null' "$dir/json" || { cat "$dir/json"; fail "a culprit named in a healthy job"; }
  sleep 0.3
done
# A namespace with no communicator is named so; the observer is not called "rank 0".
"$build/tools/dccl-info" --job "$addr" --secret "$secret" --ns nosuch > "$dir/ns" 2>&1 && fail "--ns nosuch succeeded"
grep -q "has no communicator there: namespace 'nosuch': no communicator" "$dir/ns" || { cat "$dir/ns"; fail "--ns nosuch not named"; }
grep -q "DCCL_STATUS_MS\|rank 0: " "$dir/ns" && { cat "$dir/ns"; fail "--ns nosuch blamed DCCL_STATUS_MS or named rank 0"; }
"$build/tools/dccl-info" --job "$addr" --secret 0123456789abcdef0123456789abcdef > "$dir/sec" 2>&1 && fail "a wrong secret succeeded"
grep -q "with this secret: " "$dir/sec" && ! grep -q "secret: rank 0: " "$dir/sec" || { cat "$dir/sec"; fail "a wrong secret: the observer named rank 0"; }
kill $pid
wait $pid
"$build/tools/dccl-run" -n 2 --env DCCL_ADDR=$addr --env DCCL_SECRET=xyz true > "$dir/log" 2>&1 && fail "a bad secret ran"
grep -q "cannot start the rendezvous store: parse job secret: expected 32 hex digits" "$dir/log" ||
  fail "a bad secret was not named"
echo "the store took the job's address and secret; dccl-info --job found both ranks; a bad secret was refused"
