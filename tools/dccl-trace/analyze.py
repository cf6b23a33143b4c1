"""What the dumps of one communicator say: who did not enter or finish a call the
others did, calls that differ between ranks, who was slow, who waited on whom."""
import re
import statistics

ROOTED = ("broadcast", "reduce")


def call_text(c):
    text = "%s #%d (%d x %s" % (c["coll"], c["seq"], c["count"], c["type"])
    if c["coll"] in ROOTED:
        text += ", root %d" % c["root"]
    if c.get("tag"):
        text += ", %s #%d" % (c["tag"], c.get("user_seq", 0))
    return text + ")"


def signature(c):
    sig = {"coll": c["coll"], "count": c["count"], "type": c["type"]}
    if c["coll"] in ROOTED:
        sig["root"] = c["root"]
    return sig


def named_ranks(reason, me):
    """Ranks a failure text names ("rank 3 on node7", "rank 3 (pid ..."), this rank's own left out."""
    return [int(r) for r in re.findall(r"\brank (\d+)\b", reason) if int(r) != me]


def mismatches(job):
    out = []
    by_seq = {}
    for r, d in job.ranks.items():
        for s, c in d.colls().items():
            by_seq.setdefault(s, {})[r] = c
    for s in sorted(by_seq):
        calls = by_seq[s]
        if len(calls) < 2:
            continue
        for field in ("coll", "count", "type", "root"):
            groups = {}
            for r, c in calls.items():
                v = signature(c).get(field)
                if v is not None:
                    groups.setdefault(v, []).append(r)
            if len(groups) > 1:
                # The culprits: the smaller group (ties: the one without rank 0).
                ordered = sorted(groups.items(), key=lambda kv: (len(kv[1]), 0 in kv[1]))
                out.append({"seq": s, "field": field, "values": {str(k): sorted(v) for k, v in groups.items()},
                            "ranks": sorted(ordered[0][1]), "value": ordered[0][0]})
                break
    return out


def entry_state(job):
    """Per rank: its last collective's sequence number and that call."""
    last = {}
    for r, d in job.ranks.items():
        colls = d.colls()
        last[r] = colls[max(colls)] if colls else None
    return last


def link_rates(job):
    """Per link (sender, receiver): MB/s of its transfers. A transfer's time runs from
    the later of its send's and its receive's posting to the receive's completion (the
    k-th send from A to B in a call pairs with B's k-th receive from A); a transfer
    whose other end left no dump counts from its own posting to its completion.
    Ranks on several machines: their clocks must agree (NTP/PTP) to the scale of a step."""
    ends = {}  # (seq, sender, receiver, way) -> [(posted, done, bytes)]
    for r, d in job.ranks.items():
        for s, c in d.colls().items():
            for peer, way, nbytes, posted, done in c.get("steps", []):
                key = (s, r, peer, "send") if way == "send" else (s, peer, r, "recv")
                ends.setdefault(key, []).append((posted, done, nbytes))
    links = {}
    for (s, a, b, way), mine in ends.items():
        if way == "send" and (s, a, b, "recv") in ends:
            continue  # counted from the receiving end
        other = ends.get((s, a, b, "send"), []) if way == "recv" else []
        for i, (posted, done, nbytes) in enumerate(mine):
            if done <= 0 or nbytes == 0:
                continue
            start = max(posted, other[i][0]) if i < len(other) else posted
            tb, tt = links.get((a, b), (0, 0))
            links[(a, b)] = (tb + nbytes, tt + max(done - start, 1))
    return {k: b / (t / 1e9) / 1e6 for k, (b, t) in links.items()}


def waits(job):
    """wait[r][q]: ms rank r spent in calls before rank q (the last to arrive) entered them."""
    w = {}
    late = {}
    by_seq = {}
    for r, d in job.ranks.items():
        for s, c in d.colls().items():
            by_seq.setdefault(s, {})[r] = c
    for s, calls in by_seq.items():
        if len(calls) < 2 or len(calls) < len(job.ranks):
            continue
        last_r = max(calls, key=lambda r: calls[r]["start_ns"])
        t_last = calls[last_r]["start_ns"]
        for r, c in calls.items():
            if r == last_r:
                continue
            ms = (t_last - c["start_ns"]) / 1e6
            w.setdefault(r, {}).setdefault(last_r, 0.0)
            w[r][last_r] += ms
            late[last_r] = late.get(last_r, 0.0) + ms
    return w, late


