#!/bin/bash
# The flight recorder's signal dumps on one host, 2 ranks: SIGUSR2 makes each rank
# write its ring (reason "on demand (SIGUSR2)", its newest calls: as many as
# DCCL_RECORDER); a SIGSEGV in rank 1 makes it write its ring before it dies with
# the signal's default action (exit status 139 seen by dccl-run).
# usage: recorder_signals_check.sh BUILD_DIR
set -u
build=$1
dir=$(mktemp -d)
trap 'touch "$dir/done"; rm -rf "$dir"' EXIT
mkdir "$dir/d"
fail() { echo "FAIL: $*"; cat "$dir/log" 2>/dev/null | tail -20; exit 1; }
DCCL_TIMEOUT_S=5 DCCL_RECORDER=64 DCCL_RECORDER_DIR="$dir/d" timeout 60 "$build/tools/dccl-run" -n 2 \
  "$build/tests/multihost/trace_rank" "$dir" 16 > "$dir/log" 2>&1 &
run=$!
for i in $(seq 1 300); do [ -e "$dir/ready.0" ] && [ -e "$dir/ready.1" ] && break; sleep 0.1; done
[ -e "$dir/ready.1" ] || fail "the ranks did not start"
kill -USR2 "$(cat "$dir/pid.0")" "$(cat "$dir/pid.1")"
for r in 0 1; do
  f=$(ls "$dir"/d/dccl-rec.*.r$r.jsonl 2>/dev/null)
  for i in $(seq 1 50); do [ -n "$f" ] && break; sleep 0.1; f=$(ls "$dir"/d/dccl-rec.*.r$r.jsonl 2>/dev/null); done
  [ -n "$f" ] || fail "rank $r wrote no dump on SIGUSR2"
  python3 - "$f" "$r" <<'PY' || fail "rank $r's SIGUSR2 dump"
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1])]
h, calls = lines[0], lines[1:]
assert h["header"] == 1 and h["rank"] == int(sys.argv[2]) and h["reason"] == "on demand (SIGUSR2)", h
# DCCL_RECORDER=64: the newest 64 calls.
assert len(calls) == 64 and h["calls"] > 64, (len(calls), h["calls"])
seqs = [c["seq"] for c in calls]
assert seqs == list(range(seqs[0], seqs[0] + 64)), seqs
assert all(c["coll"] == "all_reduce" and c["count"] == 16 and c["tag"] == "trace" for c in calls)
PY
done
kill -SEGV "$(cat "$dir/pid.1")"
wait $run
for i in $(seq 1 20); do grep -q SIGSEGV "$dir"/d/dccl-rec.*.r1.jsonl 2>/dev/null && break; sleep 0.1; done
head -1 "$dir"/d/dccl-rec.*.r1.jsonl | grep -q '"reason":"signal SIGSEGV"' || fail "rank 1 wrote no dump on SIGSEGV"
grep -q "rank 1 failed first (exit status 139)" "$dir/log" || fail "rank 1 did not die of its SIGSEGV"
echo "SIGUSR2: both ranks dumped their newest 64 calls; SIGSEGV: rank 1 dumped, then died of it"
