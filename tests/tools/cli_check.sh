#!/usr/bin/env bash
# What a new user types first: dccl-info's help, invalid settings and
# DCCL_PEER_DIRECT=0; dccl-run's -np, -x K=V and -x NAME; the data path each
# memory kind takes, logged at init. Usage: cli_check.sh BUILD_DIR
set -u
B=$1
INFO=$B/tools/dccl-info RUN=$B/tools/dccl-run PERF=$B/tools/dccl-perf
T=$(mktemp -d) && trap 'rm -rf "$T"' EXIT
fails=0
check() {  # check NAME CONDITION...: runs the condition, reports
  local name=$1; shift
  if "$@"; then echo "ok   $name"; else echo "FAIL $name"; fails=$((fails + 1)); fi
}
has() { grep -q -- "$2" "$1" || { echo "  '$2' not in $1:"; sed 's/^/    /' "$1" | head -20; return 1; }; }
hasnt() { ! grep -q -- "$2" "$1" || { echo "  '$2' unexpectedly in $1"; return 1; }; }

"$INFO" --help > "$T/help" 2>&1; rc=$?
check "dccl-info --help exits 0" test $rc -eq 0
check "dccl-info --help prints the usage" has "$T/help" "usage: dccl-info"
"$INFO" --bogus > "$T/bad" 2>&1; rc=$?
check "dccl-info refuses an unknown option with 2" test $rc -eq 2

DCCL_PEER_DIRECT=bogus DCCL_TIMEOUT_S=abc "$INFO" > "$T/inv" 2>&1; rc=$?
check "dccl-info exits 1 on invalid settings" test $rc -eq 1
check "dccl-info flags DCCL_TIMEOUT_S=abc" has "$T/inv" "INVALID: DCCL_TIMEOUT_S"
check "dccl-info flags DCCL_PEER_DIRECT=bogus" has "$T/inv" "INVALID: DCCL_PEER_DIRECT=bogus is not auto, 1 or 0"
check "no viability layers for an invalid DCCL_PEER_DIRECT" hasnt "$T/inv" "\[pass\]"
DCCL_TIMEOUT_S=abc "$INFO" --env > "$T/env" 2>&1; rc=$?
check "dccl-info --env exits 1 on invalid settings" test $rc -eq 1
check "dccl-info --env marks the invalid setting" has "$T/env" "set to 'abc'  INVALID"

# Settings init refuses after loading them (the algorithm, provider, rails, rendezvous, secret,
# the store's interface: DCCL_SOCKET_IFNAME=nosuch0 was not flagged, exit 0).
for kv in DCCL_ALGO=bogus DCCL_PROVIDER=bogus DCCL_PROVIDER=sockets DCCL_ADDR=notanaddr DCCL_ADDR=h:99999 DCCL_SECRET=zz \
          DCCL_SOCKET_IFNAME=nosuch0; do
  env "$kv" "$INFO" > "$T/set" 2>&1; rc=$?
  check "dccl-info exits 1 on $kv" test $rc -eq 1
  check "dccl-info flags $kv" has "$T/set" "INVALID: ${kv%%=*}"
done
if "$INFO" | grep -q "^  rail 0"; then  # tcp offers interfaces here: a name it does not offer fails init
  DCCL_NET_IFNAME=nosuch0 "$INFO" > "$T/set" 2>&1; rc=$?
  check "dccl-info exits 1 on DCCL_NET_IFNAME=nosuch0" test $rc -eq 1
  check "dccl-info flags DCCL_NET_IFNAME=nosuch0" has "$T/set" "INVALID: DCCL_NET_IFNAME"
fi
DCCL_ALGO=allreduce:ring DCCL_PROVIDER=tcp DCCL_SECRET=0123456789abcdef0123456789abcdef DCCL_ADDR=127.0.0.1:2000 \
  "$INFO" > "$T/set" 2>&1; rc=$?
check "dccl-info exits 0 on valid algorithm, provider, secret and address" test $rc -eq 0

DCCL_PEER_DIRECT=0 "$INFO" > "$T/pd0" 2>&1; rc=$?
check "dccl-info with DCCL_PEER_DIRECT=0 exits 0" test $rc -eq 0
check "DCCL_PEER_DIRECT=0: off by request" has "$T/pd0" "off by request"
check "DCCL_PEER_DIRECT=0: no layer listed as passed" hasnt "$T/pd0" "\[pass\]"
"$INFO" > "$T/auto" 2>&1
check "default: the layers are listed" has "$T/auto" "\[pass\]"

