"""DirectCCL as a torch.distributed backend.

``import torch_dccl`` registers the backend ``"dccl"``; then
``torch.distributed.init_process_group("dccl")`` (under torchrun, or with
``init_method="env://"`` or ``"tcp://host:port"``) and ``new_group(backend="dccl")``
make process groups over DirectCCL. CPU tensors only. See docs/pytorch.md.
"""
import torch.distributed as _dist

from ._C import ProcessGroupDCCL, dccl_version

__all__ = ["ProcessGroupDCCL", "dccl_version", "BACKEND"]

BACKEND = "dccl"


def _create_process_group(store, rank, world_size, timeout):
    """The creator torch.distributed calls for every group of backend "dccl",
    on the group's member ranks, with the group's own (prefixed) store."""
    return ProcessGroupDCCL(store, rank, world_size, timeout)


if not hasattr(_dist.Backend, BACKEND.upper()):
    _dist.Backend.register_backend(BACKEND, _create_process_group)
