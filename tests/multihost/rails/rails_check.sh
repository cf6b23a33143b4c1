#!/bin/bash
# Rails across emulated hosts: collectives give correct results, and every rail of
# every host carried bytes — by the interfaces' own counters (/proc/net/dev in each
# namespace, before and after) and by the transport's (DCCL_DEBUG=INFO lines
# "net: rank R tcp;ofi_rxm on ethK: sent N bytes, ..." and, for the messages up to
# DCCL_NET_SOCK_BYTES, "net: rank R socket path on ethK: sent N bytes, ...").
# usage: rails_check.sh LAYOUT COLL_CHECK DCCL_PERF [DCCL_RUN]
#   LAYOUT  2x1: 2 hosts x 1 rank, 2 rails, striped (DCCL_NET_STRIPE_BYTES=4K, so
#                that the small suite's messages are cut over both rails;
#                DCCL_TRUST_NETWORK=1, as striping needs)
#           2x2: 2 hosts x 2 ranks, 2 rails, not striped: each pair on the rail of
#                its lower rank's local rank (the hierarchy's cross-host
#                sub-communicators keep the process's local rank)
#   DCCL_RUN  when given and it knows --rails: dccl-run --hosts 2 --rails 2 builds the
#             hosts and runs coll_check --suite small. Otherwise the hosts are built
#             here (netns.sh) and every rank runs dccl-perf with its checks (-c 1)
#             over five collectives, one job each on its own rendezvous port
#             (coll_check initialises several communicators from DCCL_ADDR on one
#             port, which races with the previous store's shutdown).
# Exit 77 (skipped) where hosts cannot be emulated.
. "$(dirname "$0")/netns.sh"
rails_need_emulation
layout=$1 coll=$2 perf=$3 run=${4:-}
case $layout in
  2x1) n=2 per=1 stripe=4K ;;
  2x2) n=4 per=2 stripe=128K ;;
  *) fail "unknown layout '$layout' (2x1 or 2x2)" ;;
esac
hosts=2 rails=2
out=$(mktemp)
trap 'rm -f "$out"; rails_net_down' EXIT

# Each rank: the interface counters before and after its job; local rank 0 reports
# "RAILBYTES <host> <interface> <tx bytes> <rx bytes>" for eth*.
rank='snap() { sed "s/:/ /" /proc/net/dev | awk "NR > 2 && \$1 ~ /^eth/ {print \$1, \$10, \$2}"; }
  before=$(snap)
  "$@"
  rc=$?
  after=$(snap)
  if [ "${DCCL_LOCAL_RANK:-0}" = 0 ]; then
    host=${DCCL_HOST_ID:-$(hostname)}
    join <(echo "$before" | sort) <(echo "$after" | sort) | while read -r ifc tx0 rx0 tx1 rx1; do
      echo "RAILBYTES $host $ifc $((tx1 - tx0)) $((rx1 - rx0))"
    done
  fi
  exit $rc'

env=(DCCL_DEBUG=INFO DCCL_TIMEOUT_S=60 DCCL_NET_STRIPE_BYTES=$stripe)
# Striping is libfabric's (tcp;ofi_rxm on every rail), which carries data only on a
# network the job trusts; unstriped pairs take the socket path on their rail either way.
[ "$layout" = 2x1 ] && env+=(DCCL_TRUST_NETWORK=1)
if [ -n "$run" ] && "$run" --help 2>&1 | grep -q -- "--rails"; then
  how="dccl-run --hosts $hosts --rails $rails -n $n"
  envargs=()
  for e in "${env[@]}"; do envargs+=(--env "$e"); done
  "$run" --hosts $hosts --rails $rails -n $n --timeout 300 "${envargs[@]}" bash -c "$rank" rank "$coll" --suite small \
    >"$out" 2>&1
  rc=$?
  what="coll_check --suite small"
else
  how="namespaces built here (netns.sh), $hosts hosts x $rails rails"
  rails_net_up $hosts $rails || fail "cannot build the emulated hosts"
  # One job per collective, each on the next port after DCCL_ADDR's.
  jobs='addr=${DCCL_ADDR%:*} port=${DCCL_ADDR##*:} k=0
    for c in all_reduce all_gather reduce_scatter broadcast alltoall; do
      DCCL_ADDR=$addr:$((port + k)) "$0" $c -b 1K -e 4M -f 4 -n 2 -w 1 -c 1 || exit 1
      k=$((k + 1))
    done'
  rails_launch $n $per env "${env[@]}" bash -c "$rank" rank bash -c "$jobs" "$perf" >"$out" 2>&1
  rc=$?
  what="dccl-perf -c 1 (all_reduce, all_gather, reduce_scatter, broadcast, alltoall; 1K-4M)"
fi
if [ $rc -ne 0 ]; then
  grep -v " DCCL INFO " "$out" | tail -50
  fail "$what on $how exited with $rc"
fi
grep -h "coll_check .* checked\|Out of bounds values" "$out" | sed 's/^\[[0-9]*\] //' | sort | uniq -c
echo "$what passed on $how ($n ranks, $per per host)"
grep -h " net: rank [0-9]* of [0-9]* on .* uses \| topology: rank " "$out" | sed 's/^.*DCCL INFO //' | sort -u
bad=0
for h in $(seq 0 $((hosts - 1))); do
  for r in $(seq 0 $((rails - 1))); do
    line=$(grep -ho "RAILBYTES [^ ]*h$h eth$r .*" "$out" | head -1)
    set -- $line
    [ -n "$line" ] || { echo "FAIL: no counters for host $h eth$r"; bad=1; continue; }
    echo "host $h eth$r: tx $4 bytes, rx $5 bytes (interface counters)"
    # More than the handshakes and neighbour discovery: a rail in use carries data.
    [ "$4" -gt 65536 ] && [ "$5" -gt 65536 ] || { echo "FAIL: host $h eth$r carried too little"; bad=1; }
  done
done
for r in $(seq 0 $((rails - 1))); do
  sent=$(grep -ho -E "(tcp;ofi_rxm|socket path) on eth$r(, flow [0-9]+ of [0-9]+)?: sent [0-9]*" "$out" | awk '{s += $NF} END {print s + 0}')
  echo "eth$r: $sent bytes sent by the transports (all ranks, all communicators)"
  [ "$sent" -gt 0 ] || { echo "FAIL: the transport sent nothing on eth$r"; bad=1; }
done
if [ "$layout" = 2x1 ]; then
  grep -q "topology: rank 0 -> 1: tcp;ofi_rxm striped over rails eth0+eth1" "$out" ||
    { echo "FAIL: rank 0 did not report the pair as striped"; bad=1; }
else
  grep -qE "topology: rank 1 -> 3: (tcp;ofi_rxm|DirectCCL's authenticated socket path \(.*\)) on rail eth1" "$out" ||
    { echo "FAIL: rank 0 did not report the pair 1 -> 3 on rail eth1"; bad=1; }
  # The cross-host sub-communicator of local rank 1 (its ranks 0 and 1) keeps rail 1.
  grep -qE "topology: rank 0 -> 1: (tcp;ofi_rxm|DirectCCL's authenticated socket path \(.*\)) on rail eth1" "$out" ||
    { echo "FAIL: no cross-host sub-communicator on rail eth1 (local rank 1's)"; bad=1; }
fi
[ $bad -eq 0 ] || exit 1
echo "OK: every rail of every host carried bytes, results correct"
