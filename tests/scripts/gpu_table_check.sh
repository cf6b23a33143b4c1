#!/usr/bin/env bash
# scripts/gpu-table: writes a results.txt into the "On a GPU" section of a copy of
# docs/performance.md; the rest of the file stays byte for byte, a second run
# replaces the first table, and input that is not gpu-check's is refused.
#   gpu_table_check.sh SOURCE_DIR
set -euo pipefail
src=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
doc=$tmp/performance.md
cp "$src/docs/performance.md" "$doc"
bad() { echo "gpu_table_check: FAILED: $*"; exit 1; }
results() {  # VERDICT ROW
  printf '%s\n' "$1" "machine: Linux 6.1 x86_64; glibc 2.36; 16 cores; GPU: H200; GPU_CHECK_MEM=cuda; 200 s" "" \
         "| step | result | key numbers |" "|---|---|---|" "$2"
}
# The file without the marked block: what must not change.
outside() { sed '/^<!-- gpu-check results: begin/,/^<!-- gpu-check results: end -->$/d' "$1" | cat -s; }

results "gpu-check: exit 0: every step passed" "| relay | ok | 256M: D2H 50.1 GB/s |" >"$tmp/r1.txt"
"$src/scripts/gpu-table" "$tmp/r1.txt" --doc "$doc" --note "Run of 2026-12-03."
[[ $(grep -c '^<!-- gpu-check results: begin' "$doc") == 1 ]] || bad "not exactly one begin marker"
grep -qxF '| relay | ok | 256M: D2H 50.1 GB/s |' "$doc" || bad "the table row is not in the file"
# shellcheck disable=SC2016 # backquotes, not a command
grep -qxF '`gpu-check: exit 0: every step passed`' "$doc" || bad "the verdict is not in the file"
diff <(outside "$src/docs/performance.md") <(outside "$doc") || bad "text outside the block changed"
# Inside the GPU section: after "## On a GPU", before the next "## ".
sec=$(awk '/^## /{s=($0=="## On a GPU")} s' "$doc")
grep -qxF '| relay | ok | 256M: D2H 50.1 GB/s |' <<<"$sec" || bad "the table is not inside the 'On a GPU' section"

results "gpu-check: exit 24: failed: relay; first: relay: timed out" "| relay | FAIL 24 | timed out |" >"$tmp/r2.txt"
"$src/scripts/gpu-table" "$tmp/r2.txt" --doc "$doc"
grep -qF '256M: D2H 50.1' "$doc" && bad "the first run's table was not replaced"
grep -qxF '| relay | FAIL 24 | timed out |' "$doc" || bad "the second run's row is missing"
[[ $(grep -c '^<!-- gpu-check results: end -->$' "$doc") == 1 ]] || bad "not exactly one end marker"
diff <(outside "$src/docs/performance.md") <(outside "$doc") || bad "text outside the block changed on the second run"

cp "$doc" "$tmp/before.md"
echo "hello" >"$tmp/r3.txt"
if "$src/scripts/gpu-table" "$tmp/r3.txt" --doc "$doc" 2>"$tmp/err"; then bad "accepted a file that is not gpu-check's"; fi
grep -q 'not gpu-check' "$tmp/err" || bad "no reason given: $(cat "$tmp/err")"
cmp -s "$doc" "$tmp/before.md" || bad "a refused input changed the file"
echo "gpu_table_check: ok"
