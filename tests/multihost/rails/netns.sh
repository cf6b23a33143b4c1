# Emulated hosts with several rails, built by hand (sourced, bash): H network
# namespaces with R interfaces each (eth0..eth<R-1>, 198.18.<rail>.<host+1>/24),
# one bridge per rail in a switch namespace, optionally every link shaped with
# tbf in both directions. The same layout as dccl-run --hosts H --rails R --rate.
#   rails_net_up H R [RATE]   build it (RATE as tc takes it, e.g. 1gbit); sets RAILS_NS
#   rails_ns H                the namespace of host H
#   rails_addr H R            host H's address on rail R
#   rails_net_down            remove everything built (callers trap it on EXIT)
#   rails_launch N PER PROG...  run N ranks, PER per host, ranks block-wise, through
#                             dcclCommInitFromEnv (rank 0 hosts the store on its eth0);
#                             returns the worst exit status
# Names: dcclrails-<pid>-h<H>, dcclrails-<pid>-sw (never dccl-<pid>-*, which
# dccl-run treats as its own).
RAILS_PREFIX=dcclrails-$$

# skip: exit 77 (ctest SKIP_RETURN_CODE) with the reason; fail: exit 1.
declare -F skip >/dev/null || skip() { echo "SKIPPED: $*"; exit 77; }
declare -F fail >/dev/null || fail() { echo "FAIL: $*"; exit 1; }
# Emulated hosts need root, iproute2 (ip, tc) and network namespaces.
rails_need_emulation() {
  PATH=$PATH:/usr/sbin:/sbin
  [ "$(id -u)" = 0 ] || skip "emulated hosts need root to create network namespaces (running as uid $(id -u))"
  command -v ip >/dev/null || skip "emulated hosts need ip (iproute2), which is not installed"
  command -v tc >/dev/null || skip "shaped links need tc (iproute2), which is not installed"
  local why
  why=$(unshare --net true 2>&1) || skip "cannot create a network namespace here: ${why:-unshare --net failed}"
}
RAILS_NS=()

rails_ns() { echo "$RAILS_PREFIX-h$1"; }
rails_addr() { echo "198.18.$2.$(($1 + 1))"; }

rails_net_down() {
  local ns
  for ns in "${RAILS_NS[@]}"; do ip netns del "$ns" 2>/dev/null; done
  RAILS_NS=()
}

rails_net_up() {
  local hosts=$1 rails=$2 rate=${3:-} h r sw=$RAILS_PREFIX-sw
  ip netns add "$sw" && RAILS_NS+=("$sw") || return 1
  ip -n "$sw" link set lo up
  for r in $(seq 0 $((rails - 1))); do
    ip -n "$sw" link add br$r type bridge stp_state 0 forward_delay 0 || return 1
    ip -n "$sw" link set br$r up
  done
  for h in $(seq 0 $((hosts - 1))); do
    local ns
    ns=$(rails_ns $h)
    ip netns add "$ns" && RAILS_NS+=("$ns") || return 1
    ip -n "$ns" link set lo up
    for r in $(seq 0 $((rails - 1))); do
      ip -n "$sw" link add h${h}r$r type veth peer name eth$r netns "$ns" || return 1
      ip -n "$sw" link set h${h}r$r master br$r up
      ip -n "$ns" addr add "$(rails_addr $h $r)/24" dev eth$r
      ip -n "$ns" link set eth$r up
      if [ -n "$rate" ]; then
        # Both directions: the switch port (towards the host) and the host's end.
        tc -n "$sw" qdisc replace dev h${h}r$r root tbf rate "$rate" burst 125000 latency 50ms || return 1
        tc -n "$ns" qdisc replace dev eth$r root tbf rate "$rate" burst 125000 latency 50ms || return 1
      fi
    done
    # A default route, as hosts have: the stores of split communicators listen on
    # the default-route interface's address.
    ip -n "$ns" route add default via 198.18.0.254 dev eth0 || return 1
  done
}

rails_launch() {
  local n=$1 per=$2 r pids=() worst=0 st
  shift 2
  local port=$((20000 + $$ % 20000))
  local secret
  secret=$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')
  for r in $(seq 0 $((n - 1))); do
    local h=$((r / per))
    ip netns exec "$(rails_ns $h)" env DCCL_RANK=$r DCCL_WORLD_SIZE=$n DCCL_ADDR="$(rails_addr 0 0):$port" \
      DCCL_SECRET="$secret" DCCL_HOST_ID=rails-h$h DCCL_LOCAL_RANK=$((r % per)) DCCL_LOCAL_SIZE=$per \
      timeout 300 "$@" &
    pids+=($!)
  done
  for r in "${pids[@]}"; do
    wait "$r"
    st=$?
    [ $st -gt $worst ] && worst=$st
  done
  return $worst
}
