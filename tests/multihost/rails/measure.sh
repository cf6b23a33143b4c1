#!/bin/bash
# Striping over rails against one rail: 2 emulated hosts x 1 rank, 2 rails each,
# every link shaped to RATE (tbf, both directions); dccl-perf all_reduce from 1M
# to 64M (x4), once as configured (striped: DCCL_NET_STRIPE_BYTES default) and once
# with DCCL_NET_STRIPE_BYTES=0 (each pair on one rail), busbw side by side.
# usage: measure.sh DCCL_PERF [RATE (default 1gbit; none: unshaped)] [extra dccl-perf flags...]
. "$(dirname "$0")/netns.sh"
rails_need_emulation
perf=$1 rate=${2:-1gbit}
shift 2 2>/dev/null
trap 'rm -f "$striped" "$single"; rails_net_down' EXIT
striped=$(mktemp) single=$(mktemp)
rails_net_up 2 2 "${rate#none}" || fail "cannot build the emulated hosts"
run() {  # $1: output file, then env assignments
  local f=$1
  shift
  rails_launch 2 1 env DCCL_TIMEOUT_S=120 "$@" "$perf" all_reduce -b 1M -e 64M -f 4 "${extra[@]}" >"$f" 2>&1 ||
    { cat "$f"; fail "dccl-perf failed"; }
}
extra=("$@")
run "$striped" DCCL_NET_STRIPE_BYTES=128K  # the default
run "$single" DCCL_NET_STRIPE_BYTES=0
echo "all_reduce, 2 hosts x 1 rank, 2 rails of $rate each (tbf both ways); busbw in GB/s"
printf "%12s  %10s  %10s  %6s  %10s  %10s  %6s\n" bytes striped one-rail ratio "in-place" one-rail ratio
# Rows: size count type redop root time algbw busbw #wrong time algbw busbw #wrong
paste <(awk '$1 ~ /^[0-9]+$/ {print $1, $8, $12}' "$striped") <(awk '$1 ~ /^[0-9]+$/ {print $1, $8, $12}' "$single") |
  awk '{printf "%12d  %10.3f  %10.3f  %5.2fx  %10.3f  %10.3f  %5.2fx\n", $1, $2, $5, ($5 > 0 ? $2 / $5 : 0), $3, $6,
               ($6 > 0 ? $3 / $6 : 0)}'
grep -h "Avg bus bandwidth" "$striped" "$single" | sed 's/^/  /'
