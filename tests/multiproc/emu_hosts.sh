#!/bin/sh
# Emulates hosts by host id alone (no namespaces): runs prog with DCCL_HOST_ID set
# from DCCL_RANK, so ranks of different "hosts" talk over tcp and the communicator
# builds its hierarchy. Under dccl-run:
#   emu_hosts.sh block PER prog args   ranks 0..PER-1 on h0, PER..2*PER-1 on h1, ...
#   emu_hosts.sh rr H prog args        rank r on h(r mod H)
#   emu_hosts.sh list A,B,... prog args  rank r on the host named by the r-th entry
mode=$1 arg=$2
shift 2
case $mode in
  block) id=h$((DCCL_RANK / arg)) ;;
  rr) id=h$((DCCL_RANK % arg)) ;;
  list) id=$(echo "$arg" | cut -d, -f$((DCCL_RANK + 1))) ;;
  *) echo "emu_hosts.sh: mode must be block, rr or list" >&2; exit 2 ;;
esac
DCCL_HOST_ID=$id exec "$@"
