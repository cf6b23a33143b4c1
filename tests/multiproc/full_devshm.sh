#!/bin/sh
# A full /dev/shm (containers often give it 64 MiB): the shared segment cannot be
# created, every rank learns it, and allreduces run correctly over messages
# instead of dying of SIGBUS on first touch. Runs 2 ranks in a private mount
# namespace whose /dev/shm holds 1 MiB. Exit 77 (skipped) where that namespace
# cannot be made.
# usage: full_devshm.sh DCCL_RUN DCCL_PERF
run=$1 perf=$2
if ! unshare -m true 2>/dev/null; then echo "cannot create a mount namespace: skipped"; exit 77; fi
rows=$(mktemp) || exit 1
trap 'rm -f "$rows"' EXIT
out=$(unshare -m sh -c 'mount -t tmpfs -o size=1M tmpfs /dev/shm || exit 77
  DCCL_PROVIDER=tcp DCCL_DEBUG=INFO "$0" -n 2 --timeout 120 "$1" all_reduce -b 256K -e 4M -f 4 -z 1 -n 3 -w 1 -c 1 \
    --json "$2"' "$run" "$perf" "$rows" 2>&1)
rc=$?
echo "$out"
[ $rc -eq 77 ] && { echo "cannot mount a small /dev/shm: skipped"; exit 77; }
[ $rc -eq 0 ] || { echo "FAIL: the job exited with $rc"; exit 1; }
echo "$out" | grep -q "shared-memory segment: create: No space left on device" ||
  { echo "FAIL: rank 0 did not report the full /dev/shm"; exit 1; }
echo "$out" | grep -q "rank 0 could not create it" || { echo "FAIL: rank 1 did not learn it"; exit 1; }
# dccl-perf's --json rows: three sizes, each checked with no wrong element.
python3 - "$rows" <<'PY' || exit 1
import json, sys
rows = json.load(open(sys.argv[1]))
good = [r for r in rows if r["collective"] == "all_reduce" and r["type"] == "float" and r["redop"] == "sum"
        and r["out_of_place"]["wrong"] == 0 and r["in_place"]["wrong"] == 0]
if len(rows) != 3 or len(good) != 3 or sorted(r["size"] for r in rows) != [262144, 1048576, 4194304]:
    sys.exit(f"FAIL: expected 3 sizes (256K, 1M, 4M) with 0 wrong elements, got {rows}")
PY
echo "OK: no segment, results checked"
