#!/bin/bash
# Measures dccl-run --fabric with TCP flows (flows.py): 4 hosts under 2 leaves, 2
# spines, every link at RATE; flows go from hosts 0,1 (leaf 0) to hosts 2,3 (leaf 1).
#   1. flow cap FLOW: one flow from host 0 to host 2, then N flows with different
#      ports, each flow's rate and the bytes each spine carried to leaf 1
#      (`ip -s link`, tx of l1 in each spine)
#   2. no cap: host 0 -> 2 and host 1 -> 3 at once, on ports that hash onto the
#      same spine, then onto different spines (found by probing)
# usage: measure.sh DCCL_RUN [RATE [FLOW [N [SECONDS]]]] (root). Prints a markdown table.
. "$(dirname "$0")/../lib.sh"
need_emulation
run=$1 rate=${2:-1gbit} flow=${3:-250mbit} n=${4:-8} secs=${5:-4}
flows=$(dirname "$0")/flows.py
dir=$(mktemp -d)
trap 'rm -rf "$dir"; release_hosts' EXIT

# A fabric (dccl-run options in "$@") until stop_fabric. The senders may reuse a
# source port in TIME_WAIT (a probed flow runs again on the same ports).
start_fabric() {
  hold_hosts "$run" 4 --fabric --leaves 2 --spines 2 --rate "$rate" "$@" 2>/dev/null
  local h
  for h in 0 1; do ip netns exec $emu-h$h sh -c 'echo 1 >/proc/sys/net/ipv4/tcp_tw_reuse'; done
}
stop_fabric() { release_hosts 2>/dev/null; }
spine_tx() {  # bytes each spine sent to leaf 1: "s0 s1"
  local s
  for s in 0 1; do
    ip -n $emu-s$s -s -j link show dev l1 | python3 -c 'import json,sys; print(json.load(sys.stdin)[0]["stats64"]["tx"]["bytes"])'
  done | paste -sd' '
}
# flows SRC_HOST DST_HOST SECONDS SPORT... -> the receiver's lines "flow SPORT BYTES SECONDS MBITS"
flows() {
  local src=$1 dst=$2 t=$3
  shift 3
  local addr="198.18.1.$((dst + 1))" port=$((5000 + dst))
  ip netns exec $emu-h$dst python3 "$flows" serve $port $(awk -v t="$t" 'BEGIN { print t + 1.5 }') >"$dir/srv.$dst" &
  local srv=$!
  sleep 0.5
  ip netns exec $emu-h$src python3 "$flows" send $addr $port $t "$@"
  wait $srv
  cat "$dir/srv.$dst"
}
delta() { echo "$1 $2" | awk '{ printf "%.0f %.0f", ($3 - $1) / 1e6, ($4 - $2) / 1e6 }'; }

echo "| case | flows | per-flow Mbit/s (receiver) | total Mbit/s | MB via spine 0 / spine 1 |"
echo "|---|---|---|---|---|"
start_fabric --flow-rate "$flow"
row() {  # label src dst sports...
  local label=$1 src=$2 dst=$3
  shift 3
  local before after out
  before=$(spine_tx)
  out=$(flows $src $dst $secs "$@")
  after=$(spine_tx)
  echo "| $label | $# | $(echo "$out" | awk '{printf "%s%d", (NR > 1 ? " " : ""), $5}') | $(echo "$out" | awk '{s += $5} END {printf "%d", s}') | $(delta "$before" "$after" | tr ' ' /) |"
}
row "cap $flow, link $rate: one flow" 0 2 40001
ports=$(for i in $(seq 0 $((n - 1))); do echo $((40001 + 17 * i)); done)  # distinct low nibbles: distinct buckets
row "cap $flow, link $rate: $n flows" 0 2 $ports
stop_fabric

# No cap: which spine does a flow from host SRC to DST on SPORT take? (a 0.5 s probe)
start_fabric
spine_of() {
  local before after
  before=$(spine_tx)
  flows $1 $2 0.5 $3 >/dev/null
  after=$(spine_tx)
  delta "$before" "$after" | awk '{ print ($1 > $2) ? 0 : 1 }'
}
a=41000
sa=$(spine_of 0 2 $a)
same= other=
for b in $(seq 42000 42030); do
  sb=$(spine_of 1 3 $b)
  [ "$sb" = "$sa" ] && [ -z "$same" ] && same=$b
  [ "$sb" != "$sa" ] && [ -z "$other" ] && other=$b
  [ -n "$same" ] && [ -n "$other" ] && break
done
pair() {  # label b
  local before after
  before=$(spine_tx)
  flows 0 2 $secs $a >"$dir/f02" &
  local first=$!
  flows 1 3 $secs $2 >"$dir/f13"
  wait $first
  after=$(spine_tx)
  echo "| $1 | 2 | $(awk '{printf "%d", $5}' "$dir/f02") $(awk '{printf "%d", $5}' "$dir/f13") | $(cat "$dir/f02" "$dir/f13" | awk '{s += $5} END {printf "%d", s}') | $(delta "$before" "$after" | tr ' ' /) |"
}
one() {
  local before after out
  before=$(spine_tx)
  out=$(flows 0 2 $secs $a)
  after=$(spine_tx)
  echo "| no cap, link $rate: one flow h0->h2 | 1 | $(echo "$out" | awk '{printf "%d", $5}') | $(echo "$out" | awk '{printf "%d", $5}') | $(delta "$before" "$after" | tr ' ' /) |"
}
one
[ -n "$same" ] && pair "no cap: h0->h2 and h1->h3 on the same spine" $same
[ -n "$other" ] && pair "no cap: h0->h2 and h1->h3 on different spines" $other
stop_fabric
