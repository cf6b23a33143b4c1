#!/usr/bin/env bash
# Bad input a new user types: each tool names what is wrong and exits 2 (usage) or
# 1 (the job failed), never a misleading text: dccl-info --plan's unknown option,
# missing and bad values; dccl-relay's unknown flag; a DCCL_PROVIDER no provider
# answers to (a typo: unavailable, the available ones listed, not "not trusted").
# Usage: bad_input_check.sh BUILD_DIR
set -u
B=$1
INFO=$B/tools/dccl-info RUN=$B/tools/dccl-run PERF=$B/tools/dccl-perf RELAY=$B/tools/dccl-relay
T=$(mktemp -d) && trap 'rm -rf "$T"' EXIT
fails=0
# expect NAME RC TEXT CMD...: CMD exits with RC and its output holds TEXT.
expect() {
  local name=$1 want=$2 text=$3; shift 3
  timeout 60 "$@" > "$T/out" 2>&1; local rc=$?
  if [ "$rc" -eq "$want" ] && grep -qF -- "$text" "$T/out"; then echo "ok   $name"; else
    echo "FAIL $name: exit $rc (want $want), '$text' expected in:"; sed 's/^/    /' "$T/out" | head -8
    fails=$((fails + 1))
  fi
}
expect "plan: unknown option" 2 "unknown option '--bogus'" "$INFO" --plan --bogus
expect "plan: missing value" 2 "--ranks needs a value" "$INFO" --plan --ranks
expect "plan: bad value" 2 "bad value 'abc' for --ranks" "$INFO" --plan --ranks abc
expect "plan: negative cores" 2 "bad value '-1' for --cores" "$INFO" --plan --cores -1
expect "relay: unknown flag" 2 "unknown flag '--bogus'" "$RELAY" --bogus
expect "relay: unknown flag=value" 2 "unknown flag '--bogus'" "$RELAY" --bogus=3
expect "relay: missing value" 2 "-b needs a value" "$RELAY" -b
expect "provider typo: unavailable" 1 "DCCL_PROVIDER shmm names no libfabric provider on this machine; available RDM providers: " \
  "$RUN" -n 1 --timeout 50 --env DCCL_PROVIDER=shmm "$PERF" all_reduce -b 8 -e 8 -n 1 -w 0
expect "untrusted provider: trust named" 1 "is not trusted" \
  "$RUN" -n 1 --timeout 50 --env DCCL_PROVIDER=sockets "$PERF" all_reduce -b 8 -e 8 -n 1 -w 0
[ "$fails" -eq 0 ] && echo "bad_input: all passed" || { echo "bad_input: $fails failed"; exit 1; }
