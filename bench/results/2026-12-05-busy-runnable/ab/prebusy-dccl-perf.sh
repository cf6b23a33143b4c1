#!/bin/sh
# The tree before the busy mark reads the segment's settings by their old names.
[ -n "${DCCL_SEGMENT_BYTES+x}" ] && export DCCL_SMEM_BYTES="$DCCL_SEGMENT_BYTES"
[ -n "${DCCL_SEGMENT_CHUNK_BYTES+x}" ] && export DCCL_SMEM_CHUNK_BYTES="$DCCL_SEGMENT_CHUNK_BYTES"
exec "$(dirname "$0")/../../prebusy/build/tools/dccl-perf" "$@"