def slowest(job):
    """Per collective: the rank the others waited on most, and the slowest link."""
    out = {}
    colls = sorted({c["coll"] for d in job.ranks.values() for c in d.colls().values()})
    rates = link_rates(job)
    for name in colls:
        sub = type(job)(job.comm)
        for r, d in job.ranks.items():
            dd = type(d)(d.header, [c for c in d.calls if c["coll"] == name], d.path)
            sub.add(dd)
        _, late = waits(sub)
        per_rank_ms = {}
        for r, d in sub.ranks.items():
            done = [c for c in d.colls().values() if c["end_ns"] > 0]
            if done:
                per_rank_ms[r] = statistics.median((c["end_ns"] - c["start_ns"]) / 1e6 for c in done)
        entry = {"calls": max((len(d.colls()) for d in sub.ranks.values()), default=0), "median_ms": per_rank_ms}
        if late:
            r = max(late, key=late.get)
            entry["waited_on"] = {"rank": r, "host": job.host_of(r), "ms": round(late[r], 3)}
        sub_rates = link_rates(sub)
        if sub_rates:
            (a, b), mbps = min(sub_rates.items(), key=lambda kv: kv[1])
            entry["slowest_link"] = {"from": a, "to": b, "from_host": job.host_of(a), "to_host": job.host_of(b),
                                     "MBps": round(mbps, 3),
                                     "median_MBps": round(statistics.median(sub_rates.values()), 3)}
        out[name] = entry
    return out, rates


def analyze(job):
    rep = {"comm": job.comm, "nranks": job.nranks, "dumped": sorted(job.ranks),
           "missing": [{"rank": r, "host": job.host_of(r)} for r in job.missing()],
           "reasons": {str(r): d.reason for r, d in sorted(job.ranks.items())},
           "torn": [{"rank": r, "host": job.host_of(r), "file": job.ranks[r].path,
                     "last_seq": job.ranks[r].calls[-1]["seq"] if job.ranks[r].calls else None} for r in job.torn()],
           "on_demand": job.on_demand(),
           "calls_recorded": sum(len(d.calls) for d in job.ranks.values())}
    last = entry_state(job)
    frontier = max((c["seq"] for c in last.values() if c), default=-1)
    ahead = [r for r, c in last.items() if c and c["seq"] == frontier]
    frontier_call = job.ranks[ahead[0]].colls()[frontier] if ahead else None
    # Ranks that did not enter a call the others did: the furthest behind first.
    # (A rank stuck inside an earlier call did enter what it could: it is waiting, see waited_on.)
    # A torn dump (cut short) ends early without its rank having stopped there: left out.
    behind = sorted((r for r, c in last.items() if (c["seq"] if c else -1) < frontier and (not c or c["result"] == 0)
                     and not job.ranks[r].torn), key=lambda r: (last[r]["seq"] if last[r] else -1, r))
    rep["not_entered"] = []
    for r in behind:
        s = (last[r]["seq"] if last[r] else -1) + 1
        ref = next((d.colls()[s] for d in job.ranks.values() if s in d.colls()), frontier_call)
        rep["not_entered"].append({"rank": r, "host": job.host_of(r), "seq": s, "call": call_text(ref),
                                   "last_seq": s - 1})
    # Ranks that entered the frontier call but did not finish it while others did.
    rep["not_finished"] = []
    if frontier_call:
        finished = [r for r in ahead if job.ranks[r].colls()[frontier]["result"] == 0]
        for r in ahead:
            c = job.ranks[r].colls()[frontier]
            if c["result"] != 0 and finished:
                rep["not_finished"].append({"rank": r, "host": job.host_of(r), "seq": frontier, "call": call_text(c),
                                            "result": c["result"]})
    rep["stuck"] = [r for r in ahead if frontier_call and job.ranks[r].colls()[frontier]["result"] != 0]
    rep["mismatches"] = mismatches(job)
    rep["slowest"], rates = slowest(job)
    rep["links_MBps"] = {"%d->%d" % k: round(v, 3) for k, v in sorted(rates.items())}
    w, _ = waits(job)
    rep["waits_ms"] = {str(r): {str(q): round(ms, 3) for q, ms in sorted(v.items())} for r, v in sorted(w.items())}
    rep["culprit"] = culprit(job, rep, frontier_call)
    return rep


