# Shared by the multihost test scripts (sourced, bash).
# skip: exit 77 (ctest SKIP_RETURN_CODE) with the reason.
skip() { echo "SKIPPED: $*"; exit 77; }
fail() { echo "FAIL: $*"; exit 1; }

# Emulated hosts need root, iproute2 and network namespaces.
need_emulation() {
  PATH=$PATH:/usr/sbin:/sbin
  [ "$(id -u)" = 0 ] || skip "emulated hosts need root to create network namespaces (running as uid $(id -u))"
  command -v ip >/dev/null || skip "emulated hosts need ip (iproute2), which is not installed"
  command -v tc >/dev/null || skip "emulated hosts need tc (iproute2) for --rate, which is not installed"
  local why
  why=$(unshare --net true 2>&1) || skip "cannot create a network namespace here: ${why:-unshare --net failed}"
}

# The namespaces a dccl-run with pid $1 left behind (names, one a line).
left_of() { ls /run/netns 2>/dev/null | grep "^dccl-$1-" || true; }

# run_job OUT DCCL_RUN [arguments...]: the job in the background, its output in OUT
# (shown less the INFO lines); fails when it exits non-zero or leaves namespaces behind.
run_job() {
  local out=$1 pid rc left
  shift
  "$@" >"$out" 2>&1 &
  pid=$!
  wait $pid
  rc=$?
  grep -v " DCCL INFO " "$out"
  [ $rc -eq 0 ] || fail "the job exited with $rc"
  left=$(left_of $pid)
  [ -z "$left" ] || fail "dccl-run (pid $pid) left namespaces behind: $left"
}

# Waits up to $3 s until $2 files match the glob $1 (e.g. every rank started).
wait_for() {
  local i
  for i in $(seq 1 $(($3 * 10))); do
    [ "$(compgen -G "$1" | wc -l)" -ge "$2" ] && return 0
    sleep 0.1
  done
  return 1
}

# dump_stuck_ranks PID DIR SECONDS (in the background): when dccl-run PID still runs
# after SECONDS, every rank whose DIR/pid.<rank> process is alive gets its threads'
# stacks printed (gdb, when installed) and is killed, so a hang ends the trial with
# its cause on record instead of waiting for dccl-run's own limit.
dump_stuck_ranks() {
  local pid=$1 dir=$2 secs=$3 f p i
  for i in $(seq 1 $((secs * 10))); do
    kill -0 "$pid" 2>/dev/null || return 0
    sleep 0.1
  done
  for f in "$dir"/pid.*; do
    p=$(cat "$f" 2>/dev/null) || continue
    kill -0 "$p" 2>/dev/null || continue
    echo "STUCK: rank ${f##*.} (pid $p) still running ${secs} s on; its stacks:"
    if command -v gdb >/dev/null; then
      timeout 60 gdb -p "$p" -batch -ex "thread apply all bt" 2>/dev/null | grep -E '^(Thread|#)' | head -150
    fi
    kill -KILL "$p" 2>/dev/null
  done
}

# hold_hosts DCCL_RUN HOSTS [dccl-run options...]: emulated hosts for programs
# started with `ip netns exec` (flows, other launchers): dccl-run in the background
# with one sleeping rank per host. Sets held (its pid) and emu (dccl-<pid>, the
# namespaces' prefix). release_hosts ends it (SIGTERM: dccl-run removes the
# namespaces, after killing what else runs in them) and fails when any is left.
hold_hosts() {
  local run=$1 n=$2
  shift 2
  "$run" --hosts "$(printf '1%.0s+' $(seq 2 "$n"))1" "$@" --timeout 900 bash -c 'exec sleep 890' &
  held=$! emu=dccl-$!
  wait_for "/run/netns/$emu-h*" "$n" 20 || fail "the emulated hosts did not come up within 20 s"
  sleep 0.5
}
release_hosts() {
  [ -n "$held" ] || return 0
  # What the test started in the hosts and may outlive it (daemons' children, ranks
  # of an interrupted launcher): every process there but dccl-run's sleeping ranks.
  local p ns
  for ns in /run/netns/$emu-h*; do
    for p in $(ip netns pids "${ns##*/}" 2>/dev/null); do
      [ "$(cat /proc/$p/comm 2>/dev/null)" = sleep ] || kill -KILL "$p" 2>/dev/null
    done
  done
  kill "$held" 2>/dev/null
  wait "$held" 2>/dev/null
  local left
  left=$(left_of "$held")
  held=
  [ -z "$left" ] || fail "namespaces left behind: $(echo $left)"
}

# check_2x2 FILE: dccl-perf's output (all_reduce -b 8 -e 512K -f 16) of 4 ranks on 2
# emulated hosts: ranks 0,1 on dccl-h0 and 2,3 on dccl-h1, 5 sizes, 0 wrong.
check_2x2() {
  local r rows
  for r in 0 1 2 3; do
    grep -q "^#  Rank  $r Pid [0-9]* on dccl-h$((r / 2)) " "$1" || fail "rank $r is not on dccl-h$((r / 2))"
  done
  rows=$(awk '$1 ~ /^[0-9]+$/ && $3 == "float"' "$1")
  [ "$(echo "$rows" | wc -l)" = 5 ] || fail "expected 5 sizes (8 B to 512 KiB) in dccl-perf's output"
  echo "$rows" | awk '$9 != 0 || $13 != 0 { bad = 1 } END { exit bad }' || fail "wrong results"
}
