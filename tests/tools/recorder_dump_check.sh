#!/bin/bash
# The flight recorder's size and dcclCommDumpRecorder's folder, 2 ranks, 8 calls:
# DCCL_RECORDER=5 dumps the newest 5 calls, DCCL_RECORDER=1 the newest one (the
# ring kept one fewer); a folder given to dcclCommDumpRecorder that does not exist
# is made, parents too (it used to fail); one that cannot be made (under a regular
# file) fails naming the folder and the cause.
# usage: recorder_dump_check.sh BUILD_DIR HANG_RANK
set -u
build=$1 rank_prog=$2
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
fail() { echo "FAIL: $*"; tail -20 "$dir/log" 2>/dev/null; exit 1; }
run() {  # run RECORDER DUMP_DIR: rank 0 dumps to DUMP_DIR after 8 calls; output in $dir/log
  DCCL_RECORDER=$1 ITERS=8 timeout 60 "$build/tools/dccl-run" -n 2 --timeout 40 "$rank_prog" dump "$2" \
    > "$dir/log" 2>&1 || fail "the ranks failed (DCCL_RECORDER=$1, folder $2)"
}
for cap in 5 1; do
  out="$dir/new$cap/a/b"
  run $cap "$out"
  grep -q "^\[0\] dump: ok" "$dir/log" || fail "DCCL_RECORDER=$cap: dcclCommDumpRecorder into a folder to make failed"
  f=$(ls "$out"/dccl-rec.*.r0.jsonl 2>/dev/null)
  [ -n "$f" ] || fail "DCCL_RECORDER=$cap: no dump in $out"
  python3 - "$f" "$cap" <<'PY' || fail "DCCL_RECORDER=$cap: the dump"
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1])]
cap, calls = int(sys.argv[2]), lines[1:]
assert lines[0]["capacity"] == cap, lines[0]
assert len(calls) == cap, "%d calls kept, DCCL_RECORDER=%d" % (len(calls), cap)
seqs = [c["seq"] for c in calls]
assert seqs == list(range(8 - cap, 8)) and all(c["coll"] == "all_reduce" for c in calls), seqs
PY
done
touch "$dir/file"
run 5 "$dir/file/dumps"
grep -q "^\[0\] dump: .*could not write to $dir/file/dumps: Not a directory" "$dir/log" ||
  fail "a folder that cannot be made: no error naming it and the cause"
echo "DCCL_RECORDER=5 and 1 dump 5 and 1 calls; a missing folder is made; an impossible one is named"
