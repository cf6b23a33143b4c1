#!/usr/bin/env bash
# scripts/gpu-check-summary: the one-line summaries and the per-size table from
# JSON written like dccl-relay's and dccl-perf's, the dma-buf layers from
# dccl-info --dmabuf-check's lines and the path a run's log names, against the lines expected by
# hand; and any error in them (bad JSON, a missing field, no file) is a nonzero
# exit, which gpu-check records as a failure.
#   gpu_check_summary_check.sh SOURCE_DIR
set -euo pipefail
sum=$1/scripts/gpu-check-summary
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
bad() { echo "gpu_check_summary_check: FAILED: $*"; exit 1; }
expect() {  # EXPECTED ARGS...
  local want=$1 got
  shift
  got=$("$sum" "$@") || bad "$* exited $?"
  [[ "$got" == "$want" ]] || bad "$*: got '$got', expected '$want'"
}
refuse() {  # WHAT ARGS...
  local what=$1
  shift
  if "$sum" "$@" >"$tmp/out" 2>"$tmp/err"; then bad "$what: exit 0 (printed '$(cat "$tmp/out")')"; fi
  [[ -s "$tmp/err" ]] || bad "$what: nonzero but no reason on stderr"
}

cat >"$tmp/relay.json" <<'J'
{"mem": "cuda", "backend": "cuda", "pinned": true, "iters": 20, "rows": [
  {"size": 4096, "d2h_gbps": 0.5000, "d2h_us": 8.192, "h2d_gbps": 0.4000, "h2d_us": 10.240},
  {"size": 268435456, "d2h_gbps": 52.3456, "d2h_us": 5128.000, "h2d_gbps": 48.04, "h2d_us": 5587.000}
]}
J
expect "256M: D2H 52.3 GB/s, H2D 48.0 GB/s; 4K: D2H 8.2 us, H2D 10.2 us; pinned" relay "$tmp/relay.json"
sed 's/"pinned": true/"pinned": false/' "$tmp/relay.json" >"$tmp/relay-pageable.json"
expect "256M: D2H 52.3 GB/s, H2D 48.0 GB/s; 4K: D2H 8.2 us, H2D 10.2 us; pageable" relay "$tmp/relay-pageable.json"

# The fields a newer dccl-relay adds: copies both ways at once, the clock, a refused page-lock.
sed -e 's/"iters": 20,/"iters": 20, "timing": "device events", "pin_refusal": "cudaHostRegister: not permitted",/' \
    -e 's/"pinned": true/"pinned": false/' -e 's/"h2d_us": 5587.000}/"h2d_us": 5587.000, "bidir_gbps": 90.44, "bidir_us": 5936.0}/' \
    "$tmp/relay.json" >"$tmp/relay-new.json"
expect "256M: D2H 52.3 GB/s, H2D 48.0 GB/s, both at once 90.4 GB/s; 4K: D2H 8.2 us, H2D 10.2 us; pageable (page-lock refused: cudaHostRegister: not permitted); timed by device events" \
    relay "$tmp/relay-new.json"

# dccl-info --dmabuf-check's lines: "[verdict] name: detail", after a heading.
printf '%s\n' "dma-buf layers of the direct path for cuda memory:" "[pass] export aligned: fd 12, 2097152 bytes" \
    "[FAIL] trial registration: fi_mr_regattr: Function not implemented (-38)" "[n/a] SYNC_MEMOPS: no driver: x" >"$tmp/dmabuf.log"
printf '%s\t%s\t%s\n' "3 layers: 1 pass, 1 FAIL, 1 n/a (first FAIL: trial registration)" "" "" \
    pass "export aligned" "fd 12, 2097152 bytes" FAIL "trial registration" "fi_mr_regattr: Function not implemented (-38)" \
    "n/a" "SYNC_MEMOPS" "no driver: x" | sed '1s/\t\t$//' >"$tmp/dmabuf.want"
"$sum" dmabuf "$tmp/dmabuf.log" >"$tmp/dmabuf.got" || bad "dmabuf exited $?"
diff "$tmp/dmabuf.want" "$tmp/dmabuf.got" || bad "dmabuf: the layers differ (above)"
echo "dccl-info: unknown option '--dmabuf-check'" >"$tmp/nolayers.log"
refuse "no layer lines" dmabuf "$tmp/nolayers.log"

# The path a run measured: its "data path:" log line first, else dccl-info's layers.
log() { printf '%s\n' "dccl-perf: noise" "$@" >"$tmp/run.log"; }
log "[INFO] rank 0: data path: cuda memory: decided at its first use (DCCL_PEER_DIRECT=auto)" \
    "[INFO] rank 0: data path: cuda memory: host-staged: layer 'libfabric >= 1.20' failed: runtime 1.17: FI_MR_DMABUF needs 1.20"
