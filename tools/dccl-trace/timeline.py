"""A timeline in Chrome's trace format (chrome://tracing, ui.perfetto.dev): one row
per rank, one slice per call and, inside it, one per step."""
import json


def events(job, pid=0):
    t0 = min((c["start_ns"] for d in job.ranks.values() for c in d.calls), default=0)
    us = lambda ns: (ns - t0) / 1000.0
    ev = [{"name": "process_name", "ph": "M", "pid": pid, "args": {"name": "communicator %s (%d ranks)" % (job.comm, job.nranks)}}]
    for r, d in sorted(job.ranks.items()):
        ev.append({"name": "thread_name", "ph": "M", "pid": pid, "tid": r, "args": {"name": "rank %d (%s)" % (r, d.host)}})
        ev.append({"name": "thread_sort_index", "ph": "M", "pid": pid, "tid": r, "args": {"sort_index": r}})
        for c in d.calls:
            # A call still running when the dump was taken ends at the dump.
            end = c["end_ns"] if c["end_ns"] > 0 else d.header.get("time_ns", c["start_ns"])
            name = "%s #%d" % (c["coll"], c["seq"])
            args = {k: c[k] for k in ("count", "type", "op", "root", "algo", "path", "sent", "recv", "result", "tag",
                                      "user_seq") if k in c}
            if c["result"] < 0:
                name += " (running)"
            elif c["result"] > 0:
                name += " (failed)"
            ev.append({"name": name, "cat": c["coll"], "ph": "X", "pid": pid, "tid": r, "ts": us(c["start_ns"]),
                       "dur": max((end - c["start_ns"]) / 1000.0, 0.001), "args": args})
            for peer, way, nbytes, posted, done in c.get("steps", []):
                done = done if done > 0 else end  # still in flight at the dump
                ev.append({"name": "%s %d B %s rank %d" % (way, nbytes, "to" if way == "send" else "from", peer),
                           "cat": "step", "ph": "X", "pid": pid, "tid": r, "ts": us(posted),
                           "dur": max((done - posted) / 1000.0, 0.001), "args": {"peer": peer, "bytes": nbytes}})
        if d.reason:
            ev.append({"name": "dump: " + d.reason[:120], "ph": "i", "s": "t", "pid": pid, "tid": r,
                       "ts": us(d.header.get("time_ns", t0))})
    return ev


def write(jobs, path):
    ev = []
    for i, job in enumerate(jobs):
        ev += events(job, pid=i)
    with open(path, "w") as f:
        json.dump({"traceEvents": ev, "displayTimeUnit": "ms"}, f)
