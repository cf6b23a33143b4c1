// The CUDA backend when the library is built without CUDA (cmake/cuda.cmake
// defines DCCL_HAVE_CUDA and compiles src/mem/cuda/ instead).
#ifndef DCCL_HAVE_CUDA
#include "mem/backend.hpp"

namespace dccl::mem {

Backend* cuda_backend() { return nullptr; }
std::string cuda_unavailable_reason() { return "built without CUDA"; }

}  // namespace dccl::mem
#endif
