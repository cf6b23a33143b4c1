#!/bin/bash
# DCCL_RECORDER_DIR that does not exist yet: init makes it (parents too) and the
# ranks' failure dumps land in it (rank 1 calls with another count: both fail and
# dump). One that cannot be made (under a regular file): every rank warns at init,
# naming the setting and the cause, and runs on.
# usage: recorder_dir_check.sh BUILD_DIR
set -u
build=$1
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
fail() { echo "FAIL: $*"; tail -20 "$dir/log" 2>/dev/null; exit 1; }
run() {  # run OUT_DIR RECORDER_DIR ARGS...: the ranks in the background, their log in $dir/log
  local out=$1 rec=$2
  shift 2
  mkdir -p "$out"
  DCCL_TIMEOUT_S=5 DCCL_RECORDER=64 DCCL_RECORDER_DIR="$rec" timeout 60 "$build/tools/dccl-run" -n 2 \
    "$build/tests/multihost/trace_rank" "$out" 16 "$@" > "$dir/log" 2>&1 &
  pid=$!
  for i in $(seq 1 300); do [ -e "$out/ready.0" ] && [ -e "$out/ready.1" ] && break; sleep 0.1; done
  [ -e "$out/ready.1" ] || fail "the ranks did not start"
}
run "$dir/a" "$dir/new/dumps" --culprit 1 --bad-count 8
touch "$dir/a/go"
for i in $(seq 1 200); do [ -e "$dir/a/result.0" ] && [ -e "$dir/a/result.1" ] && break; sleep 0.1; done
touch "$dir/a/done"  # the failed ranks stay until then
wait $pid
for r in 0 1; do
  f=$(ls "$dir"/new/dumps/dccl-rec.*.r$r.jsonl 2>/dev/null)
  [ -n "$f" ] || fail "rank $r wrote no dump into the folder init made"
  head -1 "$f" | grep -q '"reason":"failure: ' || fail "rank $r's dump is not its failure's: $(head -c 300 "$f")"
done
touch "$dir/file"
run "$dir/b" "$dir/file/dumps" --calls 30
touch "$dir/b/go"
wait $pid || fail "the ranks failed with a folder that cannot be made"
for r in 0 1; do
  grep -q "rank $r: DCCL_RECORDER_DIR=$dir/file/dumps: cannot make the folder $dir/file/dumps: Not a directory" "$dir/log" ||
    fail "rank $r did not warn about the folder it cannot make"
done
echo "a missing folder is made and takes both failure dumps; one that cannot be made is named by every rank at init"
