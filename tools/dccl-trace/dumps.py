"""Reads flight-recorder dumps (dccl-rec.<comm>.r<rank>.jsonl) into one Job per communicator."""
import glob
import json
import os
import re
import sys


ON_DEMAND = ("on demand", "asked for through the store")  # reasons of dumps taken on request


class RankDump:
    def __init__(self, header, calls, path, torn=False):
        self.header = header
        self.calls = calls  # oldest first
        self.path = path
        self.rank = header["rank"]
        self.host = header.get("host", "?")
        self.reason = header.get("reason", "")
        # Its last line was cut short (the file copied or written part way): the
        # calls after the last complete record are unknown, not absent.
        self.torn = torn

    def on_demand(self):
        """Whether it was taken on request (SIGUSR2, dcclCommDumpRecorder), not at a failure."""
        return self.reason.startswith(ON_DEMAND)

    def colls(self):
        """The collective calls by sequence number (send/recv groups left out)."""
        return {c["seq"]: c for c in self.calls if c["coll"] != "send_recv"}


class Job:
    """The dumps of one communicator: every rank that wrote one."""

    def __init__(self, comm):
        self.comm = comm
        self.ranks = {}
        self.nranks = 0
        self.hosts = []

    def add(self, d):
        self.ranks[d.rank] = d
        self.nranks = max(self.nranks, d.header.get("nranks", 0))
        if len(d.header.get("hosts", [])) > len(self.hosts):
            self.hosts = d.header["hosts"]

    def host_of(self, rank):
        if rank in self.ranks:
            return self.ranks[rank].host
        return self.hosts[rank] if rank < len(self.hosts) else "?"

    def missing(self):
        return [r for r in range(self.nranks) if r not in self.ranks]

    def torn(self):
        return sorted(r for r, d in self.ranks.items() if d.torn)

    def on_demand(self):
        """Every dump was taken on request: a rank without one was not asked (or had
        no folder), which says nothing about it."""
        return bool(self.ranks) and all(d.on_demand() for d in self.ranks.values())


class DumpError(Exception):
    """A path that cannot be read as a dump: the message names it and the cause."""


def warn(text):
    print("dccl-trace: warning: " + text, file=sys.stderr)


# A record's fields the analysis reads, with their types (a dump writes them all).
FIELDS = {"seq": int, "coll": str, "count": int, "type": str, "root": int, "start_ns": int, "end_ns": int,
          "result": int}


def complete(obj):
    """Whether a JSON object holds a whole call record (its fields and steps well formed)."""
    if any(not isinstance(obj.get(k), t) or isinstance(obj.get(k), bool) for k, t in FIELDS.items()):
        return False
    steps = obj.get("steps", [])
    return isinstance(steps, list) and all(
        isinstance(st, list) and len(st) == 5 and isinstance(st[0], int) and st[1] in ("send", "recv") and
        all(isinstance(v, int) for v in st[2:]) for st in steps)


def read_file(path):
    header, calls, bad = None, [], None
    try:
        with open(path) as f:
            lines = f.readlines()
    except (OSError, UnicodeDecodeError) as e:
        raise DumpError("%s: cannot read it: %s" % (path, e.strerror if isinstance(e, OSError) else e)) from None
    last = max((i for i, l in enumerate(lines) if l.strip()), default=-1)
    for i, line in enumerate(lines):
        line = line.strip()
        if not line:
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError:
            bad = i  # a line cut short: torn when it is the last
            continue
        if not isinstance(obj, dict):
            continue
        if obj.get("header"):
            header = obj
        elif isinstance(obj.get("seq"), int) and "coll" in obj:
            if complete(obj):
                calls.append(obj)
            else:  # a record without its fields (written by hand, or by another tool)
                warn("%s: line %d is a call record without all its fields (%s) or with malformed steps; left out"
                     % (path, i + 1, ", ".join(FIELDS)))
    if header is not None and not isinstance(header.get("rank"), int):
        raise DumpError("%s: its header has no rank: not a flight-recorder dump" % path)
    if last < 0:  # nothing written: a dump cut off before its first line
        warn("%s: empty (a dump cut off before its header was written?); left out" % path)
        return None
    torn = bad is not None and bad == last
    if torn:
        m = re.search(r"\.r(\d+)\.jsonl$", path)
        rank = header["rank"] if header else (int(m.group(1)) if m else None)
        who = "rank %s" % rank if rank is not None else "rank unknown"
        if header is None:
            warn("%s (%s): torn dump: cut short inside its header; left out" % (path, who))
        else:
            warn("%s (%s): torn dump: its last line is cut short; its calls after %s are unknown" % (
                path, who, "#%d" % calls[-1]["seq"] if calls else "the header"))
    elif bad is not None:
        warn("%s: line %d is not JSON; left out" % (path, bad + 1))
    return RankDump(header, calls, path, torn) if header else None


def load(paths):
    """Jobs from files and folders (every dccl-rec.*.jsonl in a folder, recursively)."""
    files = []
    for p in paths:
        if os.path.isdir(p):
            files += glob.glob(os.path.join(p, "**", "dccl-rec.*.jsonl"), recursive=True)
        elif os.path.exists(p):
            files.append(p)
        else:
            raise DumpError("%s: no such file or folder" % p)
    jobs = {}
    for path in sorted(files):
        d = read_file(path)
        if d is None:
            continue
        comm = d.header.get("comm", "?")
        jobs.setdefault(comm, Job(comm)).add(d)
    # The largest communicator first: the job's own, then its sub-communicators.
    return sorted(jobs.values(), key=lambda j: (-j.nranks, j.comm))
