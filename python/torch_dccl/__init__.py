"""DirectCCL as a torch.distributed backend (PyTorch 2.x).

``import torch_dccl`` registers the backend ``"dccl"`` for CPU and CUDA tensors;
then ``torch.distributed.init_process_group("dccl")`` (under torchrun, or with
``init_method="env://"`` or ``"tcp://host:port"``), ``init_process_group(
"cpu:gloo,cuda:dccl")`` and ``new_group(backend="dccl")`` make process groups
over DirectCCL. See docs/pytorch.md.
"""
import atexit as _atexit
import sys as _sys

import torch.distributed as _dist

from ._C import _python_exiting, _uncaught_exception, create_backend, cuda, dccl_version, is_dccl
from ._C import monitored_barrier as _monitored_barrier
from ._C import sequence_number as _sequence_number

__all__ = ["BACKEND", "create_backend", "cuda", "dccl_version", "is_dccl", "monitored_barrier", "sequence_number"]

BACKEND = "dccl"

if BACKEND not in _dist.Backend.backend_list:
    # The creator gets (store, group rank, group size, timeout) for every group
    # of backend "dccl", on the group's members, with the group's own store.
    _dist.Backend.register_backend(BACKEND, create_backend, extended_api=False, devices=["cpu", "cuda"])

# Before the interpreter finalizes: a group's worker must not drop tensors then
# (that takes the GIL, and Python ends such a thread: SIGABRT at exit).
_atexit.register(_python_exiting)


def _excepthook(kind, value, tb, _previous=_sys.excepthook):
    # An uncaught exception ends the process: its groups are aborted, not destroyed,
    # so that ranks waiting for this one in a collective fail at once.
    _uncaught_exception()
    _previous(kind, value, tb)


_sys.excepthook = _excepthook


def monitored_barrier(group=None, timeout=None, wait_all_ranks=False):
    """torch.distributed.monitored_barrier for a dccl group (PyTorch's accepts
    Gloo groups only): every rank checks in through the group's store; rank 0
    raises naming the ranks that did not arrive within the timeout (all of
    them with wait_all_ranks), and the others raise with the same text."""
    import datetime

    import torch

    group = group or _dist.group.WORLD
    backend = group._get_backend(torch.device("cpu"))
    if timeout is None:
        timeout = datetime.timedelta(minutes=30)
    _monitored_barrier(backend, timeout, wait_all_ranks)


def sequence_number(group=None):
    """How many collectives the group's dccl backend has queued: equal on every
    rank while the ranks call the same collectives."""
    import torch

    return _sequence_number((group or _dist.group.WORLD)._get_backend(torch.device("cpu")))
