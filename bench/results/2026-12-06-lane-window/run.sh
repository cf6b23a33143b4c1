#!/bin/bash
# 2 emulated hosts x 1 rank, 2 rails at 1 Gbit/s, rail 1 of each host degraded to
# 250 Mbit/s (../2026-12-05-degraded-rail/degrade.sh); libfabric tcp;ofi_rxm striped
# over the 2 rails, 1 flow each. Three variants, interleaved, ROUNDS rounds: equal
# pieces (DCCL_NET_LANE_BALANCE=0), filled lanes without a window
# (DCCL_NET_LANE_WINDOW_BYTES=0), filled lanes with the default window.
# usage: run.sh BUILD OUT [ROUNDS]
set -eu
build=$1 out=$2 rounds=${3:-3}
here=$(cd "$(dirname "$0")" && pwd)
degrade=$here/../2026-12-05-degraded-rail/degrade.sh
mkdir -p "$out"
for r in $(seq 1 "$rounds"); do
  for v in equal nowindow window; do
    case $v in
      equal) set -- --env DCCL_NET_LANE_BALANCE=0 ;;
      nowindow) set -- --env DCCL_NET_LANE_WINDOW_BYTES=0 ;;
      window) set -- ;;
    esac
    for op in all_reduce all_gather; do
      "$build/tools/dccl-run" --hosts 2 -n 2 --rails 2 --rate 1gbit --timeout 300 --no-prefix \
        --env DCCL_TRUST_NETWORK=1 --env DCCL_NET_SOCK_BYTES=0 --env DCCL_NET_FLOWS=1 "$@" \
        "$degrade" 250mbit "$build/tools/dccl-perf" $op -b 16M -e 16M -n 10 -w 3 \
        > "$out/$v-$op-$r.txt" 2>&1
      t=$(awk '$1 == 16777216 {print $6, "wrong", $9}' "$out/$v-$op-$r.txt" | head -1)
      echo "round $r $v $op 16MiB ${t:-?} us"
    done
  done
done
