#!/bin/sh
# Runs inside an emulated host's namespace (dccl-run --hosts): rail 1 (eth1) of this
# host sends at RATE instead of dccl-run's --rate, then the command runs.
rate=$1
shift
tc qdisc replace dev eth1 root tbf rate "$rate" burst 64kb latency 50ms || exit 9
exec "$@"