expect "staged (auto: libfabric 1.17 has no FI_MR_DMABUF)" label cuda 1.17 "" "$tmp/run.log"
log "[INFO] rank 1: data path: cuda memory: host-staged: layer 'trial registration' failed: fi_mr_regattr: -38"
expect "staged (auto: layer 'trial registration' failed: fi_mr_regattr: -38)" label cuda 1.22 "" "$tmp/run.log"
log "[INFO] rank 0: data path: cuda memory: host-staged: off by request (DCCL_PEER_DIRECT=0)"
expect "staged (DCCL_PEER_DIRECT=0)" label cuda 1.17 "libfabric >= 1.20" "$tmp/run.log"
log "[INFO] rank 0: data path: cuda memory: peer-direct (every viability layer passed)"
expect "peer-direct (dma-buf)" label cuda 1.22 "" "$tmp/run.log"
log "[INFO] rank 1: data path: cuda memory: not on whole pages (offset 100); such buffers are staged (logged once)" \
    "[INFO] rank 0: data path: cuda memory: peer-direct (every viability layer passed)"
expect "peer-direct (dma-buf), some buffers staged: not on whole pages (offset 100)" label cuda 1.22 "" "$tmp/run.log"
log "[INFO] rank 0: data path: sim memory: peer-direct (every viability layer passed)"
expect "peer-direct" label sim 1.17 "" "$tmp/run.log"
log "[INFO] rank 0: data path: sim memory: peer-direct (every viability layer passed)"  # another kind's line
expect "staged (auto: libfabric 1.17 has no FI_MR_DMABUF)" label cuda 1.17 "libfabric >= 1.20" "$tmp/run.log"
expect "staged (auto: layer 'kernel dma-buf' fails, from dccl-info)" label cuda 1.22 "kernel dma-buf" /dev/null
expect "peer-direct (dma-buf) (from dccl-info: the run logged no data path)" label cuda 1.22 "" /dev/null

row() {  # SIZE TIME BUSBW STAGED WRONG
  echo "{\"size\": $1, \"out_of_place\": {\"time_us\": $2, \"busbw_gbps\": $3, \"wrong\": $5, \"staged_per_byte\": $4},
         \"in_place\": {\"time_us\": $2, \"busbw_gbps\": $3, \"wrong\": 0}}"
}
echo "[$(row 65536 41.6 3.1 2.0 0), $(row 268435456 90000 5.96 2.0 3)]" >"$tmp/auto.json"
echo "[$(row 65536 40.1 3.2 2.0 0), $(row 268435456 88000 6.10 2.0 0)]" >"$tmp/pd0.json"
sed 's/, "staged_per_byte": [0-9.]*//' "$tmp/pd0.json" >"$tmp/host.json"
expect "256M busbw 5.96 GB/s, staged/B 2.00; 64K 42 us; wrong 3" perf "$tmp/auto.json"
expect "256M busbw 6.10 GB/s; 64K 40 us; wrong 0" perf "$tmp/host.json"

"$sum" perf-table cuda "staged (auto: libfabric 1.17 has no FI_MR_DMABUF)" "$tmp/host.json" "$tmp/auto.json" \
    "$tmp/pd0.json" >"$tmp/table" || bad "perf-table exited $?"
grep -q "'cuda auto' measured as staged (auto: libfabric 1.17 has no FI_MR_DMABUF)" "$tmp/table" || bad "no label: $(cat "$tmp/table")"
grep -qxF '| 65536 | 3.20 | 3.10 | 2.00 | 3.20 | 2.00 |' "$tmp/table" || bad "64K row: $(cat "$tmp/table")"
grep -qxF '| 268435456 | 6.10 | 5.96 | 2.00 | 6.10 | 2.00 |' "$tmp/table" || bad "256M row: $(cat "$tmp/table")"
# A run that wrote nothing leaves dashes; none at all is an error.
"$sum" perf-table cuda x "$tmp/host.json" "$tmp/none.json" "$tmp/pd0.json" >"$tmp/table2" || bad "perf-table with a run missing exited $?"
grep -qxF '| 65536 | 3.20 | - | - | 3.20 | 2.00 |' "$tmp/table2" || bad "a missing run is not shown as '-': $(cat "$tmp/table2")"

echo '{"rows": [' >"$tmp/broken.json"
refuse "broken JSON" relay "$tmp/broken.json"
echo '{"rows": []}' >"$tmp/empty.json"
refuse "no rows" relay "$tmp/empty.json"
echo '[{"size": 65536, "out_of_place": {"time_us": 1}}]' >"$tmp/nofield.json"
refuse "no busbw_gbps" perf "$tmp/nofield.json"
refuse "no such file" perf "$tmp/none.json"
refuse "no run at all" perf-table cuda x "$tmp/n1.json" "$tmp/n2.json" "$tmp/n3.json"
refuse "bad usage" relay
echo "gpu_check_summary_check: ok"
