#!/bin/bash
# The emulated network goes away however the job ends.
# usage: cleanup.sh MODE DCCL_RUN [dccl-run options, e.g. --fabric], MODE one of
#   sigterm    dccl-run gets SIGTERM mid-job: ranks end, namespaces removed, exit 143;
#              while the job runs, the root namespace's links are unchanged
#   sigint     the same with SIGINT (exit 130)
#   rank-fails one rank exits 3: the others are ended, namespaces removed, exit 3
#   sigkill    dccl-run gets SIGKILL: its ranks die with it (PR_SET_PDEATHSIG), its
#              namespaces stay until the next dccl-run --hosts removes them as stale
#   zombie     the same, and the next dccl-run comes before the killed one is reaped
#              (a parent that has not waited yet: bash reaps at once, so Python here)
# Exit 77 (skipped) where hosts cannot be emulated.
. "$(dirname "$0")/lib.sh"
need_emulation
mode=$1 run=$2
shift 2
if [ "$mode" = zombie ]; then
  exec python3 - "$run" <<'EOF'
import os, signal, subprocess, sys, time
run = sys.argv[1]
def left(pid):
    out = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    return [l.split()[0] for l in out.splitlines() if l.startswith("dccl-%d-" % pid)]
def fail(why):
    print("FAIL: " + why)
    sys.exit(1)
p = subprocess.Popen([run, "--hosts", "2", "-n", "2", "--timeout", "100", "sleep", "60"])
for _ in range(300):
    if left(p.pid): break
    time.sleep(0.1)
if not left(p.pid): fail("no namespace dccl-%d-* within 30 s" % p.pid)
os.kill(p.pid, signal.SIGKILL)
for _ in range(50):
    with open("/proc/%d/stat" % p.pid) as f:
        if f.read().rsplit(")", 1)[1].split()[0] == "Z": break
    time.sleep(0.1)
else:
    fail("dccl-run %d is not a zombie after SIGKILL" % p.pid)
if subprocess.run([run, "--hosts", "2", "-n", "2", "true"]).returncode != 0: fail("the next dccl-run --hosts failed")
stale = left(p.pid)
p.wait()
if stale: fail("namespaces of the killed, unreaped dccl-run %d left: %s" % (p.pid, " ".join(stale)))
print("OK: zombie: the next dccl-run removed the namespaces of the unreaped dccl-run %d" % p.pid)
EOF
fi
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
# Each rank writes its pid, then waits to be ended; in rank-fails rank 1 exits 3
# once the test has looked at the running job (file "go").
rank='echo $$ > "$0/pid.$DCCL_RANK"
  if [ "$1" = rank-fails ] && [ "$DCCL_RANK" = 1 ]; then
    while [ ! -e "$0/go" ]; do sleep 0.05; done
    exit 3
  fi
  exec sleep 60'

alive_ranks() {
  local f
  for f in "$dir"/pid.*; do
    [ -e "$f" ] && kill -0 "$(cat "$f")" 2>/dev/null && echo "rank $(basename "$f" | cut -d. -f2) (pid $(cat "$f"))"
  done
}

links_before=$(ip -o link show | awk -F': ' '{print $2}' | sort)
case $mode in
  sigint) sig=INT want=130 ;;
  sigterm) sig=TERM want=143 ;;
  sigkill) sig=KILL want=137 ;;
  rank-fails) sig= want=3 ;;
  *) fail "unknown mode $mode" ;;
esac
# A background job of a script ignores SIGINT; give dccl-run the default back.
env --default-signal=INT "$run" --hosts 2+1 "$@" --timeout 100 bash -c "$rank" "$dir" "$mode" &
pid=$!
wait_for "$dir/pid.*" 3 30 || { kill -KILL $pid; fail "the ranks did not start within 30 s"; }
[ -n "$(left_of $pid)" ] || fail "no namespace dccl-$pid-* while the job runs"
links_during=$(ip -o link show | awk -F': ' '{print $2}' | sort)
[ "$links_before" = "$links_during" ] || fail "the root namespace's links changed during the job:
$(diff <(echo "$links_before") <(echo "$links_during"))"
touch "$dir/go"
[ -n "$sig" ] && kill -$sig $pid
wait $pid
rc=$?
[ $rc -eq $want ] || fail "dccl-run exited with $rc after $mode, expected $want"
for i in $(seq 1 50); do [ -z "$(alive_ranks)" ] && break; sleep 0.1; done
[ -z "$(alive_ranks)" ] || fail "ranks still running after $mode: $(alive_ranks)"
if [ "$mode" = sigkill ]; then
  left=$(left_of $pid)
  [ -n "$left" ] || fail "dccl-run was SIGKILLed, yet its namespaces are gone: the stale case is not tested"
  echo "after SIGKILL: $(echo $left)"
  "$run" --hosts 2 -n 2 true || fail "the next dccl-run --hosts failed"
fi
left=$(left_of $pid)
[ -z "$left" ] || fail "namespaces of dccl-run $pid left after $mode: $(echo $left)"
echo "OK: $mode: exit $rc, no rank and no namespace of dccl-run $pid left"
