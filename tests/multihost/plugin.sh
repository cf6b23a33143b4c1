#!/bin/bash
# The NCCL plugin's checks across emulated hosts (network and UTS namespaces):
#   plugin.sh DCCL_RUN [dccl-run options...] prog [args...]
# Exit 77 (skipped) where hosts cannot be emulated.
. "$(dirname "$0")/lib.sh"
need_emulation
exec "$@"
