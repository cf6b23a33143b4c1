#!/bin/bash
# Injected data (2 emulated hosts, 1 rank each): while the job waits between init
# and an allreduce of 1 KiB, a process on rank 1's host that does not know the
# secret (inject.cc) sends collective-shaped tagged messages to every TCP port rank 0
# listens on, through tcp;ofi_rxm, claiming every port rank 1 listens on. The
# allreduce must then equal the float64 reference on every rank, or fail loudly;
# success with other data fails the test.
# usage: inject.sh MODE DCCL_RUN INJECT_RANK INJECT
#   default  DCCL_NET_SOCK_BYTES=512, below the message: libfabric would carry it on
#            a trusted network; here every rank must get the right sum
#   sockzero DCCL_NET_SOCK_BYTES=0: init must fail on every rank, naming the setting
#   trusted  DCCL_TRUST_NETWORK=1, DCCL_NET_SOCK_BYTES=512: the opt-in, where the
#            attack is expected to reach the result (shows the attacker works);
#            the test passes when a rank reports the injected data
# Exit 77 (skipped) where hosts cannot be emulated.
. "$(dirname "$0")/lib.sh"
need_emulation
mode=$1 run=$2 prog=$3 attacker=$4
env=(--env DCCL_TIMEOUT_S=20)
case $mode in
  default) env+=(--env DCCL_NET_SOCK_BYTES=512) ;;
  sockzero) env+=(--env DCCL_NET_SOCK_BYTES=0) ;;
  # Rank 1 then waits out its timeout (rank 0 answered the attacker): a short one.
  # One libfabric flow per peer, so that each attacker claims one of rank 1's ports
  # towards one of rank 0's (with 8 flows, 64 pairs would claim each port 8 times).
  trusted) env=(--env DCCL_TIMEOUT_S=8 --env DCCL_NET_SOCK_BYTES=512 --env DCCL_TRUST_NETWORK=1 --env DCCL_NET_FLOWS=1) ;;
  *) fail "unknown mode $mode" ;;
esac
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
"$run" --hosts 2 -n 2 --keep-going --timeout 120 "${env[@]}" "$prog" "$dir" 256 >"$dir/log" 2>&1 &
pid=$!
if [ $mode = sockzero ]; then
  wait $pid
  cat "$dir/log"
  for r in 0 1; do
    grep -q "DCCL_NET_SOCK_BYTES=0 would send host memory" "$dir/result.$r" 2>/dev/null ||
      fail "rank $r: init did not fail naming DCCL_NET_SOCK_BYTES=0: $(cat "$dir/result.$r" 2>/dev/null)"
  done
  echo "OK: DCCL_NET_SOCK_BYTES=0 on an untrusted network refused on every rank"
  exit 0
fi
wait_for "$dir/pid.*" 2 60 || { kill -TERM $pid; wait $pid; cat "$dir/log"; fail "the ranks did not start"; }
# "LISTEN 0 64 198.18.0.1:41234 0.0.0.0:* users:(("inject_rank",pid=N,fd=M))" -> ip:port
ports_of() { ip netns exec "dccl-$pid-h$1" ss -ltnpH 2>/dev/null | grep "pid=$(cat "$dir/pid.$1")," |
  awk '{print $4}' | grep -v '^127\.' || true; }
victim=$(ports_of 0) claimed=$(ports_of 1)
echo "rank 0 listens on: ${victim:-nothing}; rank 1 on: ${claimed:-nothing}"
# On an untrusted network nothing of the job listens once it is connected.
if [ $mode = default ] && [ -n "$victim$claimed" ]; then
  touch "$dir/go"; wait $pid
  fail "ranks listen on TCP ports after init: ${victim} ${claimed}"
fi
attackers=()
for v in $victim; do
  for c in $claimed; do
    ip netns exec "dccl-$pid-h1" "$attacker" 127.0.0.1 "${c##*:}" "${v%:*}" "${v##*:}" 1024 16 4 1000 \
      >>"$dir/attack" 2>&1 &
    attackers+=($!)
  done
done
# Every attacker has posted its messages (or failed) before the ranks go on.
for i in $(seq 1 100); do
  [ "$(cat "$dir/attack" 2>/dev/null | grep -c "posted\|inject:")" -ge ${#attackers[@]} ] && break
  sleep 0.1
done
cat "$dir/attack" 2>/dev/null
echo "attackers: ${#attackers[@]}"
touch "$dir/go"
wait $pid
for a in "${attackers[@]}"; do kill -TERM "$a" 2>/dev/null; wait "$a" 2>/dev/null; done
cat "$dir/attack" 2>/dev/null
for r in 0 1; do echo "rank $r: $(cat "$dir/result.$r" 2>/dev/null || echo 'no result')"; done
[ -z "$(left_of $pid)" ] || fail "namespaces left: $(left_of $pid)"
if [ $mode = trusted ]; then
  grep -q "^WRONG" "$dir"/result.* || { cat "$dir/log"; fail "the attack did not reach the result on a trusted network"; }
  echo "OK: on a network trusted by opt-in the attacker's data reached the result, as documented"
  exit 0
fi
for r in 0 1; do
  res=$(cat "$dir/result.$r" 2>/dev/null)
  case $res in
    ok) ;;
    WRONG*) fail "rank $r returned success with injected data: $res" ;;
    *) cat "$dir/log"; fail "rank $r: $res" ;;
  esac
done
echo "OK: every rank's allreduce equals the float64 reference"
