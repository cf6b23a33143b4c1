"""bench/contention's results: medians per point, results.json and report.md."""

import json
import statistics
import subprocess
from pathlib import Path


def size_label(b):
    for unit, shift in (("G", 30), ("M", 20), ("K", 10)):
        if b >= (1 << shift) and b % (1 << shift) == 0:
            return f"{b >> shift} {unit}iB"
    return f"{b} B"


def fmt_us(x):
    if x is None:
        return "–"
    return f"{x:.2f}" if x < 10 else f"{x:.1f}" if x < 1000 else f"{x:,.0f}"


def fmt_ratio(r):
    return f"{r:.2f}" if r >= 0.1 else f"{r:.3f}" if r >= 0.001 else f"{r:.1e}"


def build_revision(builddir):
    """'<short commit>[ (+ uncommitted changes)] at <source dir>' of a build folder's source tree."""
    src = None
    try:
        for line in (Path(builddir) / "CMakeCache.txt").read_text().splitlines():
            if line.startswith("CMAKE_HOME_DIRECTORY:INTERNAL="):
                src = line.split("=", 1)[1]
    except OSError:
        pass
    if not src:
        return f"{builddir} (source unknown)"

    def git(*a):
        r = subprocess.run(["git", "-C", src, *a], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        return r.stdout.strip()

    dirty = " (+ uncommitted changes)" if git("status", "--porcelain", "--untracked-files=no") else ""
    return f"{git('rev-parse', '--short', 'HEAD') or '?'}{dirty}, {src}, built in {builddir}"


def autogroup():
    try:
        return Path("/proc/sys/kernel/sched_autogroup_enabled").read_text().strip() == "1"
    except OSError:
        return None


def summarize(records):
    groups = {}
    for r in records:
        if r["time_us"] is None:
            continue
        k = (r["hosts"], r["class"], r["ranks"], r["busy"], r["key"], r["size"])
        groups.setdefault(k, []).append(r)
    out = []
    for (hosts, klass, n, busy, key, size), rows in sorted(groups.items()):
        t = [x["time_us"] for x in rows]
        out.append({"hosts": hosts, "class": klass, "ranks": n, "busy": busy, "key": key,
                    "library": rows[0]["library"], "size": size, "time_us_median": statistics.median(t),
                    "time_us_min": min(t), "time_us_max": max(t), "repeats": len(t),
                    "wrong": sum(x["wrong"] for x in rows),
                    "load1_median": statistics.median(x["load1"] for x in rows)})
    return out


def write(outdir, meta, records, spinners):
    doc = {"meta": meta, "spinners": spinners, "results": summarize(records)}
    (outdir / "results.json").write_text(json.dumps(doc, indent=1) + "\n")
    (outdir / "report.md").write_text(markdown(doc))
    return doc


def rebuild(outdir):
    """results.json and report.md from a run's meta.json (written at its start) and
    runs.jsonl (every launch's rows, as they came): for a run cut short."""
    meta = json.loads((outdir / "meta.json").read_text())
    records = [json.loads(x) for x in (outdir / "runs.jsonl").read_text().splitlines() if x.strip()]
    meta["command"] += " (cut short; rebuilt with --report-only)"
    meta["load_samples"] = [{"load1_before": x} for x in dict.fromkeys(r["load1"] for r in records)]
    write(outdir, meta, records, {"spinner": "python3 -c 'while True: pass'", "pids": [], "left_running": []})
    print(text_tables(json.loads((outdir / "results.json").read_text())))
    return 0


def panels(doc):
    """(hosts, class, ranks) -> {(key, busy, size): result}, and the library order per panel."""
    out, order = {}, {}
    keys = [c["key"] for c in doc["meta"]["configs"]]
    for r in doc["results"]:
        p = (r["hosts"], r["class"], r["ranks"])
        out.setdefault(p, {})[(r["key"], r["busy"], r["size"])] = r
        order.setdefault(p, set()).add((r["key"], r["library"]))
    return out, {p: sorted(v, key=lambda kl: keys.index(kl[0])) for p, v in order.items()}


def panel_table(doc, p, cells, libs):
    busy = doc["meta"]["busy"]
    sizes = sorted({s for (_, _, s) in cells})
    L = ["| size | " + " | ".join(f"{lib} K={k}" for _, lib in libs for k in busy) + " |",
         "|---|" + "---|" * (len(libs) * len(busy))]
    for s in sizes:
        row = [fmt_us(cells[(key, k, s)]["time_us_median"]) if (key, k, s) in cells else "–"
               for key, _ in libs for k in busy]
        L.append(f"| {size_label(s)} | " + " | ".join(row) + " |")
    return L


def ratio_table(doc, cells, libs):
    """best peer's median ÷ each DirectCCL build's (>1: DirectCCL faster), per size and K."""
    busy = doc["meta"]["busy"]
    sizes = sorted({s for (_, _, s) in cells})
    dccl = [(k, lib) for k, lib in libs if k.startswith("dccl.")]
    peers = [k for k, _ in libs if not k.startswith("dccl.")]
    if not peers:
        return []
    L = ["| size | " + " | ".join(f"{lib} K={k}" for _, lib in dccl for k in busy) + " |",
         "|---|" + "---|" * (len(dccl) * len(busy))]
    for s in sizes:
        row = []
        for key, _ in dccl:
            for k in busy:
                d = cells.get((key, k, s))
                ts = [cells[(pk, k, s)] for pk in peers if (pk, k, s) in cells]
                best = min(ts, key=lambda r: r["time_us_median"]) if ts else None
                row.append(f"{fmt_ratio(best['time_us_median'] / d['time_us_median'])} ({best['library']})"
                           if d and best else "–")
        L.append(f"| {size_label(s)} | " + " | ".join(row) + " |")
    return L


HEADLINE_SIZES = [8, 64 << 10, 1 << 20, 16 << 20, 64 << 20]


def headline_table(doc, tag=None):
    """One row per (hosts, class, ranks, headline size): a DirectCCL build's median at each K,
    the best peer's at each K (named), and best peer ÷ DirectCCL at each K (> 1: DirectCCL faster)."""
    busy = doc["meta"]["busy"]
    cells, libs = panels(doc)
    L = ["| hosts | class | ranks | size | " + " | ".join(f"DirectCCL K={k}" for k in busy) + " | " +
         " | ".join(f"best peer K={k}" for k in busy) + " | " + " | ".join(f"peer ÷ DirectCCL K={k}" for k in busy)
         + " |", "|---|---|---|---|" + "---|" * (3 * len(busy))]
    for p in sorted(cells):
        c = cells[p]
        dk = [k for k, _ in libs[p] if k.startswith("dccl.") and (tag is None or k.startswith(f"dccl.{tag}-"))]
        peers = [k for k, _ in libs[p] if not k.startswith("dccl.")]
        if not dk:
            continue
        for s in [x for x in HEADLINE_SIZES if any(sz == x for (_, _, sz) in c)]:
            d = [c.get((dk[0], k, s)) for k in busy]
            best = []
            for k in busy:
                ts = [c[(pk, k, s)] for pk in peers if (pk, k, s) in c]
                best.append(min(ts, key=lambda r: r["time_us_median"]) if ts else None)
            row = [fmt_us(x["time_us_median"]) if x else "–" for x in d]
            row += [f"{fmt_us(b['time_us_median'])} ({b['library']})" if b else "–" for b in best]
            row += [fmt_ratio(b['time_us_median'] / x['time_us_median']) if x and b else "–" for x, b in zip(d, best)]
            L.append(f"| {p[0]} | {p[1]} | {p[2]} | {size_label(s)} | " + " | ".join(row) + " |")
    return L


def markdown(doc):
    m = doc["meta"]
    info = m["info"]
    L = [f"# Allreduce with busy CPUs — {m['date']}{' (quick)' if m['quick'] else ''}", "",
         f"Generated by `{m['command']}` in {m['seconds']} s. Blocking all_reduce, float32 sum, in place, host "
         f"memory; K = {', '.join(str(k) for k in m['busy'])} plain CPU spinners (`{doc['spinners']['spinner']}`, "
         f"unbound) running beside the ranks during each K block; {info['cores']} cores. Each cell is the "
         f"median time per call (µs) over {m['reps']} repeats; libraries interleaved within each "
         "(K, ranks, sizes) launch group, order reversed every other repeat. "
         f"Wrong elements in the checked results (first repeat): {sum(r['wrong'] for r in doc['results'])}.", "",
         f"**Machine.** {info['cpu']}, {info['cores']} cores, {info['mem']}, Linux {info['kernel']}; shared. "
         f"Load average (1, 5, 15 min) at start {m['load_start_end'][0]}, at end {m['load_start_end'][1]}; "
         "1-minute load before each K block (it includes this run's own ranks and spinners): "
         + ", ".join(f"{x['load1_before']:.1f}" for x in m["load_samples"]) + ".", "",
         "**DirectCCL builds.** " + "; ".join(f"`{t}`: {v}" for t, v in m["dccl_builds"].items()) +
         f". **Peers.** Open MPI {info['openmpi']}, MPICH {info['mpich']} (UCX {info['ucx']}), "
         f"Gloo {info['gloo']}.", "",
         f"**Spinners.** {len(doc['spinners']['pids'])} started, "
         f"{len(doc['spinners']['left_running'])} left running after the run; "
         + ("each spinner and launch in a session of its own" if m["spinners_apart"] else
            "in the same session as the launches") +
         f" (scheduler autogroups {'on' if m['sched_autogroup'] else 'off'}: "
         + ("the ranks compete with the spinners inside one group, as with a training process's own workers)."
            if not m["spinners_apart"] else "each group gets a fair share, as another user's job would).") , ""]
    L += ["**Transports.**", "", "| hosts | class | library | transport |", "|---|---|---|---|"]
    for c in m["configs"]:
        L.append(f"| {c['hosts']} | {c['class']} | {c['library']} | {c['transport']} |")
    L.append("")
    for tag in doc["meta"]["dccl_builds"]:
        L += [f"## Summary{' (DirectCCL ' + tag + ')' if len(doc['meta']['dccl_builds']) > 1 else ''}", "",
              "Median time per call, µs, at the headline sizes; the best peer is the fastest of the others at "
              "that point; peer ÷ DirectCCL > 1: DirectCCL faster.", ""] + headline_table(doc, tag) + [""]
    cells, libs = panels(doc)
    for p in sorted(cells):
        hosts, klass, n = p
        where = "one host" if hosts == 1 else f"{hosts} emulated hosts"
        L += [f"## {klass}, {n} ranks, {where}", "", "Time per call, µs (median):", ""]
        L += panel_table(doc, p, cells[p], libs[p]) + [""]
        rt = ratio_table(doc, cells[p], libs[p])
        if rt:
            L += ["Best peer's time ÷ DirectCCL's (> 1: DirectCCL faster; the best peer named):", ""] + rt + [""]
    if m["left_out"]:
        L += ["## Left out", ""] + [f"- {x['key']} on {x['hosts']} hosts: {x['why']}" for x in m["left_out"]] + [""]
    if m["failures"]:
        L += ["## Failed launches", ""] + [f"- {f}" for f in m["failures"]] + [""]
    if m["notes"]:
        L += ["## Launches stopped after their results", ""] + [f"- {f}" for f in m["notes"]] + [""]
    L += ["## Files", "", "`results.json` (meta, spinner pids, per-point medians with min, max, repeats), "
          "`runs.jsonl` (every size of every launch), `logs/` (output of failed launches).", ""]
    return "\n".join(L)


def text_tables(doc):
    cells, libs = panels(doc)
    out = []
    for p in sorted(cells):
        out += [f"\n{p[1]}, {p[2]} ranks, {p[0]} host(s): time per call, us (median)"]
        out += panel_table(doc, p, cells[p], libs[p])
    return "\n".join(out)
