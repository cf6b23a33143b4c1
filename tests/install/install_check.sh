#!/usr/bin/env bash
# What a user of an installed DirectCCL gets: `cmake --install` of the built tree
# into a temporary prefix; the soname links and the exported symbols (the C API
# only); the examples built from the prefix with find_package and, after the
# prefix has moved (both package files are relocatable), with pkg-config; each
# example run by the installed dccl-run without LD_LIBRARY_PATH; and a
# configure-only superproject that add_subdirectory()s the source tree.
# Usage: install_check.sh BUILD_DIR SOURCE_DIR CMAKE   (CC and CXX from the environment)
set -u
B=$1 S=$2 CMAKE=$3
unset LD_LIBRARY_PATH DirectCCL_DIR
T=$(mktemp -d) && trap 'rm -rf "$T"' EXIT
fails=0
ok() { echo "ok   $1"; }
fail() { echo "FAIL $1"; fails=$((fails + 1)); }
check() {  # check NAME CONDITION...
  local name=$1; shift
  if "$@"; then ok "$name"; else fail "$name"; fi
}
show() { sed 's/^/    /' "$1" | tail -n "${2:-20}"; }

# The version's one home is dccl.h; the soname carries major.minor while the major is 0.
ver() { sed -n "s/^#define DCCL_$1 \([0-9]*\).*/\1/p" "$S/include/dccl/dccl.h"; }
major=$(ver MAJOR) minor=$(ver MINOR) patch=$(ver PATCH)
if [ "$major" = 0 ]; then so=libdccl.so.0.$minor; else so=libdccl.so.$major; fi

P=$T/prefix
if ! "$CMAKE" --install "$B" --prefix "$P" > "$T/install.log" 2>&1; then
  echo "FAIL cmake --install $B --prefix $P:"; show "$T/install.log"; exit 1
fi
ok "cmake --install into a temporary prefix"
L=$P/lib
[ -d "$L" ] || L=$(dirname "$(find "$P" -name "libdccl.so.$major.$minor.$patch" | head -1)")

# ---- the library: soname links, exports ----
check "libdccl.so -> $so" test "$(readlink "$L/libdccl.so")" = "$so"
check "$so -> libdccl.so.$major.$minor.$patch" test "$(readlink "$L/$so")" = "libdccl.so.$major.$minor.$patch"
check "SONAME is $so" sh -c "readelf -d '$L/libdccl.so' | grep -q 'Library soname: \[$so\]'"
nm -D --defined-only "$L/libdccl.so" | awk '{print $3}' > "$T/exports"
grep -v '^dccl' "$T/exports" > "$T/foreign"
if [ -s "$T/foreign" ]; then
  fail "libdccl.so exports only dccl* symbols; also $(wc -l < "$T/foreign"):"; show "$T/foreign"
else ok "libdccl.so exports only dccl* symbols ($(wc -l < "$T/exports"))"; fi
for f in dcclGetVersion dcclCommInitFromEnv dcclAllReduce dcclGroupEnd dcclMemAlloc dcclCommGetStats; do
  grep -qx "$f" "$T/exports" || fail "libdccl.so does not export $f"
done

# The NCCL network plugin, beside the library: NCCL's tables and nothing else.
check "libnccl-net-dccl.so installed" test -f "$L/libnccl-net-dccl.so"
nm -D --defined-only "$L/libnccl-net-dccl.so" | awk '{print $3}' | sort > "$T/plugin"
printf 'ncclNetPlugin_v10\nncclNetPlugin_v11\nncclNetPlugin_v7\nncclNetPlugin_v8\nncclNetPlugin_v9\n' > "$T/plugin.want"
if cmp -s "$T/plugin" "$T/plugin.want"; then ok "libnccl-net-dccl.so exports ncclNetPlugin_v7..v11 only"
else fail "libnccl-net-dccl.so exports:"; show "$T/plugin"; fi

# ---- what else is installed ----
for f in include/dccl/dccl.h include/dccl/dccl.hpp; do check "$f installed" test -f "$P/$f"; done
check "DirectCCLConfig.cmake and ConfigVersion installed" \
  test -f "$L/cmake/DirectCCL/DirectCCLConfig.cmake" -a -f "$L/cmake/DirectCCL/DirectCCLConfigVersion.cmake"
check "dccl.pc installed" test -f "$L/pkgconfig/dccl.pc"
for t in dccl-run dccl-perf dccl-info dccl-relay; do check "bin/$t installed" test -x "$P/bin/$t"; done
if grep -rlF -e "$B" -e "$S" "$L/cmake" "$L/pkgconfig" > "$T/leaks"; then
  fail "package files name the build or source tree:"; show "$T/leaks"
