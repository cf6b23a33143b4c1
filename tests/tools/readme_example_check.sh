#!/usr/bin/env bash
# README.md's C example, taken from the page as it is: built with the README's own
# command line against the build tree, run on 4 ranks with dccl-run, and every rank
# prints the sum the README says (4 8 12 16).
#   readme_example_check.sh SOURCE_DIR BUILD_DIR
set -euo pipefail
src=$1 build=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
bad() { echo "readme_example_check: FAILED: $*"; exit 1; }
# The first ```c block of the README, and the cc line of the block after it.
awk '/^```c$/ {on = 1; next} on && /^```$/ {exit} on {print}' "$src/README.md" >"$tmp/app.c"
[ -s "$tmp/app.c" ] || bad "no \`\`\`c block in README.md"
line=$(grep -m1 '^cc -std=c99 app.c ' "$src/README.md") || bad "no 'cc -std=c99 app.c' line in README.md"
line=${line//-Iinclude/-I$src/include}
line=${line//-Lbuild/-L$build}
line=${line//\$PWD\/build/$build}
(cd "$tmp" && eval "$line -Wall -Wextra -Werror") || bad "the README's build line failed: $line"
out=$("$build/tools/dccl-run" -n 4 --timeout 60 "$tmp/app" 2>&1) || bad "the example failed: $out"
echo "$out"
[ "$(echo "$out" | grep -c '4 8 12 16$')" = 4 ] || bad "not every rank printed 4 8 12 16"
echo "readme_example_check: OK"
