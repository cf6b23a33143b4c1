#!/usr/bin/env bash
# Bad input a new user types: each tool names what is wrong and exits 2 (usage) or
# 1 (the job failed), never a misleading text: dccl-info --plan's unknown option,
# missing and bad values; dccl-relay's unknown flag; a DCCL_PROVIDER no provider
# answers to (a typo: unavailable, the available ones listed, not "not trusted");
# dccl-perf's usage errors on every rank, -c, --json and --trace paths (and --trace's
# recorder) checked before the sweep, -b 0, --trace=; dccl-info --job's --stale-s and port, --plan's --provider,
# --env/--topology with more arguments, --help naming --job's options; dccl-run's empty values, --timeout 1e30,
# --env/-x DCCL_RANK or DCCL_WORLD_SIZE.
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
# absent NAME TEXT: the last command's output does not hold TEXT.
absent() {
  if grep -qF -- "$2" "$T/out"; then echo "FAIL $1: '$2' unexpectedly in:"; sed 's/^/    /' "$T/out" | head -8
    fails=$((fails + 1)); else echo "ok   $1"; fi
}
# dccl-perf's usage errors on every rank: a launcher may stop rank 0 before it prints.
expect "perf: a usage error on rank 1 says why" 2 "-b is larger than -e" env DCCL_RANK=1 "$PERF" all_reduce -b 1M -e 8
for i in 1 2 3 4 5; do
  expect "perf: a usage error under dccl-run -n 4 says why ($i)" 2 "-b is larger than -e" \
    "$RUN" -n 4 --timeout 50 "$PERF" all_reduce -b 1M -e 8
done
expect "perf: -c takes 0 or 1" 2 "bad value '2' for -c (0 or 1)" "$PERF" all_reduce -c 2
expect "perf: --json into a missing folder fails before the sweep" 1 "cannot write --json $T/no/x.json" \
  "$RUN" -n 2 --timeout 50 "$PERF" all_reduce -b 8 -e 8 -n 1 -w 0 --json "$T/no/x.json"
absent "perf: no sweep before the --json error" "Avg bus bandwidth"
expect "perf: --trace into a missing folder fails before the sweep" 1 "cannot make the folder $T/no/t.json.dumps" \
  "$RUN" -n 2 --timeout 50 "$PERF" all_reduce -b 8 -e 8 -n 1 -w 0 --trace "$T/no/t.json"
absent "perf: no sweep before the --trace error" "Avg bus bandwidth"
expect "perf: --trace with the recorder off fails before the sweep" 1 "the flight recorder is off (DCCL_RECORDER=0)" \
  "$RUN" -n 2 --timeout 50 --env DCCL_RECORDER=0 "$PERF" all_reduce -b 8 -e 8 -n 1 -w 0 --trace "$T/off.json"
absent "perf: no sweep before the recorder-off error" "Avg bus bandwidth"
expect "perf: -b 0 runs" 0 "Avg bus bandwidth" "$RUN" -n 1 --timeout 50 "$PERF" all_reduce -b 0 -e 64 -n 1 -w 0
zeros=$(grep -cE '^\[0\] +0 +0 ' "$T/out")
if [ "$zeros" -eq 1 ]; then echo "ok   perf: -b 0: one row of size 0"; else
  echo "FAIL perf: -b 0: $zeros rows of size 0 (sizes below one element repeat that row)"; fails=$((fails + 1)); fi
# dccl-info --job's values: a bad number is refused, not read as 0 or wrapped.
S=0123456789abcdef0123456789abcdef
expect "job: --stale-s abc" 2 "bad value 'abc' for --stale-s" "$INFO" --job 127.0.0.1:29555 --secret $S --stale-s abc
expect "job: --stale-s -5" 2 "bad value '-5' for --stale-s" "$INFO" --job 127.0.0.1:29555 --secret $S --stale-s -5
expect "job: port 99999" 2 "the port must be 1 to 65535" "$INFO" --job 127.0.0.1:99999 --secret $S
expect "plan: unknown provider" 2 "names no provider 'bogus'" "$INFO" --plan --provider bogus
expect "plan: a provider mix" 0 "provider" "$INFO" --plan --provider shm+tcp
# An empty value (--hosts=, --rails '') is refused, not ignored: --hosts= ran the job on this host.
expect "run: --hosts= is refused" 2 "--hosts needs a value" "$RUN" --hosts= -n 2 true
expect "run: --rails '' is refused" 2 "--rails needs a value" "$RUN" --hosts 2 -n 2 --rails '' true
expect "run: -x '' is refused" 2 "-x needs a value" "$RUN" -n 1 -x '' true
# A timeout too long for the clock is no timeout (1e30 s overflowed to one already past).
expect "run: --timeout 1e30 runs the job" 0 "[0] done" "$RUN" --timeout 1e30 -n 1 echo done
# A size or rank for every rank contradicts -n: refused (the ranks waited DCCL_TIMEOUT_S, 600 s).
expect "run: --env DCCL_WORLD_SIZE is refused" 2 "--env DCCL_WORLD_SIZE=3: dccl-run sets DCCL_WORLD_SIZE" \
  "$RUN" -n 2 --timeout 50 --env DCCL_WORLD_SIZE=3 true
DCCL_RANK=1 expect "run: -x DCCL_RANK is refused" 2 "-x DCCL_RANK=1: dccl-run sets DCCL_RANK" \
  "$RUN" -n 2 --timeout 50 -x DCCL_RANK true
expect "run: --env DCCL_LOCAL_RANK still passes" 0 "[1] 5" "$RUN" -n 2 --timeout 50 --env DCCL_LOCAL_RANK=5 \
  sh -c 'echo $DCCL_LOCAL_RANK'
absent "run: --timeout 1e30 does not time out at once" "timeout after"
expect "perf: --trace= is refused" 2 "bad value '' for --trace (a file name)" "$PERF" all_reduce --trace=
expect "perf: -z 2 is refused as -z's" 2 "bad value '2' for -z (0 or 1)" "$PERF" all_reduce -z 2
# --json paths are tried before the work, with the reason.
expect "relay: --json to a missing folder" 1 "cannot write --json /nonexistent/x.json: No such file" "$RELAY" --json /nonexistent/x.json
expect "info: --dmabuf-check --json to a folder" 1 "cannot write --json /tmp: it is a folder" "$INFO" --dmabuf-check --mem sim --json /tmp
# dccl-info's modes without options refuse what follows them instead of ignoring it.
expect "info: --env refuses more" 2 "--env takes no further arguments, got '--plan'" "$INFO" --env --plan
expect "info: --topology refuses more" 2 "--topology takes no further arguments, got '--json'" "$INFO" --topology --json
timeout 60 "$INFO" --help > "$T/out" 2>&1
for o in "--stale-s S" "--ns NAMESPACE"; do
  if grep -qF -- "$o" "$T/out"; then echo "ok   info: --help names --job's $o"; else
    echo "FAIL info: --help does not name --job's $o"; fails=$((fails + 1)); fi
done
[ "$fails" -eq 0 ] && echo "bad_input: all passed" || { echo "bad_input: $fails failed"; exit 1; }
