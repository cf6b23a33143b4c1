// torch_dccl._C: makes ProcessGroupDCCL for torch.distributed. torch_dccl/__init__.py
// registers _C.create_backend as the creator of backend "dccl".
#include <pybind11/chrono.h>

#include <stdexcept>
#include <torch/csrc/utils/pybind.h>

#include "process_group.hpp"

namespace py = pybind11;

PYBIND11_MODULE(_C, m) {
  m.doc() = "DirectCCL as a torch.distributed backend (CPU and CUDA tensors)";
  // c10d.Backend and c10d.Store are registered by torch's own module.
  py::module_::import("torch.distributed");

  m.def(
      "create_backend",
      [](const c10::intrusive_ptr<c10d::Store>& store, int rank, int size, std::chrono::milliseconds timeout) {
        return c10::intrusive_ptr<c10d::Backend>(
            c10::make_intrusive<torch_dccl::ProcessGroupDCCL>(store, rank, size, timeout));
      },
      "A DirectCCL backend: rank 0 publishes a DirectCCL id in the group's store, every rank joins one "
      "communicator; operations run in order on one worker thread and return asynchronous Work.",
      py::arg("store"), py::arg("rank"), py::arg("size"), py::arg("timeout"), py::call_guard<py::gil_scoped_release>());
  m.def(
      "is_dccl",
      [](const c10::intrusive_ptr<c10d::Backend>& b) {
        return dynamic_cast<torch_dccl::ProcessGroupDCCL*>(b.get()) != nullptr;
      },
      "True when a c10d Backend is a DirectCCL one.");
  m.def(
      "monitored_barrier",
      [](const c10::intrusive_ptr<c10d::Backend>& b, std::chrono::milliseconds timeout, bool wait_all_ranks) {
        auto* pg = dynamic_cast<torch_dccl::ProcessGroupDCCL*>(b.get());
        if (!pg) throw std::invalid_argument("torch_dccl.monitored_barrier: not a dccl backend");
        c10d::BarrierOptions opts;
        opts.timeout = timeout;
        pg->monitoredBarrier(opts, wait_all_ranks);
      },
      "A barrier through the group's store that names the ranks that did not reach it within the timeout "
      "(torch.distributed.monitored_barrier accepts Gloo groups only).",
      py::arg("backend"), py::arg("timeout"), py::arg("wait_all_ranks") = false,
      py::call_guard<py::gil_scoped_release>());
  m.def(
      "sequence_number",
      [](const c10::intrusive_ptr<c10d::Backend>& b) {
        auto* pg = dynamic_cast<torch_dccl::ProcessGroupDCCL*>(b.get());
        if (!pg) throw std::invalid_argument("torch_dccl.sequence_number: not a dccl backend");
        return pg->getSequenceNumberForGroup();
      },
      "The number of collectives queued on a dccl backend: the same on every rank of a group in step "
      "(ProcessGroup's own accessor accepts Gloo and NCCL only).");
  m.def("_python_exiting", &torch_dccl::python_exiting,
        "From the interpreter's atexit hook: the groups' workers leak what they would drop from now on "
        "(a thread that takes the GIL while the interpreter finalizes is ended by Python).",
        py::call_guard<py::gil_scoped_release>());
  m.def("_uncaught_exception", &torch_dccl::uncaught_exception,
        "From torch_dccl's sys.excepthook: groups dropped without destroy_process_group are aborted "
        "(dcclCommAbort: the other ranks fail at once) instead of destroyed (which meets them).");
  m.attr("cuda") = torch_dccl::cuda_built();
  int version = 0;
  dcclGetVersion(&version);
  m.attr("dccl_version") = version;
}
