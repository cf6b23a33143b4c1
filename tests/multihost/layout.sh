#!/bin/bash
# dccl-run --hosts places ranks and builds hosts as documented:
#   - block-wise placement (5 ranks on 3 hosts: 2+2+1), explicit A+B+..., and
#     DCCL_LOCAL_RANK / DCCL_LOCAL_SIZE per emulated host;
#   - hostname dccl-h<h>, eth<r> = 198.18.<r>.<h+1>/24 per rail, loopback up;
#   - on --fabric, host h in its leaf's subnet, block-wise or --interleave'd;
#   - a tbf qdisc on eth<r> with --rate, its MTU with --mtu;
#   - usage errors (exit 2) and a one-line reason without root (exit 1).
# usage: layout.sh DCCL_RUN. Exit 77 (skipped) where hosts cannot be emulated.
. "$(dirname "$0")/lib.sh"
need_emulation
run=$1
probe='echo "rank=$DCCL_RANK/$DCCL_WORLD_SIZE local=$DCCL_LOCAL_RANK/$DCCL_LOCAL_SIZE host=$(hostname)" \
  "lo=$(ip -o link show lo | grep -c "UP,LOWER_UP")" \
  "addr=$(ip -o -4 addr show scope global | awk "{print \$2 \"=\" \$4}" | sort | tr "\n" " ")" \
  "qdisc=$(tc qdisc show dev eth0 | awk "{print \$2}")" \
  "$(ip -o link show eth0 | grep -o "mtu [0-9]*" | tr " " =)"'

expect() {  # expect "DCCL-RUN OPTIONS" LINE... : each line printed by the rank of that number
  local opts=$1 out
  shift
  out=$($run $opts bash -c "$probe" 2>&1) || fail "dccl-run $opts: exit $?: $out"
  for want in "$@"; do
    echo "$out" | grep -qxF -- "$want" || fail "dccl-run $opts: no line '$want' in:
$out"
  done
  echo "OK: dccl-run $opts"
}

expect "--hosts 3 -n 5" \
  "[0] rank=0/5 local=0/2 host=dccl-h0 lo=1 addr=eth0=198.18.0.1/24  qdisc=noqueue mtu=1500" \
  "[1] rank=1/5 local=1/2 host=dccl-h0 lo=1 addr=eth0=198.18.0.1/24  qdisc=noqueue mtu=1500" \
  "[2] rank=2/5 local=0/2 host=dccl-h1 lo=1 addr=eth0=198.18.0.2/24  qdisc=noqueue mtu=1500" \
  "[3] rank=3/5 local=1/2 host=dccl-h1 lo=1 addr=eth0=198.18.0.2/24  qdisc=noqueue mtu=1500" \
  "[4] rank=4/5 local=0/1 host=dccl-h2 lo=1 addr=eth0=198.18.0.3/24  qdisc=noqueue mtu=1500"
expect "--hosts 1+3 --rails 2 --rate 1gbit --mtu 9000" \
  "[0] rank=0/4 local=0/1 host=dccl-h0 lo=1 addr=eth0=198.18.0.1/24 eth1=198.18.1.1/24  qdisc=tbf mtu=9000" \
  "[1] rank=1/4 local=0/3 host=dccl-h1 lo=1 addr=eth0=198.18.0.2/24 eth1=198.18.1.2/24  qdisc=tbf mtu=9000" \
  "[3] rank=3/4 local=2/3 host=dccl-h1 lo=1 addr=eth0=198.18.0.2/24 eth1=198.18.1.2/24  qdisc=tbf mtu=9000"

# The fabric: hosts block-wise under the leaves (0, 1 under leaf 0), or with
# --interleave round-robin (host h under leaf h % 2), each in its leaf's subnet.
expect "--hosts 4 -n 4 --fabric --leaves 2" \
  "[1] rank=1/4 local=0/1 host=dccl-h1 lo=1 addr=eth0=198.18.0.2/24  qdisc=noqueue mtu=1500" \
  "[2] rank=2/4 local=0/1 host=dccl-h2 lo=1 addr=eth0=198.18.1.3/24  qdisc=noqueue mtu=1500"
expect "--hosts 4 -n 4 --fabric --leaves 2 --interleave" \
  "[1] rank=1/4 local=0/1 host=dccl-h1 lo=1 addr=eth0=198.18.1.2/24  qdisc=noqueue mtu=1500" \
  "[2] rank=2/4 local=0/1 host=dccl-h2 lo=1 addr=eth0=198.18.0.3/24  qdisc=noqueue mtu=1500" \
  "[3] rank=3/4 local=0/1 host=dccl-h3 lo=1 addr=eth0=198.18.1.4/24  qdisc=noqueue mtu=1500"

usage() {  # usage "DCCL-RUN OPTIONS" "part of the message"
  local out
  out=$($run $1 true 2>&1)
  local rc=$?
  [ $rc -eq 2 ] || fail "dccl-run $1: exit $rc, expected 2 (usage error): $out"
  echo "$out" | grep -qF -- "$2" || fail "dccl-run $1: message lacks '$2': $out"
  echo "OK: dccl-run $1: $(echo "$out" | head -1)"
}
usage "--hosts 3+1 -n 3" "--hosts 3+1: places 4 ranks but -n is 3"
usage "--hosts 4 -n 2" "--hosts 4: every host runs at least one rank, but -n is 2"
usage "--hosts 2" "--hosts 2: needs -n N"
usage "--hosts 2+x" "'x' is not a number of ranks"
usage "-n 2 --rails 2" "--rails, --rate, --mtu, --fabric, --no-default-route and --keep-net need --hosts"
usage "-n 2 --mtu 9000" "--rails, --rate, --mtu, --fabric, --no-default-route and --keep-net need --hosts"
usage "--hosts 2 -n 2 --mtu 100" "--mtu needs a number of bytes from 576 to 65535"
usage "--hosts 2 -n 2 --rails 0" "--rails needs a number of interfaces from 1 to 16"
usage "--hosts 2 -n 2 --spines 2" "--spines, --leaves, --interleave and --flow-rate need --fabric"
usage "--hosts 2 -n 2 --fabric --spines 0" "--spines needs a number from 1 to 16"
usage "--hosts 2 -n 2 --fabric --leaves 3" "--leaves needs a number from 1 to 2"
usage "--hosts 2 -n 2 --fabric --rails 2" "--fabric has one rail per host"
usage "--hosts 2 -n 2 --fabric --flow-rate 5" "--flow-rate 5: needs a number with a unit"
usage "--hosts 2 -n 2 --rate fast" "--rate fast: needs a number with a unit"

# Without root: one line that says why, exit 1, nothing created.
if command -v setpriv >/dev/null; then
  out=$(setpriv --reuid=65534 --regid=65534 --clear-groups "$run" --hosts 2 -n 2 true 2>&1)
  rc=$?
  [ $rc -eq 1 ] || fail "dccl-run --hosts as uid 65534: exit $rc, expected 1: $out"
  [ "$out" = "dccl-run: --hosts needs root to create network namespaces (running as uid 65534)" ] ||
    fail "dccl-run --hosts as uid 65534 said: $out"
  echo "OK: as uid 65534: $out"
else
  echo "setpriv not installed: the non-root message is not checked"
fi
