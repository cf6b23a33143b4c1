"""The report in a few lines of text."""


def text(job, rep):
    out = ["communicator %s: %d ranks, dumps from %d" % (job.comm, job.nranks, len(rep["dumped"]))]
    c = rep.get("culprit")
    if c:
        out.append("culprit: rank %d on %s (%s): %s" % (c["rank"], c["host"], c["kind"], c["why"]))
    for m in rep["missing"]:
        out.append("  no dump from rank %d on %s" % (m["rank"], m["host"]) +
                   (" (the dumps were taken on demand: not asked, or no DCCL_RECORDER_DIR)" if rep["on_demand"] else ""))
    for t in rep["torn"]:
        out.append("  torn dump from rank %d on %s (cut short after %s): %s" % (
            t["rank"], t["host"], "#%d" % t["last_seq"] if t["last_seq"] is not None else "its header", t["file"]))
    if not rep["calls_recorded"]:
        out.append("  no calls recorded in any dump")
    for n in rep["not_entered"]:
        out.append("  rank %d on %s did not enter %s (its last call: #%d)" % (n["rank"], n["host"], n["call"],
                                                                         n["last_seq"]))
    for n in rep["not_finished"]:
        out.append("  rank %d on %s did not finish %s (result %d)" % (n["rank"], n["host"], n["call"], n["result"]))
    for m in rep["mismatches"][:3]:
        out.append("  mismatch at #%d in %s: %s" % (m["seq"], m["field"], "; ".join(
            "%s by ranks %s" % (k, ",".join(map(str, v))) for k, v in m["values"].items())))
    for name, s in rep["slowest"].items():
        line = "  %s: %d calls" % (name, s["calls"])
        if "waited_on" in s and s["waited_on"]["ms"] >= 0.05:  # a wait too short to print names no rank
            line += "; others waited most on rank %d (%.1f ms in all)" % (s["waited_on"]["rank"], s["waited_on"]["ms"])
        if "slowest_link" in s:
            l = s["slowest_link"]
            line += "; slowest link %d->%d %.1f MB/s (median %.1f)" % (l["from"], l["to"], l["MBps"], l["median_MBps"])
        out.append(line)
    waits = []
    for r, v in rep["waits_ms"].items():
        top = max(v.items(), key=lambda kv: kv[1]) if v else None
        if top and top[1] >= 0.1:
            waits.append("rank %s on %s %.1f ms" % (r, top[0], top[1]))
    if waits:
        out.append("  waited longest: " + "; ".join(waits))
    for r, why in rep["reasons"].items():
        if why:
            out.append("  rank %s dumped: %s" % (r, why[:200]))
    return "\n".join(out)
