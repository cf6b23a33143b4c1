#!/bin/bash
# Failures across emulated hosts: every rank that must fail does so within its
# bound, naming the lost ranks and their host.
# usage: faults.sh MODE TRIALS DCCL_RUN HOST_FAULT
#   kill      kill -9 of rank 3 (host 1 of 2, 2 ranks each) during 1 MiB allreduces;
#             survivors (ranks 0-2) fail within 3 s
# Every mode but initfail: a process's log lines carry its rank (not a sub-communicator's).
#   linkdown  host 1's interface taken down (ip link set eth0 down in its namespace):
#             host 1 loses the store and host 0. Every rank fails within
#             DCCL_TIMEOUT_S (5 s) + 1 s, ranks 0 and 1 naming a rank of host 1
#   storestop the store is rank 0's (DCCL_ADDR on host 0); host 0's ranks are stopped
#             (SIGSTOP), store included: ranks 2 and 3 fail within DCCL_TIMEOUT_S (5 s)
#             + 1 s, although their reports cannot reach the store
#   abort     rank 3 calls dcclCommAbort while the others wait inside a hierarchical
#             allreduce (DCCL_TIMEOUT_S=20): ranks 0-2 fail within 2 s, naming the
#             abort. Rank 0 shares no sub-communicator with rank 3.
#   initfail  every child store on 127.0.0.1 (DCCL_SOCKET_IFNAME=lo), so the hierarchy's
#             cross-host sub-communicators cannot form: every rank's init fails
#             within DCCL_TIMEOUT_S (4 s) + 1 s, its phases sharing one deadline
# In linkdown, storestop and abort every rank lingers after its failure (host_fault --linger)
# until all have reported, so that none learns of the failure from another's exit.
# Exit 77 (skipped) where hosts cannot be emulated.
. "$(dirname "$0")/lib.sh"
need_emulation
mode=$1 trials=$2 run=$3 prog=$4
args=() lost_check="0 1 2" envs=()
case $mode in
  kill) timeout_s=5 checked="0 1 2" lost="3" bound_ms=3000 ;;
  linkdown)
    timeout_s=5 checked="0 1 2 3" lost_check="0 1" lost="2|3" bound_ms=$((timeout_s * 1000 + 1000))
    args=(--linger) ;;
  storestop)
    # Only the bound: a rank that timed out waiting for its host's other rank names
    # that one, whose report cannot reach it through the stopped store.
    timeout_s=5 checked="2 3" lost_check="" bound_ms=$((timeout_s * 1000 + 1000))
    args=(--linger)
    secret=$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')
    envs=(--env DCCL_ID= --env "DCCL_ADDR=198.18.0.1:$((20000 + RANDOM % 20000))" --env "DCCL_SECRET=$secret") ;;
  initfail) timeout_s=4 bound_ms=$((timeout_s * 1000 + 1000)) ;;
  abort)
    timeout_s=20 checked="0 1 2" lost="3" bound_ms=2000
    args=(--linger --abort-rank 3) ;;
  *) fail "unknown mode $mode" ;;
esac
now_ms() { date +%s%3N; }
if [ "$mode" = initfail ]; then
  passed=0 worst=0
  for t in $(seq 1 "$trials"); do
    dir=$(mktemp -d)
    "$run" --hosts 2 -n 4 --keep-going --timeout 90 --env DCCL_TIMEOUT_S=$timeout_s --env DCCL_SOCKET_IFNAME=lo \
      "$prog" "$dir" > "$dir/log" 2>&1 &
    pid=$!
    wait $pid
    ok=1
    for r in 0 1 2 3; do
      f=$dir/init.$r
      if [ ! -s "$f" ]; then
        echo "  rank $r: init did not fail"; ok=0; continue
      fi
      read -r ms text < "$f"
      [ "$ms" -gt $worst ] && worst=$ms
      echo "  rank $r: init failed after $ms ms: $text"
      [ "$ms" -le $bound_ms ] || ok=0
    done
    if [ $ok = 1 ]; then passed=$((passed + 1)); echo "trial $t: ok"; else echo "trial $t: FAILED"; sed -n '1,40p' "$dir/log"; fi
    [ -z "$(left_of $pid)" ] || fail "trial $t: namespaces left: $(left_of $pid)"
    rm -rf "$dir"
  done
  echo "$mode: $passed/$trials trials passed; slowest init $worst ms (bound $bound_ms ms)"
  [ $passed = "$trials" ]
  exit
