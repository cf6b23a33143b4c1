"""Several flows per peer on a cloud fabric: the per-flow cap and ECMP collisions.

A peer's bandwidth is the least of its share of the NIC and F flows x the cap of one flow:

    peer_gbps = min(nic / sharing, F x cap)

Between leaves every flow takes one spine, chosen by a hash of its addresses and ports
(uniform over S spines, independent per flow). When the flows a leaf sends at once
land unevenly, a spine's uplink is shared by more flows than its share, and they slow
down. Rates are max-min fair (TCP's long-run share) under three limits: each flow's cap,
each host's NIC (the sum of its flows) and each spine uplink (the sum of the flows on it).
A collective step ends when its slowest host has sent its bytes:

  - one flow per peer, or F flows with equal bytes each: a host's step takes
    (bytes / F) / (its slowest flow's rate) (the flows that finish early are not refilled:
    an upper bound on the step);
  - F flows with the bytes sprayed in chunks and rebalanced (a slower flow gets fewer
    chunks): the host moves at the sum of its flows' rates.

Two terms for the emulated fabric (bench/results/2026-12-05-fabric-goals): there the cap is
per hash bucket of the ports (capped_gbps: flows sharing a bucket share a cap), and a
sprayed call keeps every flow's window queued until the end (queue_us: its last chunk
waits behind them).

collision_slowdown() is the expected step time over every hash of the flows, against
the step without collisions (flows spread as evenly as the spines allow), enumerated
exactly up to 4,096 hashes, sampled (seeded) above. Every leaf sends at once and hashes
its flows independently; a synchronised step waits for the slowest leaf, so at scale
the step meets the rare bad hash somewhere. Only the sending leaf's uplinks are
modelled: with one destination leaf (the emulated fabric) the spine->leaf links carry the
same flows.
"""
import functools
import itertools
import math
import random


EXACT_MAX = 4096  # hashes enumerated exactly; sampled above
SAMPLES = 2000


def peer_gbps(nic_gbps, flows, cap_gbps=0.0, sharing=1):
    """A peer's bandwidth: its share of the NIC, or F flows at their cap (0: no cap)."""
    share = nic_gbps / sharing
    return share if cap_gbps <= 0 else min(share, flows * cap_gbps)


def distinct_buckets(flows, buckets):
    """P(D = d) for d = 0..flows: the distinct buckets `flows` flows occupy when each hashes
    uniformly and independently into one of `buckets` (the occupancy distribution)."""
    p = [1.0] + [0.0] * flows
    for i in range(flows):  # flow i+1 lands in one of the d taken buckets or a new one
        q = [0.0] * (flows + 1)
        for d in range(i + 1):
            q[d] += p[d] * d / buckets
            q[d + 1] += p[d] * (buckets - d) / buckets
        p = q
    return p


def capped_gbps(nic_gbps, flows, cap_gbps, buckets=0):
    """peer_gbps where the cap is per hash bucket, not per flow (the emulator's htb classes:
    flows in one bucket share one cap): the expected min(NIC, D x cap) over the buckets D the
    flows occupy, their bytes sprayed so that each bucket runs full. buckets 0: a cap per flow."""
    if cap_gbps <= 0 or buckets <= 0:
        return peer_gbps(nic_gbps, flows, cap_gbps)
    return sum(pd * min(nic_gbps, d * cap_gbps) for d, pd in enumerate(distinct_buckets(flows, buckets)))


def queue_us(flows, window_bytes, step_bytes, gbps):
    """What a call of sprayed flows loses to the bytes it keeps queued: each flow holds up to
    its window (counted until the peer acknowledges, so it waits in the network's queues),
    and the call's last chunk waits behind them: min(flows x window, a step's bytes) at the
    peer's rate, once a call. One flow (not sprayed) or no window: 0."""
    if flows <= 1 or window_bytes <= 0:
        return 0.0
    return min(flows * window_bytes, step_bytes) / (gbps * 1e3)


def waterfill(spine_of, host_of, cap, nic, uplink):
    """Max-min fair rates of flows i (flow i on spine spine_of[i], sent by host host_of[i])
    under: rate_i <= cap (0: none); sum of a host's rates <= nic; sum of a spine's <= uplink."""
    n = len(spine_of)
    rate = [0.0] * n
    live = set(range(n))
    groups = [([i for i in range(n) if host_of[i] == h], nic) for h in set(host_of)]
    groups += [([i for i in range(n) if spine_of[i] == s], uplink) for s in set(spine_of)]
    while live:
        step = math.inf if cap <= 0 else min(cap - rate[i] for i in live)
        for members, limit in groups:
            active = [i for i in members if i in live]
            if active:
                step = min(step, (limit - sum(rate[i] for i in members)) / len(active))
        for i in live:
            rate[i] += step
        done = {i for i in live if cap > 0 and rate[i] >= cap - 1e-12}
        for members, limit in groups:
            if sum(rate[i] for i in members) >= limit - 1e-12:
                done |= {i for i in members if i in live}
        live -= done
    return rate


def step_rate(spine_of, hosts, flows, cap, nic, uplink, rebalance):
    """The slowest host's rate in one step (GB/s of its bytes)."""
    host_of = [h for h in range(hosts) for _ in range(flows)]
    rate = waterfill(spine_of, host_of, cap, nic, uplink)
    per_host = [rate[h * flows:(h + 1) * flows] for h in range(hosts)]
    return min(sum(r) if rebalance else flows * min(r) for r in per_host)


@functools.lru_cache(maxsize=None)
def leaf_slowdowns(hosts, flows, spines, cap, nic, uplink, rebalance, seed):
    """One leaf's step time over every hash (or the samples) / the even spread, sorted."""
    k = hosts * flows
    even = step_rate([i % spines for i in range(k)], hosts, flows, cap, nic, uplink, rebalance)
    if spines ** k <= EXACT_MAX:
        hashes = itertools.product(range(spines), repeat=k)
    else:
        rng = random.Random(seed)
        hashes = ([rng.randrange(spines) for _ in range(k)] for _ in range(SAMPLES))
    return tuple(sorted(even / step_rate(list(h), hosts, flows, cap, nic, uplink, rebalance) for h in hashes))


def collision_slowdown(hosts, flows, spines, cap, nic, uplink, rebalance=True, seed=1, leaves=1):
    """Expected step time over ECMP's hashes / the step time with the flows spread evenly
    (>= 1). hosts: hosts of one leaf sending at once, each over `flows` flows; leaves:
    leaves sending at once, hashed independently: the step waits for the slowest (the
    expected maximum of `leaves` draws from one leaf's distribution)."""
    slow = leaf_slowdowns(hosts, flows, spines, cap, nic, uplink, rebalance, seed)
    n = len(slow)
    # E[max of `leaves` iid draws] = sum over the sorted values of v_i (P(max <= v_i) - P(max <= v_(i-1))).
    return sum(v * (((i + 1) / n) ** leaves - (i / n) ** leaves) for i, v in enumerate(slow))
