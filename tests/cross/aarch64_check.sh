#!/usr/bin/env bash
# The library builds for aarch64: every source of src/ (the CUDA toolkit's files aside)
# and the examples parsed by a cross compiler with the build's warnings as
# errors (x86 intrinsics, target("avx2") and PAUSE must stay behind their
# guards), and the spin-wait hint's assembly assembled. Compile only: nothing
# links or runs. libfabric's headers are the same on every architecture; a copy
# of rdma/ is all the cross compiler sees of the host's headers.
# Usage: aarch64_check.sh SOURCE_DIR CROSS_CXX FABRIC_INCLUDE_DIR
set -u
S=$1 CXX=$2 FI=$3
T=$(mktemp -d) && trap 'rm -rf "$T"' EXIT
mkdir "$T/inc" && cp -r "$FI/rdma" "$T/inc/" || { echo "FAIL no rdma/ headers in $FI"; exit 1; }
flags=(-Wall -Wextra -Wno-unused-parameter -Werror -I"$S/include" -I"$S/src" -isystem "$T/inc")
fails=0

find "$S/src" -name '*.cc' -not -path '*/mem/cuda/toolkit/*' | sort > "$T/sources"
n=$(wc -l < "$T/sources")
if xargs -P "$(nproc)" -n 4 "$CXX" -std=c++20 -fsyntax-only "${flags[@]}" < "$T/sources" > "$T/log" 2>&1; then
  echo "ok   $n sources of src/ compile for aarch64"
else echo "FAIL src/ for aarch64:"; head -40 "$T/log"; fails=1; fi

# core::cpu_relax's YIELD reaches the assembler only in an object file.
if "$CXX" -std=c++20 -O2 "${flags[@]}" -c "$S/src/sched/stream.cc" -o "$T/stream.o" > "$T/log" 2>&1 &&
   readelf -h "$T/stream.o" | grep -q 'AArch64'; then
  echo "ok   sched/stream.cc (spin-wait hint) assembles to an AArch64 object"
else echo "FAIL sched/stream.cc as an AArch64 object:"; head -20 "$T/log"; fails=1; fi

# One C file per call: given several, the g++ driver takes the second for C++.
if "$CXX" -x c -std=c99 -pedantic -fsyntax-only "${flags[@]}" "$S/examples/c/allreduce.c" > "$T/log" 2>&1 &&
   "$CXX" -x c -std=c99 -pedantic -fsyntax-only "${flags[@]}" "$S/examples/device/sim_memory.c" >> "$T/log" 2>&1 &&
   "$CXX" -std=c++20 -fsyntax-only "${flags[@]}" "$S/examples/cpp/ring_exchange.cc" >> "$T/log" 2>&1; then
  echo "ok   the examples (dccl.h as C99, dccl.hpp) compile for aarch64"
else echo "FAIL the examples for aarch64:"; head -20 "$T/log"; fails=1; fi
exit $fails
