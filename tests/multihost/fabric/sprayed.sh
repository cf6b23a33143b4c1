#!/bin/bash
# coll_check's large suite (>= 16 MiB, checked against float64 references) across 4
# emulated hosts on the leaf-spine fabric with a per-flow cap, every pair over
# DCCL_NET_FLOWS socket flows: the job passes, every rank logs that many flows per
# peer, and no namespace is left.
# usage: sprayed.sh DCCL_RUN COLL_CHECK FLOWS. Exit 77 (skipped) where hosts cannot be emulated.
. "$(dirname "$0")/../lib.sh"
need_emulation
run=$1 check=$2 flows=$3
out=$(mktemp)
trap 'rm -f "$out"' EXIT
run_job "$out" "$run" --hosts 4 -n 4 --fabric --leaves 2 --spines 2 --rate 1gbit --flow-rate 250mbit --timeout 150 \
  --env DCCL_TIMEOUT_S=60 --env DCCL_DEBUG=INFO --env DCCL_NET_FLOWS="$flows" "$check" --suite large
# "[W] ... net: rank R of 4 on HOST uses ...; up to F socket flows per peer (DCCL_NET_FLOWS)...", once per rank
n=$(grep -h " net: rank [0-9]* of 4 on .* uses .*up to $flows socket flows per peer" "$out" | awk '{ print $1 }' | sort -u | wc -l)
[ "$n" -eq 4 ] || { grep " net: rank " "$out"; fail "$n of 4 ranks logged $flows socket flows per peer"; }
echo "PASS: 4 hosts on the fabric, $flows socket flows per peer, the large suite checked"
