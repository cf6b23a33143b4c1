"""Intel MPI and oneCCL, the peers built on libfabric, for bench/compare and
bench/compare-hosts.

Both come from PyPI (impi-rt/impi-devel, oneccl-cpu/oneccl-cpu-devel) in a
virtual environment of their own, .peers/ (`scripts/install-deps --peers`),
with their own libfabric (2.4.0-impi) and providers. Only their runs see it:
each argv starts with `env` and the variables Intel's activation script would
set, so DirectCCL's runs keep the system's libfabric. oneccl-perf and impi-perf
(bench/peers/) are launched by Intel MPI's mpirun (hydra); across emulated
hosts hydra starts its proxies through bench/peers/netns-agent, as bench/
contention does for MPICH.

Settings per class (one host):
  shm  Intel MPI: I_MPI_FABRICS=shm:ofi (its default: its own shared memory for
       local peers). oneCCL: CCL_ATL_TRANSPORT=ofi CCL_ATL_SHM=1 (libfabric's shm
       provider for local peers).
  tcp  Intel MPI: I_MPI_FABRICS=ofi FI_PROVIDER=tcp I_MPI_COLL_INTRANODE=pt2pt
       (without the last, collectives up to 16 KiB between ranks of one node
       still go through shared memory: 0.3 us for 8 B). oneCCL:
       CCL_ATL_TRANSPORT=ofi FI_PROVIDER=tcp (libfabric's tcp provider).
Across hosts both use FI_PROVIDER=tcp on eth0, with shared memory on a host.
"""

import os
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PREFIX = ROOT / ".peers"
HERE = Path(__file__).resolve().parent
AGENT = HERE / "peers" / "netns-agent"
MPI_HOSTS = HERE / "peers" / "mpi-hosts"

# Launch settings per library and class; the transport in words for the report.
SETTINGS = {
    ("impi", "shm"): ({"I_MPI_FABRICS": "shm:ofi"}, "Intel MPI shm for local peers (I_MPI_FABRICS=shm:ofi, its default)"),
    ("impi", "tcp"): ({"I_MPI_FABRICS": "ofi", "FI_PROVIDER": "tcp", "I_MPI_COLL_INTRANODE": "pt2pt"},
                      "I_MPI_FABRICS=ofi I_MPI_COLL_INTRANODE=pt2pt, libfabric tcp (Intel's libfabric 2.4)"),
    ("oneccl", "shm"): ({"CCL_ATL_TRANSPORT": "ofi", "CCL_ATL_SHM": "1"},
                        "CCL_ATL_TRANSPORT=ofi CCL_ATL_SHM=1: libfabric shm (Intel's libfabric 2.4)"),
    ("oneccl", "tcp"): ({"CCL_ATL_TRANSPORT": "ofi", "FI_PROVIDER": "tcp", "I_MPI_FABRICS": "ofi"},
                        "CCL_ATL_TRANSPORT=ofi FI_PROVIDER=tcp: libfabric tcp (Intel's libfabric 2.4)"),
}
# Across emulated hosts: shared memory on a host, libfabric tcp on eth0 between hosts.
HOSTS_SETTINGS = {
    "impi": {"FI_PROVIDER": "tcp", "FI_TCP_IFACE": "eth0"},
    "oneccl": {"CCL_ATL_TRANSPORT": "ofi", "CCL_ATL_SHM": "1", "FI_PROVIDER": "tcp", "FI_TCP_IFACE": "eth0"},
}
LIBRARY = {"impi": "Intel MPI", "oneccl": "oneCCL"}
PROGRAM = {"impi": "impi-perf", "oneccl": "oneccl-perf"}


def env_argv():
    """`env` with what Intel's activation scripts set: their own mpirun, hydra
    proxies, libraries and libfabric providers first. Without .peers/bin first in
    PATH, hydra may start Debian MPICH's hydra_pmi_proxy, and MPI_Init then fails
    in MPIDU_bc_table_create."""
    lib = PREFIX / "lib"
    return ["env", f"I_MPI_ROOT={PREFIX}", f"CCL_ROOT={PREFIX}", f"LD_LIBRARY_PATH={lib}",
            f"FI_PROVIDER_PATH={lib}", f"PATH={PREFIX / 'bin'}:{os.environ.get('PATH', '/usr/bin:/bin')}"]


def missing(lib, bindir):
    """Why lib's benchmark cannot run ("" when it can)."""
    if not (PREFIX / "bin" / "mpirun").exists():
        return f"{PREFIX}/bin/mpirun is missing (scripts/install-deps --peers)"
    if not (Path(bindir) / PROGRAM[lib]).exists():
        return f"{Path(bindir) / PROGRAM[lib]} was not built (see bench/CMakeLists.txt's warnings)"
    return ""


def genv(settings):
    return [a for k, v in settings.items() for a in ("-genv", k, v)]


def one_host(lib, klass, bindir):
    """argv builder (n, flags) -> argv for lib's benchmark on this host."""
    settings = SETTINGS[(lib, klass)][0]
    exe = str(Path(bindir) / PROGRAM[lib])
    return lambda n, flags: env_argv() + [str(PREFIX / "bin" / "mpirun"), "-n", str(n)] + genv(settings) + \
        [exe] + flags


def across_hosts(lib, bindir, run, hosts, per_host, agent_dir, flags, dccl_run_args=(), addrs=None):
    """argv for lib's benchmark on `hosts` emulated hosts of dccl-run (`run`) with
    per_host ranks each: one bench/peers/mpi-hosts per host, host 0's starting
    Intel's mpirun, whose proxies reach the other hosts through netns-agent.
    addrs: the hosts' eth0 addresses (default 198.18.0.<h+1>, one bridge)."""
    host_list = ",".join(addrs or [f"198.18.0.{h + 1}" for h in range(hosts)])
    mpirun = env_argv() + [str(PREFIX / "bin" / "mpirun"), "-bootstrap", "ssh", "-bootstrap-exec", str(AGENT),
                           "-hosts", host_list, "-ppn", str(per_host), "-n", str(hosts * per_host),
                           "-iface", "eth0"] + genv(HOSTS_SETTINGS[lib])
    return [str(run), "--hosts", str(hosts), "-n", str(hosts)] + list(dccl_run_args) + \
        ["--bind-to", "none", "--env", f"NETNS_AGENT_DIR={agent_dir}", str(MPI_HOSTS)] + mpirun + \
        [str(Path(bindir) / PROGRAM[lib])] + flags


def versions():
    """{package: version} of what .peers/ holds (from pip's metadata)."""
    out = {}
    for dist in sorted(PREFIX.glob("lib/python3*/site-packages/*.dist-info")):
        name, _, ver = dist.name[: -len(".dist-info")].partition("-")
        if name.startswith(("impi", "oneccl", "intel_cmplr")):
            out[name.replace("_", "-")] = ver
    return out
