"""A PNG for those who would rather look than read: the timeline (one row per rank,
one box per call), each rank's time per call, and each link's bandwidth, drawn by gnuplot."""
import os
import shutil
import subprocess
import tempfile


class ChartError(Exception):
    """Why the chart cannot be drawn, in one line."""


def gnuplot():
    """gnuplot's path; ChartError naming how to install it when it is not on PATH."""
    gp = shutil.which("gnuplot")
    if gp:
        return gp
    hint = "apt install gnuplot-nox"
    deps = os.path.join(os.path.dirname(os.path.realpath(__file__)), "..", "..", "scripts", "install-deps")
    if os.path.exists(deps):  # the source tree's
        hint += ", or scripts/install-deps --peers"
    raise ChartError("--png needs gnuplot, which is not on PATH (%s)" % hint)


def empty(text):
    """A panel with nothing to draw: `text` in its middle, no axes (an empty plot's
    autoscale would show -10..10)."""
    return ["set xrange [0:1]", "set yrange [0:1]", "unset xtics", "unset ytics", "set xlabel ''", "set ylabel ''",
            "set label 1 '%s' at graph 0.5, 0.5 center" % text, "plot NaN notitle", "unset label 1",
            "set autoscale x", "set autoscale y", "set xtics autofreq", "set ytics autofreq"]


def write(job, rep, path):
    gp = gnuplot()
    with tempfile.TemporaryDirectory() as tmp:
        calls = os.path.join(tmp, "calls.dat")
        links = os.path.join(tmp, "links.dat")
        ranks = sorted(job.ranks)
        seqs = sorted({s for d in job.ranks.values() for s in d.colls()})
        with open(calls, "w") as f:
            for s in seqs:
                row = [str(s)]
                for r in ranks:
                    c = job.ranks[r].colls().get(s)
                    end = c["end_ns"] if c and c["end_ns"] > 0 else (job.ranks[r].header.get("time_ns") if c else None)
                    row.append("%.3f" % ((end - c["start_ns"]) / 1e6) if c else "NaN")
                f.write(" ".join(row) + "\n")
        spans = os.path.join(tmp, "spans.dat")
        t0 = min((c["start_ns"] for d in job.ranks.values() for c in d.calls), default=0)
        any_calls = any(d.calls for d in job.ranks.values())
        with open(spans, "w") as f:
            for r in ranks:
                d = job.ranks[r]
                for c in d.calls:
                    end = c["end_ns"] if c["end_ns"] > 0 else d.header.get("time_ns", c["start_ns"])
                    a, b = (c["start_ns"] - t0) / 1e6, (end - t0) / 1e6
                    # colour: 1 finished, 2 failed, 3 still running at the dump
                    col = 1 if c["result"] == 0 else (3 if c["result"] < 0 else 2)
                    f.write("%.3f %d %.3f %.3f %.2f %.2f %d\n" % ((a + b) / 2, r, a, b, r - 0.35, r + 0.35, col))
        items = sorted(rep["links_MBps"].items())
        with open(links, "w") as f:
            for i, (k, v) in enumerate(items):
                f.write('%d "%s" %.3f\n' % (i, k, v))
        plots = ", ".join("'%s' using 1:%d with linespoints title 'rank %d (%s)'" % (calls, i + 2, r, job.host_of(r))
                          for i, r in enumerate(ranks))
        script = [
            "set terminal pngcairo size 1000,900 font 'sans,10'",
            "set output '%s'" % path,
            "set multiplot layout 3,1 title 'communicator %s: %d ranks'" % (job.comm, job.nranks),
            "set title 'timeline: one row per rank, one box per call (green done, red failed, orange running at "
            "the dump)'", "set xlabel 'ms'", "set ylabel 'rank'", "set ytics 1", "unset key",
            "set yrange [-0.6:%d.6]" % max(job.nranks - 1, 0),
            "set palette defined (1 'forest-green', 2 'red', 3 'orange')", "set cbrange [1:3]", "unset colorbox",
            "set style fill solid 0.8 border -1",
        ] + (["plot '%s' using 1:2:3:4:5:6:7 with boxxyerror lc palette" % spans] if any_calls else empty("no calls")) + [
            "set autoscale y", "set ytics autofreq",
            "set title 'time per call, by rank'", "set xlabel 'call (sequence number)'", "set ylabel 'ms'",
            "set key outside right",
        ] + (["set logscale y", "plot " + plots, "unset logscale y"] if plots and seqs else empty("no calls")) + [
            "set title 'bandwidth per link (sender->receiver)'", "set xlabel ''", "set ylabel 'MB/s'",
            "set style fill solid 0.6", "set boxwidth 0.7", "set yrange [0:*]", "unset key",
        ] + (["plot '%s' using 1:3:xtic(2) with boxes" % links] if items else empty("no transfers")) + [
            "unset multiplot",
        ]
        sp = os.path.join(tmp, "chart.gp")
        with open(sp, "w") as f:
            f.write("\n".join(script) + "\n")
        p = subprocess.run([gp, sp], capture_output=True, text=True)
        if p.returncode != 0:
            said = [l.strip() for l in p.stderr.splitlines() if l.strip()]
            raise ChartError("gnuplot could not draw %s (exit status %d)%s" % (
                path, p.returncode, ": " + said[-1] if said else ""))