fi
worst=0 passed=0
for t in $(seq 1 "$trials"); do
  dir=$(mktemp -d)
  "$run" --hosts 2 -n 4 --keep-going --timeout 150 --env DCCL_TIMEOUT_S=$timeout_s "${envs[@]}" "$prog" "$dir" \
    "${args[@]}" > "$dir/log" 2>&1 &
  pid=$!
  if ! wait_for "$dir/ready.*" 4 60; then
    kill -TERM $pid; wait $pid
    cat "$dir/log"; fail "trial $t: the ranks did not start within 60 s"
  fi
  sleep 0.$((RANDOM % 5))
  case $mode in
    kill) kill -KILL "$(cat "$dir/pid.3")" ;;
    linkdown) ip netns exec "dccl-$pid-h1" ip link set eth0 down || fail "trial $t: could not take host 1's link down" ;;
    abort) touch "$dir/go" ;;
    storestop) kill -STOP "$(cat "$dir/pid.0")" "$(cat "$dir/pid.1")" ;;
  esac
  t0=$(now_ms)
  if [ "$mode" != kill ]; then
    # Every rank reports (or the bound passes by far), then all may go.
    wait_for "$dir/result.*" $(echo $checked | wc -w) $((bound_ms / 1000 + 25)) || true
    touch "$dir/done"
    [ "$mode" = storestop ] && kill -KILL "$(cat "$dir/pid.0")" "$(cat "$dir/pid.1")"
    # The abort's own moment, as rank 3 recorded it.
    [ "$mode" = abort ] && [ -s "$dir/result.3" ] && read -r t0 _ < "$dir/result.3"
  fi
  # A rank still running 30 s after the kill, or after its mode's reports, is stuck:
  # its threads' stacks go to the log (for the trial's failure report), then it is killed.
  dump_stuck_ranks $pid "$dir" 30 &
  watch=$!
  wait $pid
  kill $watch 2>/dev/null; wait $watch 2>/dev/null
  ok=1 tw=0
  # A process's log lines carry its own rank, its sub-communicators' lines too.
  other=$(grep -E '^\[[0-9]+\] [^ ]+ \[rank [0-9]+\] DCCL' "$dir/log" |
    awk '{r = substr($1, 2, length($1) - 2); match($0, /\[rank [0-9]+\]/); if (substr($0, RSTART + 6, RLENGTH - 7) != r) print}')
  if [ -n "$other" ]; then echo "  log lines naming another rank than their process's:"; echo "$other" | head -3; ok=0; fi
  for r in $checked; do
    f=$dir/result.$r
    if [ ! -s "$f" ]; then
      echo "  rank $r: no failure recorded"; ok=0; continue
    fi
    read -r t1 text < "$f"
    ms=$((t1 - t0))
    [ $ms -gt $tw ] && tw=$ms
    names_rank=0 names_host=0
    if [ "$mode" = abort ]; then
      echo "$text" | grep -q "rank 3 aborted the communicator" && names_rank=1 names_host=1
    elif [[ " $lost_check " == *" $r "* ]]; then
      echo "$text" | grep -Eq "rank ($lost)\b" && names_rank=1
      echo "$text" | grep -q "dccl-h1" && names_host=1
    else
      names_rank=1 names_host=1  # a rank of the lost host cannot know why
    fi
    echo "  rank $r: failed after $ms ms: $text"
    if [ $ms -gt $bound_ms ] || [ $names_rank = 0 ] || [ $names_host = 0 ]; then ok=0; fi
  done
  [ $tw -gt $worst ] && worst=$tw
  if [ $ok = 1 ]; then
    passed=$((passed + 1)); echo "trial $t: ok (worst $tw ms)"
  else
    echo "trial $t: FAILED"; sed -n '1,40p' "$dir/log"
  fi
  [ -z "$(left_of $pid)" ] || fail "trial $t: namespaces left: $(left_of $pid)"
  rm -rf "$dir"
done
echo "$mode: $passed/$trials trials passed; worst detection $worst ms (bound $bound_ms ms)"
[ $passed = "$trials" ]
