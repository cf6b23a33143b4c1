#!/bin/bash
# dccl-run --fabric builds what it promises (4 hosts under 2 leaves, 2 spines, links
# at 1gbit, each TCP flow capped at 100mbit):
#   - each leaf routes the other leaf's subnet over both spines, and every router
#     hashes on addresses, protocol and ports (sysctls);
#   - one TCP flow from host 0 to host 2 gets the flow cap (70-105 % of it), in the
#     class bits 1-4 of its ports name, and the classes together stay under the link rate;
#   - 16 flows with different ports both spines carry (each >= 10 % of the bytes,
#     by the spines' `ip -s link` counters; all 16 on one spine: 2^-15);
#   - the namespaces are gone when dccl-run ends.
# usage: fabric_check.sh DCCL_RUN. Exit 77 (skipped) where hosts cannot be emulated.
. "$(dirname "$0")/../lib.sh"
need_emulation
run=$1
flows=$(dirname "$0")/flows.py
dir=$(mktemp -d)
trap 'rm -rf "$dir"; release_hosts' EXIT
trap 'exit 143' TERM
trap 'exit 130' INT
hold_hosts "$run" 4 --fabric --leaves 2 --spines 2 --rate 1gbit --flow-rate 100mbit
ns=$emu
for l in 0 1; do
  other=$((1 - l))
  hops=$(ip -n $ns-l$l route show 198.18.$other.0/24 | grep -c nexthop)
  [ "$hops" = 2 ] || fail "leaf $l routes 198.18.$other.0/24 over $hops spines, expected 2: $(ip -n $ns-l$l route)"
done
for r in l0 l1 s0 s1; do
  got=$(ip netns exec $ns-$r cat /proc/sys/net/ipv4/ip_forward /proc/sys/net/ipv4/fib_multipath_hash_policy \
        /proc/sys/net/ipv4/fib_multipath_hash_fields | paste -sd' ')
  [ "$got" = "1 3 55" ] || fail "router $r: ip_forward, hash policy and fields are '$got', expected '1 3 55' (0x37: addresses, protocol, ports)"
done
classes=$(tc -n $ns-h0 class show dev eth0 | grep -c "htb 1:1[0-9a-f][0-9a-f] .*ceil 100Mbit")
[ "$classes" = 256 ] || fail "host 0's eth0 has $classes flow classes at 100Mbit, expected 256"
# The buckets' guaranteed rates add up to no more than the link's (else busy buckets
# would send past it): each borrows above its share from 1:1, which holds the link.
tc -n $ns-h0 class show dev eth0 | python3 -c '
import re, sys
unit = {"bit": 1, "Kbit": 1e3, "Mbit": 1e6, "Gbit": 1e9}
def rate(l):
    m = re.search(r" rate ([0-9.]+)(\w+)", l)
    return float(m.group(1)) * unit[m.group(2)]
lines = sys.stdin.read().splitlines()
link = [rate(l) for l in lines if " 1:1 root " in l][0]
kids = sum(rate(l) for l in lines if " parent 1:1 " in l)
sys.exit(0 if 0 < kids <= link * 1.01 else f"the classes under 1:1 guarantee {kids:.0f} bit/s, past its {link:.0f}")' ||
  fail "host 0's flow classes can send past the link rate"
tc -n $ns-s0 qdisc show dev l1 | grep -q "tbf .*rate 1Gbit" || fail "spine 0's port to leaf 1 is not shaped: $(tc -n $ns-s0 qdisc)"

spine_tx() {
  local s
  for s in 0 1; do
    ip -n $ns-s$s -s -j link show dev l1 | python3 -c 'import json,sys; print(json.load(sys.stdin)[0]["stats64"]["tx"]["bytes"])'
  done | paste -sd' '
}
send() {  # SECONDS SPORT... from host 0 to host 2; the receiver's lines
  local t=$1
  shift
  ip netns exec $ns-h2 python3 "$flows" serve 5001 $(awk -v t="$t" 'BEGIN { print t + 1.5 }') $# >"$dir/srv" &
  local srv=$!
  sleep 0.3
  ip netns exec $ns-h0 python3 "$flows" send 198.18.1.3 5001 "$t" "$@" || fail "the flows could not run"
  wait $srv
  cat "$dir/srv"
}
one=$(send 2 40001)
echo "one flow: $one"
echo "$one" | awk '{ exit !(NF == 5 && $5 >= 70 && $5 <= 105) }' || fail "one flow got $(echo "$one" | awk '{print $5}') Mbit/s, expected 70-105 (cap 100mbit)"
# The u32 tables put port 40001 -> 5001 (bits 1-4: 0 and 4) in class 1:100 + 16 * 0 + 4.
sent=$(tc -n $ns-h0 -s class show dev eth0 classid 1:104 | awk '$1 == "Sent" { print $2 }')
[ "${sent:-0}" -gt 10000000 ] || fail "class 1:104 sent ${sent:-0} bytes of the flow from port 40001 to 5001: $(tc -n $ns-h0 -s class show dev eth0 | grep -B1 'Sent [1-9][0-9]\{6\}')"
before=$(spine_tx)
many=$(send 1.5 $(seq 40101 40116))
after=$(spine_tx)
echo "$many"
[ "$(echo "$many" | wc -l)" = 16 ] || fail "16 flows sent, $(echo "$many" | wc -l) received"
echo "$before $after" | awk '{ a = $3 - $1; b = $4 - $2; printf "bytes to leaf 1: spine 0 %d, spine 1 %d\n", a, b
  exit !(a >= 0.1 * (a + b) && b >= 0.1 * (a + b)) }' || fail "16 flows did not spread over both spines"
release_hosts
echo "OK: ECMP over 2 spines, flow cap, 16 flows spread, nothing left"