"$RUN" --help > "$T/runhelp" 2>&1
check "dccl-run --help documents -x NAME" has "$T/runhelp" "-x NAME"
check "dccl-run --help documents -np" has "$T/runhelp" "-np"
DCCL_CLI_A=from-here "$RUN" -np 2 -x DCCL_CLI_A -x DCCL_CLI_B=given --timeout 60 \
  sh -c 'test "$DCCL_CLI_A" = from-here && test "$DCCL_CLI_B" = given && test "$DCCL_WORLD_SIZE" = 2' \
  > "$T/x" 2>&1; rc=$?
check "-np 2 -x NAME -x K=V reach every rank" test $rc -eq 0
env -u DCCL_CLI_UNSET "$RUN" -n 1 -x DCCL_CLI_UNSET true > "$T/xu" 2>&1; rc=$?
check "-x NAME of an unset variable is a usage error" test $rc -eq 2
check "-x NAME of an unset variable says so" has "$T/xu" "DCCL_CLI_UNSET is not set"

"$RUN" -n 2 -x DCCL_DEBUG=INFO -x DCCL_PEER_DIRECT=0 --timeout 60 "$PERF" all_reduce -b 8 -e 8 -n 1 -w 0 \
  > "$T/log0" 2>&1; rc=$?
check "init with DCCL_PEER_DIRECT=0 runs" test $rc -eq 0
check "init logs: sim memory off by request" has "$T/log0" "data path: sim memory: host-staged: off by request (DCCL_PEER_DIRECT=0)"
check "init logs: host memory in place" has "$T/log0" "data path: host memory"
"$RUN" -n 2 -x DCCL_DEBUG=INFO --timeout 60 "$PERF" all_reduce -b 8 -e 8 -n 1 -w 0 > "$T/loga" 2>&1; rc=$?
check "init in auto mode runs" test $rc -eq 0
check "init logs the sim path and why (auto)" \
  grep -Eq "data path: sim memory: (peer-direct \(every viability layer passed\)|host-staged: layer)" "$T/loga"

# dccl-perf: valid JSON on stdout under dccl-run --no-prefix, with the run's
# facts; nccl-tests' -a and -m accepted (-m multiplies the operations), -G refused.
"$RUN" -n 2 --no-prefix -x DCCL_PEER_DIRECT=0 --timeout 60 "$PERF" all_reduce -b 1K -e 4K -f 4 -n 2 -w 1 \
  --mem sim -a 1 -m 3 --json > "$T/perf.json" 2> "$T/perf.err"; rc=$?
check "dccl-perf --json under dccl-run --no-prefix runs" test $rc -eq 0
check "the JSON parses and carries the run's facts" python3 - "$T/perf.json" <<'PY'
import json, sys
rows = json.load(open(sys.argv[1]))
assert [r["size"] for r in rows] == [1024, 4096], rows
for r in rows:
    assert r["mem"] == "sim" and r["peer_direct"] == "0" and r["provider"], r
    assert r["avg_busbw_gbps"] > 0 and r["out_of_place"]["wrong"] == 0, r
    assert r["out_of_place"]["staged_per_byte"] > 0, r  # staged: bytes crossed host memory
mean = sum((r["out_of_place"]["busbw_gbps"] + r["in_place"]["busbw_gbps"]) / 2 for r in rows) / len(rows)
assert abs(rows[0]["avg_busbw_gbps"] - mean) <= 1e-5 * max(mean, 1e-9) + 1e-6, (rows[0]["avg_busbw_gbps"], mean)
PY
"$RUN" -n 2 --timeout 60 "$PERF" all_reduce -b 8 -e 8 -n 1 -w 0 --json > "$T/prefixed" 2>/dev/null
check "with the prefix the JSON lines carry '[0] ' (what --no-prefix is for)" has "$T/prefixed" "^\[0\] \["
"$PERF" all_reduce -G 1 > "$T/g" 2>&1; rc=$?
check "-G is refused with 2" test $rc -eq 2
check "-G says why" has "$T/g" "CUDA graph"
"$PERF" --help > "$T/perfhelp" 2>&1
check "dccl-perf --help explains staged/B" has "$T/perfhelp" "staged/B with --mem"
for f in -a -m -G -t -g -b -e -f -i -n -w -c -d -o -r -z --json --mem --peer-direct; do
  check "README lists dccl-perf's $f" grep -q -- "$f" "$(dirname "$0")/../../README.md"
done

