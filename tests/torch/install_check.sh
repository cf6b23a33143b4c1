#!/bin/sh
# cmake --install puts torch_dccl into a site directory under the prefix, and the
# installed module finds the installed libdccl (RUNPATH), not the build tree's:
# a one-rank group initialised with env:// runs an all_reduce from there.
#   install_check.sh BUILD_DIR PYTHON
set -eu
build=$1
py=$2
prefix=$(mktemp -d /tmp/dccl-install.XXXXXX)
trap 'rm -rf "$prefix"' EXIT
cmake --install "$build" --prefix "$prefix" >/dev/null
init=$(find "$prefix" -path '*-packages/torch_dccl/__init__.py')
[ -n "$init" ] || { echo "install_check: no torch_dccl package under $prefix"; exit 1; }
site=$(dirname "$(dirname "$init")")
echo "install_check: torch_dccl in ${site#"$prefix"/}"
PYTHONPATH=$site PREFIX=$prefix "$py" - <<'PY'
import datetime, os, socket
import torch
import torch.distributed as dist
import torch_dccl

prefix = os.environ["PREFIX"]
assert torch_dccl.__file__.startswith(prefix), torch_dccl.__file__
with socket.socket() as s:
    s.bind(("127.0.0.1", 0))
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(s.getsockname()[1]))
dist.init_process_group("dccl", init_method="env://", rank=0, world_size=1, timeout=datetime.timedelta(seconds=30))
t = torch.arange(4.0)
dist.all_reduce(t)
assert t.tolist() == [0.0, 1.0, 2.0, 3.0], t
libs = [l.split()[-1] for l in open("/proc/self/maps") if "libdccl" in l]
assert libs and all(l.startswith(prefix) for l in libs), libs
dist.destroy_process_group()
print("install_check: all_reduce through the installed torch_dccl and", os.path.basename(libs[0]), "OK")
PY
