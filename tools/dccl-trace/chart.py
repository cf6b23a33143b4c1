"""A PNG for those who would rather look than read: each rank's time per call (top)
and each link's bandwidth (bottom), drawn by gnuplot."""
import os
import shutil
import subprocess
import tempfile


def write(job, rep, path):
    gp = shutil.which("gnuplot")
    if not gp:
        raise RuntimeError("gnuplot is not installed (scripts/install-deps installs gnuplot-nox)")
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
        items = sorted(rep["links_MBps"].items())
        with open(links, "w") as f:
            for i, (k, v) in enumerate(items):
                f.write('%d "%s" %.3f\n' % (i, k, v))
        plots = ", ".join("'%s' using 1:%d with linespoints title 'rank %d (%s)'" % (calls, i + 2, r, job.host_of(r))
                          for i, r in enumerate(ranks))
        script = [
            "set terminal pngcairo size 1000,700 font 'sans,10'",
            "set output '%s'" % path,
            "set multiplot layout 2,1 title 'communicator %s: %d ranks'" % (job.comm, job.nranks),
            "set title 'time per call, by rank'", "set xlabel 'call (sequence number)'", "set ylabel 'ms'",
            "set key outside right", "set logscale y" if seqs else "",
            "plot " + (plots if plots and seqs else "0 notitle"),
            "unset logscale y",
            "set title 'bandwidth per link (sender->receiver)'", "set xlabel ''", "set ylabel 'MB/s'",
            "set style fill solid 0.6", "set boxwidth 0.7", "set yrange [0:*]", "unset key",
            "plot '%s' using 1:3:xtic(2) with boxes" % links if items else "plot 0 notitle",
            "unset multiplot",
        ]
        sp = os.path.join(tmp, "chart.gp")
        with open(sp, "w") as f:
            f.write("\n".join(script) + "\n")
        subprocess.run([gp, sp], check=True, capture_output=True, text=True)
