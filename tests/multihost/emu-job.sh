#!/bin/bash
# Runs one job on emulated hosts and checks what dccl-run promises around it:
#   - the job passes (exit 0);
#   - every rank routes the ranks of its own emulated host through shm and all
#     others through tcp;ofi_rxm (from the DCCL_DEBUG=INFO transport lines),
#     on the expected number of hosts;
#   - no namespace of this dccl-run (dccl-<pid>-*) is left afterwards.
# usage: emu-job.sh HOSTS DCCL_RUN [dccl-run options...] prog [args...]
# Exit 77 (skipped) where hosts cannot be emulated.
. "$(dirname "$0")/lib.sh"
need_emulation
hosts=$1 run=$2
shift 2
out=$(mktemp)
trap 'rm -f "$out"' EXIT
"$run" --env DCCL_DEBUG=INFO "$@" >"$out" 2>&1 &
pid=$!
wait $pid
rc=$?
if [ $rc -ne 0 ]; then
  cat "$out"
  fail "the job exited with $rc"
fi
grep -v " DCCL INFO " "$out"
left=$(left_of $pid)
[ -z "$left" ] || fail "dccl-run (pid $pid) left namespaces behind: $left"
# "[W] ... net: rank R of N on HOST[/boot id] uses shm for K ranks, tcp;ofi_rxm for M ranks",
# W the world rank (dccl-run's prefix). Lines of smaller communicators (splits) are skipped.
grep -h " net: rank [0-9]* of [0-9]* on .* uses " "$out" | sort -u | awk -v want="$hosts" '
  {
    w = substr($1, 2, length($1) - 2)
    k = 0
    for (i = 2; i <= NF; ++i) {
      if ($i == "rank" && $(i + 2) == "of" && $(i + 4) == "on") { n = $(i + 3); h = $(i + 5); sub("/.*", "", h) }
      if ($i == "for" && $(i - 1) == "shm") k = $(i + 1)
      if ($i == "for" && $(i - 1) == "tcp;ofi_rxm") t = $(i + 1)
    }
    if ($0 !~ /tcp;ofi_rxm for/) t = 0
    if (n + 0 > world) world = n + 0
    ++lines; L[lines] = w; N[lines] = n; H[lines] = h; S[lines] = k; T[lines] = t
  }
  END {
    for (l = 1; l <= lines; ++l) {
      if (N[l] != world) continue
      w = L[l]
      if (!(w in host)) { host[w] = H[l]; size[H[l]]++ }
      if (host[w] != H[l]) { print "FAIL: rank " w " reported hosts " host[w] " and " H[l]; bad = 1 }
      shm[w] = S[l]; tcp[w] = T[l]
    }
    for (h in size) ++nh
    if (nh != want) { print "FAIL: ranks on " nh + 0 " hosts, expected " want; bad = 1 }
    for (r = 0; r < world; ++r) {
      if (!(r in host)) { print "FAIL: rank " r " reported no transport line"; bad = 1; continue }
      h = host[r]
      if (h !~ /^dccl-h[0-9]+$/) { print "FAIL: rank " r " runs on host " h ", not an emulated one"; bad = 1 }
      if (shm[r] + 0 != size[h] || tcp[r] + 0 != world - size[h]) {
        print "FAIL: rank " r " on " h " (" size[h] " ranks there) uses shm for " shm[r] + 0 \
              " and tcp;ofi_rxm for " tcp[r] + 0 " of " world " ranks"
        bad = 1
      }
    }
    if (world == 0) { print "FAIL: no transport lines (DCCL_DEBUG=INFO)"; bad = 1 }
    if (!bad) printf "OK: %d ranks on %d emulated hosts, shm only within a host\n", world, nh
    exit bad
  }' || exit 1
echo "OK: no namespace of dccl-run $pid left"
