#!/bin/bash
# coll_check's large suite (>= 16 MiB, checked against float64 references) over
# libfabric's tcp;ofi_rxm (DCCL_TRUST_NETWORK=1, nothing on the socket path) with
# DCCL_NET_FLOWS endpoints per pair: the job passes, every rank logs that many
# libfabric flows, and the last flow of every rank's rail carried bytes. Further
# arguments go to dccl-run (--hosts 4 --fabric ...: across emulated hosts; exit 77,
# skipped, where they cannot be emulated; no namespace may be left).
# usage: fi_flows.sh DCCL_RUN COLL_CHECK RANKS FLOWS [dccl-run options...]
. "$(dirname "$0")/../multihost/lib.sh"
run=$1 check=$2 n=$3 flows=$4
shift 4
case " $* " in *" --hosts "*) need_emulation ;; esac
out=$(mktemp)
trap 'rm -f "$out"' EXIT
run_job "$out" "$run" -n "$n" "$@" --timeout 170 --env DCCL_PROVIDER=tcp --env DCCL_TRUST_NETWORK=1 \
  --env DCCL_NET_SOCK_BYTES=0 --env DCCL_NET_FLOWS="$flows" --env DCCL_TIMEOUT_S=120 --env DCCL_DEBUG=INFO \
  "$check" --suite large
k=$(grep -c "coll_check large .* 0 wrong, 0 failed calls" "$out")
[ "$k" -eq 3 ] || fail "$k of 3 coll_check settings reported no wrong element"
# "net: rank R of N on HOST uses ...; up to F libfabric flows per peer and rail (DCCL_NET_FLOWS)"
k=$(grep -o " net: rank [0-9]* of $n on .* uses .*up to $flows libfabric flows per peer" "$out" |
  awk '{ print $3 }' | sort -u | wc -l)
[ "$k" -eq "$n" ] || { grep " net: rank " "$out"; fail "$k of $n ranks logged $flows libfabric flows per peer"; }
# "net: rank R tcp;ofi_rxm on eth0, flow F of F: sent N bytes, ..." at close: the last flow moved data.
k=$(grep -o " net: rank [0-9]* tcp;ofi_rxm on [^,]*, flow $flows of $flows: sent [1-9][0-9]* bytes" "$out" |
  awk '{ print $3 }' | sort -u | wc -l)
[ "$k" -eq "$n" ] || { grep "flow .* of" "$out" | head; fail "on $k of $n ranks the last of $flows flows sent bytes"; }
echo "PASS: $n ranks over tcp;ofi_rxm with $flows flows per pair $*, the large suite checked"
