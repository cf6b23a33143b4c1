"""Reads flight-recorder dumps (dccl-rec.<comm>.r<rank>.jsonl) into one Job per communicator."""
import glob
import json
import os


class RankDump:
    def __init__(self, header, calls, path):
        self.header = header
        self.calls = calls  # oldest first
        self.path = path
        self.rank = header["rank"]
        self.host = header.get("host", "?")
        self.reason = header.get("reason", "")

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


def read_file(path):
    header, calls = None, []
    with open(path) as f:
        for line in f:
            line = line.strip()
            if not line:
                continue
            try:
                obj = json.loads(line)
            except json.JSONDecodeError:
                continue  # a line cut short (a dump interrupted by the process's end)
            if obj.get("header"):
                header = obj
            else:
                calls.append(obj)
    return RankDump(header, calls, path) if header else None


def load(paths):
    """Jobs from files and folders (every dccl-rec.*.jsonl in a folder, recursively)."""
    files = []
    for p in paths:
        if os.path.isdir(p):
            files += glob.glob(os.path.join(p, "**", "dccl-rec.*.jsonl"), recursive=True)
        else:
            files.append(p)
    jobs = {}
    for path in sorted(files):
        d = read_file(path)
        if d is None:
            continue
        comm = d.header.get("comm", "?")
        jobs.setdefault(comm, Job(comm)).add(d)
    # The largest communicator first: the job's own, then its sub-communicators.
    return sorted(jobs.values(), key=lambda j: (-j.nranks, j.comm))
