#!/usr/bin/env bash
# scripts/run-main (`make run`'s benchmark) on small sizes: exits 0, both parts
# report no wrong result, peer-direct stages nothing and host staging stages
# bytes, and (as root) every run of the emulated-hosts part gives its row.
#   run_main_check.sh SOURCE_DIR BUILD_DIR
set -uo pipefail
src=$1 build=$2
out=$(mktemp)
trap 'rm -f "$out"' EXIT
bad() { echo "run_main_check: FAILED: $*"; cat "$out"; exit 1; }
DCCL_RUN_SIZES="-b 64K -e 64K" DCCL_RUN_HOST_SIZES="-b 64K -e 64K" "$src/scripts/run-main" "$build" >"$out" 2>&1
rc=$?
[ $rc = 0 ] || bad "scripts/run-main exited with $rc"
[ "$(grep -c '^# wrong results: 0$' "$out")" -ge 1 ] || bad "no '# wrong results: 0' line"
grep -q "^# wrong results: [1-9]" "$out" && bad "wrong results"
# The one-host table: direct 0 staged/B, staged > 0.
row=$(awk '$1 == 65536 && NF == 6' "$out" | head -1)
[ -n "$row" ] || bad "no 64 KiB row in the direct vs staged table"
set -- $row
[ "$3" = 0.000 ] || bad "peer-direct staged $3 bytes per byte through host memory"
awk -v s="$5" 'BEGIN {exit !(s > 0)}' || bad "host staging staged nothing ($5)"
if grep -q "### 4 emulated hosts x 2 ranks: skipped:" "$out"; then
  PATH=$PATH:/usr/sbin:/sbin
  if [ "$(id -u)" = 0 ] && command -v tc >/dev/null && unshare --net true 2>/dev/null; then
    bad "the emulated-hosts part was skipped where hosts can be emulated"
  fi
  echo "emulated hosts skipped here: $(grep 'skipped:' "$out")"
else
  grep -q "failed" "$out" && bad "an emulated-hosts run failed"
  hrow=$(awk '$1 == 65536 && $2 == "|"' "$out" | head -1)
  [ -n "$hrow" ] || bad "no 64 KiB row in the emulated-hosts table"
  [ "$(echo "$hrow" | grep -o '/B' | wc -l)" = 4 ] || bad "a run of the emulated-hosts part gave no result: $hrow"
fi
grep "^###\|^# wrong" "$out"
echo "run_main_check: OK"