# dccl-run --bind-to: each rank alone on a CPU of its own when the ranks fit the
# CPUs (the default) or when asked; the whole set with none; a bad value refused.
ncpu=$(nproc)
"$RUN" -n 2 --timeout 30 sh -c 'grep Cpus_allowed_list /proc/self/status' > "$T/bind" 2>&1
if [ "$ncpu" -ge 2 ]; then
  check "dccl-run binds 2 ranks to a CPU each by default" \
    test "$(grep -c 'Cpus_allowed_list:[[:space:]]*[0-9]*$' "$T/bind")" -eq 2
  check "dccl-run: the two ranks' CPUs differ" \
    test "$(awk '{print $NF}' "$T/bind" | sort -u | wc -l)" -eq 2
fi
mine=$(grep Cpus_allowed_list /proc/self/status | awk '{print $NF}')
"$RUN" -n 2 --bind-to none --timeout 30 sh -c 'grep Cpus_allowed_list /proc/self/status' > "$T/nobind" 2>&1
check "dccl-run --bind-to none keeps dccl-run's CPUs" \
  test "$(awk '{print $NF}' "$T/nobind" | sort -u)" = "$mine"
# More ranks than CPUs: consecutive ranks share a CPU, every CPU is used, rank r on
# the (r * CPUs / N)-th; --bind-to none leaves them all on dccl-run's CPUs.
over=$((2 * ncpu + 1))
"$RUN" -n $over --timeout 30 sh -c 'grep Cpus_allowed_list /proc/self/status' > "$T/over" 2>&1
cpus=$(python3 -c "import os; print(' '.join(map(str, sorted(os.sched_getaffinity(0)))))")
want=$(python3 -c "c='$cpus'.split(); n=$over; print(' '.join(c[r * len(c) // n] for r in range(n)))")
got=$(sed -n 's/^\[\([0-9]*\)\] Cpus_allowed_list:[[:space:]]*\([0-9]*\)$/\1 \2/p' "$T/over" | sort -n | awk '{printf "%s%s", (NR > 1 ? " " : ""), $2}')
check "dccl-run binds $over ranks on $ncpu CPUs in blocks of consecutive ranks ($want)" test "$got" = "$want"
"$RUN" -n $over --bind-to none --timeout 30 sh -c 'grep Cpus_allowed_list /proc/self/status' > "$T/overnone" 2>&1
check "dccl-run --bind-to none leaves more ranks than CPUs unbound" \
  test "$(awk '{print $NF}' "$T/overnone" | sort -u)" = "$mine"
"$RUN" -n 2 --bind-to socket true > "$T/badbind" 2>&1; rc=$?
check "dccl-run --bind-to socket is refused with 2" test $rc -eq 2
check "dccl-run says what --bind-to takes" has "$T/badbind" "core or none"

# dccl-run: each rank a session (and process group) of its own, so that autogroup
# scheduling shares a CPU between it and the launching session's busy processes as
# between two sessions; signals still reach the rank and what it started.
# /proc/PID/stat: pid (comm) state ppid pgrp session ... (no procps needed)
"$RUN" -n 2 --timeout 30 sh -c 'set -- $(cat /proc/$$/stat); echo "pid $1 sid $6 pgid $5"' > "$T/sess" 2>&1
check "dccl-run: every rank leads its own session and process group" \
  test "$(awk '$2 == "pid" && $3 == $5 && $3 == $7' "$T/sess" | wc -l)" -eq 2
"$RUN" -n 2 --timeout 60 sh -c "sleep 300 & echo \$! > $T/child.\$DCCL_RANK; wait" > "$T/term" 2>&1 &
runpid=$!
for _ in $(seq 100); do [ -s "$T/child.0" ] && [ -s "$T/child.1" ] && break; sleep 0.1; done
kill -TERM $runpid; wait $runpid; rc=$?
check "dccl-run ends with 143 on SIGTERM" test $rc -eq 143
sleep 0.5
left=""
for f in "$T"/child.*; do  # a zombie (ended, not yet reaped by whoever adopted it) counts as ended
  st=$(awk '{print $3}' "/proc/$(cat "$f")/stat" 2>/dev/null); [ -n "$st" ] && [ "$st" != Z ] && left="$left $(cat "$f")"
done
check "SIGTERM to dccl-run ends what the ranks started (left:${left:- none})" test -z "$left"

[ $fails -eq 0 ] && echo "cli: all checks passed" || echo "cli: $fails check(s) failed"
exit $(( fails > 0 ))
