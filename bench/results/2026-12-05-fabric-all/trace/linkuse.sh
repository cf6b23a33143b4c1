#!/bin/bash
cd /work/main/build-werror
./tools/dccl-run --hosts 4 -n 4 --timeout 300 --rate 1gbit --fabric --spines 2 --flow-rate 250mbit \
  bash -c 'taskset -c 0,1 python3 /tmp/txsample.py 8 & ./tools/dccl-perf all_gather -b 16M -e 16M -n 30 -w 2 -c 0 ${EXTRA}; wait'
