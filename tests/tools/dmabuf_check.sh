#!/usr/bin/env bash
# dccl-info --dmabuf-check on sim memory (the sim backend emulates dma-buf export,
# so every layer runs here): one line per layer with its verdict, the JSON file,
# export disabled (FAIL verdicts in the JSON, still exit 0), bad options (exit 2), a provider
# init refuses (exit 1), and the cuda
# probe's exit (0 with the layers where a GPU is, else 1 with the reason).
# Also dccl-relay's JSON: the keys a script parses, and the fields added since.
# Usage: dmabuf_check.sh BUILD_DIR
set -u
B=$1
INFO=$B/tools/dccl-info RELAY=$B/tools/dccl-relay
T=$(mktemp -d) && trap 'rm -rf "$T"' EXIT
fails=0
check() {  # check NAME CONDITION...: runs the condition, reports
  local name=$1; shift
  if "$@"; then echo "ok   $name"; else echo "FAIL $name"; fails=$((fails + 1)); fi
}
has() { grep -q -- "$2" "$1" || { echo "  '$2' not in $1:"; sed 's/^/    /' "$1" | head -20; return 1; }; }
lines() { test "$(grep -c -E '^\[(pass|FAIL|n/a)\] ' "$1")" -eq "$2" || { sed 's/^/    /' "$1"; return 1; }; }

"$INFO" --dmabuf-check --mem sim --json "$T/sim.json" > "$T/sim" 2>&1; rc=$?
check "sim probe exits 0" test $rc -eq 0
check "sim probe: one line per layer" lines "$T/sim" 5
check "sim: aligned export passes with a real fd and its size" has "$T/sim" "^\[pass\] export aligned: fd [0-9]*, offset 0, length 8192, dma-buf size"
check "sim: unaligned export keeps the offset in its page" has "$T/sim" "^\[pass\] export unaligned: fd [0-9]*, offset 100, length 4296"
check "sim: SYNC_MEMOPS does not apply" has "$T/sim" "^\[n/a\] SYNC_MEMOPS: "
check "sim: the trial registration passes" has "$T/sim" "^\[pass\] trial registration: fi_mr_reg of the mapped dma-buf"
check "sim: invalidation passes" has "$T/sim" "^\[pass\] buffer-id invalidation: "
check "sim: the JSON has every layer" python3 -c '
import json, sys
d = json.load(open(sys.argv[1]))
assert d["mem"] == "sim", d
v = {l["name"]: l["verdict"] for l in d["layers"]}
assert v == {"export aligned": "pass", "export unaligned": "pass", "SYNC_MEMOPS": "n/a",
             "trial registration": "pass", "buffer-id invalidation": "pass"}, v
' "$T/sim.json"

DCCL_SIM_DMABUF=0 "$INFO" --dmabuf-check --mem sim --json "$T/off.json" > "$T/off" 2>&1; rc=$?
check "export disabled: the probe still ran (exit 0)" test $rc -eq 0
check "export disabled: the export fails with the reason; the trial registration does not apply" python3 -c '
import json, sys
d = json.load(open(sys.argv[1]))
l = {x["name"]: x for x in d["layers"]}
assert l["export aligned"]["verdict"] == "FAIL", l
assert l["export aligned"]["detail"].startswith("sim: dma-buf export disabled"), l
assert l["trial registration"]["verdict"] == "n/a", l
assert l["trial registration"]["detail"] == "nothing was exported", l
' "$T/off.json"

"$INFO" --dmabuf-check --mem tpu > "$T/bad" 2>&1; rc=$?
check "an unknown memory kind is a usage error (2)" test $rc -eq 2
"$INFO" --dmabuf-check --mem > "$T/bad2" 2>&1; rc=$?
check "--mem without a value is a usage error (2)" test $rc -eq 2

# A provider init refuses is refused here too (it probed shm and tcp instead for "auto").
DCCL_PROVIDER=auto "$INFO" --dmabuf-check --mem sim > "$T/auto" 2> "$T/auto.err"; rc=$?
check "a provider init refuses: exit 1" test $rc -eq 1
check "a provider init refuses: named, with the providers offered" has "$T/auto.err" "DCCL_PROVIDER auto names no libfabric provider on this machine; available RDM providers: .*shm"
DCCL_PROVIDER=shm "$INFO" --dmabuf-check --mem sim > "$T/shm" 2>&1; rc=$?
check "DCCL_PROVIDER=shm: the trial registration is on shm" has "$T/shm" "^\[pass\] trial registration: .* on a shm domain"

"$INFO" --dmabuf-check --mem cuda > "$T/cuda" 2> "$T/cuda.err"; rc=$?
if [ $rc -eq 0 ]; then
  check "cuda probe: one line per layer" lines "$T/cuda" 5
else
  check "cuda probe without a usable GPU exits 1" test $rc -eq 1
  check "cuda probe names why it cannot run" has "$T/cuda.err" "cannot probe cuda memory: cuda backend unavailable: "
fi

"$RELAY" --mem sim -b 4K -e 64K -n 3 -w 1 --json "$T/relay.json" > "$T/relay" 2>&1; rc=$?
check "dccl-relay --mem sim exits 0" test $rc -eq 0
check "dccl-relay prints the bidirectional column" has "$T/relay" "both GB/s"
check "dccl-relay's JSON keeps its keys and adds the new ones" python3 -c '
import json, sys
d = json.load(open(sys.argv[1]))
for k in ("mem", "backend", "pinned", "iters", "rows", "timing", "pin_refusal"):
    assert k in d, k
assert d["timing"] == "host clock", d["timing"]
assert [r["size"] for r in d["rows"]] == [4096, 16384, 65536], d["rows"]
for r in d["rows"]:
    for k in ("size", "d2h_gbps", "d2h_us", "h2d_gbps", "h2d_us", "bidir_gbps", "bidir_us"):
        assert k in r and r[k] >= 0, (k, r)
' "$T/relay.json"

echo "$fails failed"
exit $((fails > 0))
