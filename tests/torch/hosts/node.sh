#!/bin/bash
# One node of a two-host torchrun job, started by dccl-run --hosts on its emulated
# host (DCCL_RANK: the host's index). Runs
#   torchrun --nnodes 2 --nproc-per-node 2 --rdzv-backend c10d
# with the rendezvous on host 0 (198.18.0.1), as users start a job on two machines.
# usage: node.sh PYTHON PORT SCRIPT [args...]
python=$1 port=$2
shift 2
node=$DCCL_RANK
# The workers bootstrap from torchrun's store, not dccl-run's.
unset DCCL_RANK DCCL_WORLD_SIZE DCCL_LOCAL_RANK DCCL_LOCAL_SIZE DCCL_ID
addr=198.18.0.$((node + 1))
# is_host: this host's name (dccl-h<N>) resolves nowhere, so torchrun is told who hosts the store.
is_host=$([ "$node" = 0 ] && echo true || echo false)
# gloo (the reference group) must use the host's interface, not its unresolvable name.
export GLOO_SOCKET_IFNAME=eth0
exec "$python" -m torch.distributed.run --nnodes 2 --nproc-per-node 2 --rdzv-backend c10d \
  --rdzv-endpoint 198.18.0.1:"$port" --rdzv-id dccl-hosts --rdzv-conf "is_host=$is_host,join_timeout=120" \
  --local-addr "$addr" --max-restarts 0 --redirects 1 --tee 1 "$@"
