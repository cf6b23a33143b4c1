// torch_dccl._C: the Python face of ProcessGroupDCCL. torch_dccl/__init__.py
// registers it with torch.distributed as the backend "dccl".
#include <pybind11/chrono.h>
#include <torch/csrc/utils/pybind.h>

#include "backend.hpp"

namespace py = pybind11;

PYBIND11_MODULE(_C, m) {
  m.doc() = "DirectCCL process group for torch.distributed (CPU tensors)";
  // The base classes (ProcessGroup, Store) are registered by torch's own module.
  py::module_::import("torch.distributed");

  py::class_<torch_dccl::ProcessGroupDCCL, c10d::ProcessGroup, c10::intrusive_ptr<torch_dccl::ProcessGroupDCCL>>(
      m, "ProcessGroupDCCL",
      "A process group over DirectCCL. Made by torch.distributed for backend 'dccl': rank 0 publishes a "
      "DirectCCL id in the group's store, every rank joins one communicator; operations run in order on "
      "one worker thread and return asynchronous Work.")
      .def(py::init([](const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                       std::chrono::milliseconds timeout) {
             return c10::make_intrusive<torch_dccl::ProcessGroupDCCL>(store, rank, size, timeout);
           }),
           py::arg("store"), py::arg("rank"), py::arg("size"), py::arg("timeout"),
           py::call_guard<py::gil_scoped_release>())
      .def_property_readonly("timeout", &torch_dccl::ProcessGroupDCCL::timeout,
                             "the bound on every operation and wait of this group");

  int version = 0;
  dcclGetVersion(&version);
  m.attr("dccl_version") = version;
}
