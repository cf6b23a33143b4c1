#!/bin/bash
# per-call durations of allgather 16 MiB on the capped fabric, and TCP retransmissions
cd /work/main/build-werror
./tools/dccl-run --hosts 4 -n 4 --timeout 300 --rate 1gbit --fabric --spines 2 --flow-rate 250mbit \
  bash -c 'nstat -n >/dev/null; ./tools/dccl-perf all_gather -b 16M -e 16M -n 20 -w 2 -c 0 --trace /tmp/ag_trace.json; echo "rank $DCCL_RANK: $(nstat TcpRetransSegs TcpExtTCPLossProbes TcpExtTCPTimeouts 2>/dev/null | tail -n +2 | tr -s " " | tr "\n" ";")"'