else ok "package files name neither the build nor the source tree"; fi
"$P/bin/dccl-info" > "$T/info" 2>&1
check "installed dccl-info runs" grep -q "DirectCCL $major.$minor.$patch" "$T/info"
# dccl-perf links libdccl.so: found through its RUNPATH ($ORIGIN/../lib), not LD_LIBRARY_PATH.
"$P/bin/dccl-run" -n 2 --timeout 60 "$P/bin/dccl-perf" all_reduce -b 1K -e 1K -n 1 -w 0 -c 1 > "$T/perf" 2>&1
check "installed dccl-perf runs under the installed dccl-run without LD_LIBRARY_PATH" test $? -eq 0

# ---- the examples: build, run under the installed dccl-run ----
run_one() {  # run_one HOW DIR PREFIX N NAME [dccl-run options]: N ranks, each must print "...: ok"
  local how=$1 dir=$2 pre=$3 n=$4 name=$5; shift 5
  local out=$T/$how.$name.$#.${*##*=} rc
  "$pre/bin/dccl-run" -n "$n" --timeout 60 "$@" "$dir/$name" > "$out" 2>&1; rc=$?
  if [ $rc -eq 0 ] && [ "$(grep -c ': ok$' "$out")" -eq "$n" ]; then ok "$how: dccl-run -n $n ${*:+$* }$name"
  else fail "$how: dccl-run -n $n ${*:+$* }$name (exit $rc):"; show "$out"; fi
}
run_examples() {  # run_examples HOW DIR PREFIX
  local how=$1 dir=$2 pre=$3 name
  for name in allreduce ring_exchange sim_memory; do
    ldd "$dir/$name" | grep -q "libdccl.so.* => $pre/" ||
      { fail "$how: $name does not load libdccl.so from $pre:"; ldd "$dir/$name" | grep dccl; }
  done
  run_one "$how" "$dir" "$pre" 2 allreduce
  run_one "$how" "$dir" "$pre" 3 ring_exchange
  run_one "$how" "$dir" "$pre" 2 sim_memory --env DCCL_PEER_DIRECT=1
  run_one "$how" "$dir" "$pre" 2 sim_memory --env DCCL_PEER_DIRECT=0
}

if "$CMAKE" -S "$S/examples" -B "$T/ex-cmake" -DCMAKE_PREFIX_PATH="$P" -DCMAKE_BUILD_TYPE=Release \
     > "$T/ex-cmake.log" 2>&1 && "$CMAKE" --build "$T/ex-cmake" -j 2 >> "$T/ex-cmake.log" 2>&1; then
  ok "examples built with find_package(DirectCCL CONFIG)"
  run_examples find_package "$T/ex-cmake" "$P"
else fail "examples with find_package(DirectCCL CONFIG):"; show "$T/ex-cmake.log"; fi

# The prefix moves; pkg-config must follow it (dccl.pc finds the prefix from its own folder).
M=$T/moved
mv "$P" "$M"
mkdir "$T/ex-pc"
if make -s -C "$S/examples" PKG_CONFIG_PATH="${L/$P/$M}/pkgconfig" OUT="$T/ex-pc" > "$T/ex-pc.log" 2>&1; then
  ok "examples built with pkg-config --cflags --libs dccl from a moved prefix"
  run_examples pkg-config "$T/ex-pc" "$M"
else fail "examples with pkg-config:"; show "$T/ex-pc.log"; fi
# make clean needs no DirectCCL: it works without PKG_CONFIG_PATH.
if env -u PKG_CONFIG_PATH make -s -C "$S/examples" OUT="$T/ex-pc" clean > "$T/ex-clean.log" 2>&1 &&
   [ ! -e "$T/ex-pc/allreduce" ]; then
  ok "make -C examples clean without PKG_CONFIG_PATH"
else fail "make -C examples clean without PKG_CONFIG_PATH:"; show "$T/ex-clean.log"; fi

# ---- a superproject: add_subdirectory() of the source tree, configure only ----
mkdir -p "$T/super"
cat > "$T/super/CMakeLists.txt" <<EOF
cmake_minimum_required(VERSION 3.25)
project(Super LANGUAGES C CXX)
add_subdirectory("$S" directccl)
add_executable(app app.c)
target_link_libraries(app PRIVATE DirectCCL::dccl)
foreach(v DCCL_INSTALL DCCL_TESTS)
  if(\${v})
    message(FATAL_ERROR "\${v} is on in a subproject")
  endif()
endforeach()
EOF
echo 'int main(void) { return 0; }' > "$T/super/app.c"
if "$CMAKE" -S "$T/super" -B "$T/super/build" -DDCCL_CUDA=OFF > "$T/super.log" 2>&1; then
  ok "a superproject configures with add_subdirectory() and DirectCCL::dccl (install and tests off)"
else fail "superproject configure:"; show "$T/super.log"; fi

[ $fails -eq 0 ] && echo "install check: all passed" || echo "install check: $fails failed"
exit $((fails > 0))
