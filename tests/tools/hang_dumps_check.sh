#!/bin/bash
# Every surviving rank's flight-recorder dump under dccl-run, and dccl-trace on them:
# 1. RUNS (default 10) hangs of 4 ranks: rank 2 sleeps in call 20, the others time
#    out (DCCL_TIMEOUT_S=2) and exit 3; dccl-run ends the job when the first one
#    exits. Each run must leave all 4 dumps, whole, and dccl-trace must name rank 2.
#    (dccl-run used to SIGTERM the others at once, cutting off some ranks' dumps.)
# 2. Rank 2 of 4 killed (SIGKILL) in call 20: the other 3 leave their dumps and
#    dccl-trace names rank 2. A copy of rank 1's dump cut short (3000 bytes, mid-line):
#    dccl-trace warns naming the file and rank 1, and still names rank 2, never
#    rank 1 as "not entered".
# usage: hang_dumps_check.sh BUILD_DIR SOURCE_DIR HANG_RANK [RUNS]
set -u
build=$1 src=$2 rank_prog=$3 runs=${4:-10}
trace="$src/tools/dccl-trace/dccl-trace"
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
fail() { echo "FAIL: $*"; tail -20 "$dir/log" 2>/dev/null; exit 1; }
job() {  # job DUMP_DIR MODE ARGS...: 4 ranks, their output in $dir/log
  local d=$1
  shift
  timeout 60 "$build/tools/dccl-run" -n 4 --timeout 40 --env DCCL_TIMEOUT_S=2 --env DCCL_SEGMENT_BYTES=0 \
    --env DCCL_SEGMENT_CHUNK_BYTES=0 --env DCCL_RECORDER_DIR="$d" "$rank_prog" "$@" > "$dir/log" 2>&1
}
# whole DUMP_DIR RANKS...: each rank's dump is there and every line of it is JSON
whole() {
  python3 - "$@" <<'PY'
import glob, json, sys
d, ranks = sys.argv[1], sys.argv[2:]
for r in ranks:
    f = glob.glob("%s/dccl-rec.*.r%s.jsonl" % (d, r))
    if not f:
        sys.exit("rank %s left no dump in %s" % (r, d))
    lines = open(f[0]).read().splitlines()
    for l in lines:
        json.loads(l)
    assert lines and json.loads(lines[0])["header"] == 1 and len(lines) > 1, f[0]
PY
}
culprit() {  # culprit DUMP_DIR: "rank kind" of dccl-trace's culprit; its stderr in $dir/trace.err
  python3 "$trace" --json "$1" 2> "$dir/trace.err" |
    python3 -c 'import json,sys; c=json.load(sys.stdin)[0]["culprit"]; print(c["rank"], c["kind"]) if c else print("none")'
}

for i in $(seq 1 "$runs"); do
  d="$dir/sleep$i"
  job "$d" sleep 6
  rc=$?
  [ $rc -eq 3 ] || fail "run $i: dccl-run exited $rc, expected 3 (the first rank's time-out)"
  why=$(whole "$d" 0 1 2 3 2>&1) || fail "run $i: $why"
  c=$(culprit "$d")
  [ "${c%% *}" = 2 ] || fail "run $i: dccl-trace named '$c', expected rank 2"
done
echo "$runs hangs: every rank's dump whole each time, rank 2 named"

d="$dir/kill"
job "$d" kill
rc=$?
[ $rc -eq 137 ] || [ $rc -eq 3 ] || fail "kill: dccl-run exited $rc, expected 137 (rank 2's SIGKILL) or 3"
why=$(whole "$d" 0 1 3 2>&1) || fail "kill: $why"
[ "$(culprit "$d")" = "2 no dump" ] || fail "kill: dccl-trace named '$(culprit "$d")', expected rank 2 (no dump)"
mkdir "$dir/torn"
for f in "$d"/dccl-rec.*.jsonl; do cp "$f" "$dir/torn/"; done
r1=$(ls "$dir"/torn/dccl-rec.*.r1.jsonl)
head -c 3000 "$d/$(basename "$r1")" > "$r1"
[ "$(tail -c 1 "$r1" | od -An -c | tr -d ' ')" != '\n' ] || fail "the cut landed on a line's end"
c=$(culprit "$dir/torn")
[ "$c" = "2 no dump" ] || fail "torn: dccl-trace named '$c', expected rank 2 (no dump)"
grep -q "warning: $r1 (rank 1): torn dump" "$dir/trace.err" || fail "torn: no warning naming $r1 and rank 1: $(cat "$dir/trace.err")"
python3 "$trace" "$dir/torn" > "$dir/torn.txt" 2>/dev/null
grep -q "torn dump from rank 1" "$dir/torn.txt" || fail "torn: the report does not say rank 1's dump is torn"
grep -q "never entered" "$dir/torn.txt" && fail "torn: the report says a rank never entered: $(cat "$dir/torn.txt")"
echo "kill: 3 survivors' dumps, rank 2 named; a torn copy of rank 1's dump is warned about and changes nothing"