def culprit(job, rep, frontier_call):
    def who(r, kind, call, why):
        return {"rank": r, "host": job.host_of(r), "kind": kind, "call": call, "why": why}

    def last_call(r):  # rank r's latest call, else the one the others are in
        colls = job.ranks[r].colls()
        return call_text(colls[max(colls)]) if colls else call

    if rep["mismatches"]:
        m = rep["mismatches"][0]
        r = m["ranks"][0]
        c = job.ranks[r].colls()[m["seq"]]
        others = {k: v for k, v in m["values"].items() if r not in v}
        return who(r, "mismatch", call_text(c), "called %s with %s %s; %s" % (
            call_text(c), m["field"], m["value"],
            "; ".join("ranks %s with %s" % (",".join(map(str, v)), k) for k, v in others.items())))
    if rep["not_entered"]:
        n = rep["not_entered"][0]
        entered = sorted(set(job.ranks) - {x["rank"] for x in rep["not_entered"]})
        return who(n["rank"], "not entered", n["call"], "never entered %s, which %s %s entered" % (
            n["call"], "rank" if len(entered) == 1 else "ranks", ",".join(map(str, entered))))
    call = call_text(frontier_call) if frontier_call else None
    if rep["stuck"] and not rep["on_demand"]:
        # The failure report one rank made reaches the others through the store: a rank
        # whose dump shows only a failure of its own, while the others share one, never
        # heard it (its link, or the store's link to it, is down).
        texts = {r: d.reason.split(": ", 1)[-1] for r, d in job.ranks.items()}
        shared = {}
        for r, t in texts.items():
            shared.setdefault(t, []).append(r)
        common = max(shared.values(), key=len)
        odd = [r for r in job.ranks if r not in common]
        if len(common) >= 2 and len(odd) == 1:
            r = odd[0]
            return who(r, "cut off", last_call(r), "the failure report ranks %s shared never reached it; it failed on its "
                       "own: %s" % (",".join(map(str, sorted(common))), job.ranks[r].reason[:160]))
    lost = lost_store(job) if rep["stuck"] else None
    if lost is not None:
        r, since_s, others_ms = lost
        return who(r, "cut off", last_call(r),
                   "its last status record reached the store %.1f s before it failed, the others' within %d ms "
                   "of theirs (its link or its host)" % (since_s, others_ms))
    chain = waited_chain(job)
    if chain:
        r, c, why = chain
        return who(r, why[0], call_text(c) if c else call, why[1])
    if rep["missing"] and rep["stuck"] and not rep["on_demand"]:
        # (Dumps taken on request only: a rank without one was not asked, or has no
        # DCCL_RECORDER_DIR; that says nothing about it.)
        # Who the failure reports name, among the ranks that left no dump.
        votes = {}
        for r, d in job.ranks.items():
            for q in named_ranks(d.reason, r):
                votes[q] = votes.get(q, 0) + 1
        gone = [m["rank"] for m in rep["missing"]]
        named = sorted(gone, key=lambda q: (-votes.get(q, 0), q))
        r = named[0]
        return who(r, "no dump", call, "left no dump (stopped, killed or cut off) while ranks %s were inside %s" % (
            ",".join(map(str, rep["stuck"])), call))
    if rep["not_finished"]:
        n = rep["not_finished"][0]
        return who(n["rank"], "not finished", n["call"], "did not finish %s, which the others finished" % n["call"])
    if rep["stuck"]:
        # Every rank failed inside the same call: the rank most failure reports name.
        votes = {}
        for r, d in job.ranks.items():
            for q in set(named_ranks(d.reason, r)):
                votes[q] = votes.get(q, 0) + 1
        if votes:
            r = max(sorted(votes), key=lambda q: votes[q])
            return who(r, "named by failures", call, "named by %d of %d ranks' failure reports in %s" % (
                votes[r], len(job.ranks), call))
    # Nothing failed: the slowest rank of the busiest collective.
    busiest = max(rep["slowest"].items(), key=lambda kv: kv[1]["calls"], default=None)
    if busiest and "slowest_link" in busiest[1]:
        l = busiest[1]["slowest_link"]
        if l["MBps"] < 0.5 * l["median_MBps"]:
            return who(l["from"], "slow link", busiest[0], "its link to rank %d ran at %.1f MB/s, the median link %.1f MB/s"
                       % (l["to"], l["MBps"], l["median_MBps"]))
    if busiest and "waited_on" in busiest[1]:
        w = busiest[1]["waited_on"]
        med = busiest[1]["median_ms"]
        total = busiest[1]["calls"] * (sum(med.values()) / len(med) if med else 0.0)
        if w["ms"] < 1.0 or w["ms"] < 0.25 * total:
            return None  # nobody kept the others waiting for long
        return who(w["rank"], "late", busiest[0], "the others waited %.1f ms in all for it to enter %s calls" % (
            w["ms"], busiest[0]))
    return None


