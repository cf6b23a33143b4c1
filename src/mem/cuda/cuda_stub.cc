// The CUDA runtime when the library is built without CUDA (cmake/cuda.cmake
// defines DCCL_HAVE_CUDA and compiles src/mem/cuda/toolkit/ instead).
#ifndef DCCL_HAVE_CUDA
#include "mem/cuda/cuda_api.hpp"

namespace dccl::mem::cuda {

Api* runtime_api(std::string* why) {
  if (why) *why = "built without CUDA";
  return nullptr;
}

}  // namespace dccl::mem::cuda
#endif
