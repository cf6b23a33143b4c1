// Deprecated names that still work: settings and algorithm names that were
// renamed. A(deprecated name, current name). A deprecated setting is read when
// the current one is not set, with one warning per process (load_config); a
// deprecated algorithm name in DCCL_ALGO selects the current one, also warned once.
#pragma once

#define DCCL_CONFIG_ALIASES(A)                          \
  A("DCCL_SMEM_BYTES", "DCCL_SEGMENT_BYTES")             \
  A("DCCL_SMEM_CHUNK_BYTES", "DCCL_SEGMENT_CHUNK_BYTES")

#define DCCL_ALGO_ALIASES(A) \
  A("smem", "segment")       \
  A("smem_rs", "segment_rs")