def lost_store(job):
    """The one rank whose status records (DCCL_STATUS_MS) stopped reaching the store
    at least 1 s before its dump, while every other rank's still did within 1 s of
    its own: (rank, seconds, the others' largest gap in ms), else None."""
    gaps = {}
    for r, d in job.ranks.items():
        at, st = d.header.get("time_ns", 0), d.header.get("store_ns", 0)
        if not at or not st:
            return None  # a rank without status records: no evidence
        gaps[r] = (at - st) / 1e9
    late = [r for r, g in gaps.items() if g >= 1.0]
    if len(late) != 1 or len(gaps) < 3:
        return None
    others = max(g for r, g in gaps.items() if r != late[0])
    return late[0], gaps[late[0]], int(others * 1000)


def received(dump, seq, sender):
    """Whether the rank of `dump` completed a receive in call `seq` (from `sender`, or
    from anyone when None)."""
    c = dump.colls().get(seq)
    return c is not None and any(st[1] == "recv" and st[4] > 0 and (sender is None or st[0] == sender)
                                 for st in c.get("steps", []))


def waited_chain(job):
    """Follows the transfers in flight: a rank stuck in a call waits to receive from a
    peer; that peer waits on another... The chain ends at a rank that left no dump or
    that finished the call (its data never arrived: its link, or its host). Returns
    (rank, call, (kind, why)) or None."""
    stuck = {}
    for r, d in job.ranks.items():
        colls = d.colls()
        if colls:
            c = colls[max(colls)]
            if c["result"] != 0:
                stuck[r] = c
    for c in sorted(stuck.values(), key=lambda c: c["seq"]):
        start = next(r for r, x in stuck.items() if x is c)
        r, seen, path = start, set(), [start]
        while r not in seen:
            seen.add(r)
            c = stuck.get(r)
            if c is None:
                break
            pending = [st[0] for st in c.get("steps", []) if st[4] <= 0 and st[1] == "recv"]
            if not pending:
                break
            p = pending[0]
            path.append(p)
            if p not in job.ranks and job.on_demand():
                break  # not asked for a dump, or no folder: nothing known of it
            if p not in job.ranks:
                return p, c, ("no dump", "left no dump (stopped, killed or cut off); ranks waited on it in turn: %s, "
                                         "inside %s" % (" -> ".join(map(str, path)), call_text(c)))
            mine = job.ranks[p].colls().get(c["seq"])
            if mine is not None and mine["result"] == 0:
                # p's data reached other ranks in this call while r received nothing in it
                # from anyone: r's link (or host) is the one cut, not p's.
                reached = sorted(q for q, d in job.ranks.items() if q not in (p, r) and received(d, c["seq"], p))
                if reached and not received(job.ranks[r], c["seq"], None):
                    return r, c, ("cut off", "received nothing in %s while rank(s) %s received rank %d's data in it "
                                             "(its link or its host); ranks waited on it in turn: %s" % (
                                                 call_text(c), ",".join(map(str, reached)), p,
                                                 " -> ".join(map(str, path))))
                return p, c, ("data lost", "finished %s, but what it sent never arrived (its link or its host); "
                                           "ranks waited on it in turn: %s" % (call_text(c), " -> ".join(map(str, path))))
            if mine is None and job.ranks[p].torn:
                break  # its dump was cut short before this call: unknown, not absent
            if mine is None:
                return p, c, ("not entered", "never entered %s; ranks waited on it in turn: %s" % (
                    call_text(c), " -> ".join(map(str, path))))
            r = p
    return None
