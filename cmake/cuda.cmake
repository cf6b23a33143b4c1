# Optional CUDA backend (src/mem/cuda/), included by the top-level CMakeLists.
# Without a CUDA compiler the library keeps src/mem/cuda_stub.cc, whose
# cuda_backend() returns nullptr ("built without CUDA").
#
# The kernels (*.cu) build as an object library, so that dccl's C++ flags
# (-Wall, -march, ...) never reach nvcc; the host side (*.cc) builds with dccl.
# Only the static CUDA runtime is linked: it loads the driver at run time, so
# libdccl loads (and cuda_backend() reports why not) on machines without one.
# The driver API is reached through cudaGetDriverEntryPointByVersion.
option(DCCL_CUDA "Build the CUDA backend when a CUDA compiler is found" ON)
if(NOT DCCL_CUDA)
  message(STATUS "DirectCCL: CUDA backend disabled (DCCL_CUDA=OFF)")
  return()
endif()

include(CheckLanguage)
if(NOT CMAKE_CUDA_COMPILER)
  check_language(CUDA)
endif()
if(NOT CMAKE_CUDA_COMPILER AND EXISTS /usr/local/cuda/bin/nvcc)
  set(CMAKE_CUDA_COMPILER /usr/local/cuda/bin/nvcc CACHE FILEPATH "CUDA compiler" FORCE)
endif()
if(NOT CMAKE_CUDA_COMPILER)
  message(STATUS "DirectCCL: no CUDA compiler found; building without the CUDA backend")
  return()
endif()

if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
  set(CMAKE_CUDA_ARCHITECTURES 80 90)
endif()
enable_language(CUDA)
find_package(CUDAToolkit)
if(NOT CUDAToolkit_FOUND)
  message(STATUS "DirectCCL: CUDA toolkit not found; building without the CUDA backend")
  return()
endif()

file(GLOB DCCL_CUDA_KERNELS CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/src/mem/cuda/*.cu)
file(GLOB DCCL_CUDA_HOST CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/src/mem/cuda/*.cc)

add_library(dccl_cuda_kernels OBJECT ${DCCL_CUDA_KERNELS})
# C++17 for the kernels: CMake 3.25 cannot ask nvcc for C++20.
set_target_properties(dccl_cuda_kernels PROPERTIES POSITION_INDEPENDENT_CODE ON
                      CUDA_STANDARD 17 CUDA_STANDARD_REQUIRED ON)
target_include_directories(dccl_cuda_kernels PRIVATE ${CMAKE_SOURCE_DIR}/include ${CMAKE_SOURCE_DIR}/src)
set(DCCL_CUDA_WARN -Xcompiler=-Wall,-Wextra,-Wno-unused-parameter)
if(DCCL_WERROR)
  list(APPEND DCCL_CUDA_WARN --Werror=all-warnings)
endif()
target_compile_options(dccl_cuda_kernels PRIVATE ${DCCL_CUDA_WARN})

target_sources(dccl PRIVATE ${DCCL_CUDA_HOST} $<TARGET_OBJECTS:dccl_cuda_kernels>)
target_compile_definitions(dccl PRIVATE DCCL_HAVE_CUDA=1)
# dccl compiles no CUDA itself, but takes the kernels' objects; it existed before
# CUDA was enabled, so give it what CMake asks of a target with CUDA objects.
set_target_properties(dccl PROPERTIES CUDA_STANDARD 17 CUDA_ARCHITECTURES "${CMAKE_CUDA_ARCHITECTURES}")
target_link_libraries(dccl PRIVATE CUDA::cudart_static)
message(STATUS "DirectCCL: CUDA backend on (nvcc ${CMAKE_CUDA_COMPILER_VERSION}, archs ${CMAKE_CUDA_ARCHITECTURES})")
