# Optional CUDA runtime of the CUDA backend, included by the top-level CMakeLists.
# The backend's folder, src/mem/cuda/, builds everywhere with the rest of src/
# (cmake/library.cmake) except src/mem/cuda/toolkit/, the files that include CUDA
# headers, which only this file adds. Without them, src/mem/cuda/cuda_stub.cc
# (compiled unless DCCL_HAVE_CUDA is defined) makes cuda_backend() return nullptr
# ("built without CUDA").
#
# The kernels (toolkit/*.cu) build as an object library, so that the library's
# C++ flags (-Wall, -march, ...) never reach nvcc; the runtime binding
# (toolkit/*.cc) builds in dccl_objects, and the kernels' objects go into both
# libraries built from those (DCCL_LIBRARIES).
# Only the static CUDA runtime is linked: it loads the driver at run time, so
# libdccl loads (and cuda_backend() reports why not) on machines without one.
# The driver API is reached through cudaGetDriverEntryPointByVersion.
#
# DCCL_CUDA: AUTO (default) builds the backend when a usable toolkit is found and
# the stub otherwise; ON fails the configure, naming what is missing, when it is
# not; OFF always builds the stub.
set(DCCL_CUDA AUTO CACHE STRING "CUDA backend: AUTO (when a usable toolkit is found), ON (required) or OFF")
set_property(CACHE DCCL_CUDA PROPERTY STRINGS AUTO ON OFF)
string(TOUPPER "${DCCL_CUDA}" dccl_cuda_mode)
if(dccl_cuda_mode MATCHES "^(ON|TRUE|YES|Y|1)$")
  set(dccl_cuda_mode ON)
elseif(dccl_cuda_mode MATCHES "^(OFF|FALSE|NO|N|0)$")
  set(dccl_cuda_mode OFF)
elseif(NOT dccl_cuda_mode STREQUAL "AUTO")
  message(FATAL_ERROR "DCCL_CUDA must be AUTO, ON or OFF (got '${DCCL_CUDA}')")
endif()
if(dccl_cuda_mode STREQUAL "OFF")
  message(STATUS "DirectCCL: CUDA backend disabled (DCCL_CUDA=OFF)")
  return()
endif()

# Without the toolkit: AUTO builds the stub and says why, ON stops the configure.
macro(dccl_cuda_missing what)
  if(dccl_cuda_mode STREQUAL "ON")
    message(FATAL_ERROR "DirectCCL: DCCL_CUDA=ON but ${what}")
  endif()
  message(STATUS "DirectCCL: ${what}; building without the CUDA backend (DCCL_CUDA=AUTO)")
  return()
endmacro()

# check_language compiles a trivial CUDA program, so a compiler it finds is
# usable. It looks at CUDACXX and PATH; the toolkit's usual place is tried too.
include(CheckLanguage)
if(NOT CMAKE_CUDA_COMPILER AND NOT DEFINED ENV{CUDACXX} AND EXISTS /usr/local/cuda/bin/nvcc)
  find_program(dccl_nvcc_in_path nvcc)
  if(NOT dccl_nvcc_in_path)
    set(ENV{CUDACXX} /usr/local/cuda/bin/nvcc)
  endif()
endif()
if(NOT CMAKE_CUDA_COMPILER)
  unset(CMAKE_CUDA_COMPILER CACHE)  # a NOTFOUND from an earlier configure: look again
  check_language(CUDA)
endif()
if(NOT CMAKE_CUDA_COMPILER)
  dccl_cuda_missing("no usable CUDA compiler (nvcc not in PATH, CUDACXX or /usr/local/cuda/bin, or it cannot build a test program)")
endif()

if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
  set(CMAKE_CUDA_ARCHITECTURES 80 90)
endif()
enable_language(CUDA)
find_package(CUDAToolkit)
if(NOT CUDAToolkit_FOUND)
  dccl_cuda_missing("the CUDA toolkit (headers and libraries) was not found next to ${CMAKE_CUDA_COMPILER}")
endif()
if(NOT TARGET CUDA::cudart_static)
  dccl_cuda_missing("the CUDA toolkit in ${CUDAToolkit_LIBRARY_DIR} has no static runtime (libcudart_static.a)")
endif()

file(GLOB DCCL_CUDA_KERNELS CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/src/mem/cuda/toolkit/*.cu)
file(GLOB DCCL_CUDA_HOST CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/src/mem/cuda/toolkit/*.cc)

add_library(dccl_cuda_kernels OBJECT ${DCCL_CUDA_KERNELS})
# C++17 for the kernels: CMake 3.25 cannot ask nvcc for C++20.
set_target_properties(dccl_cuda_kernels PROPERTIES POSITION_INDEPENDENT_CODE ON
                      CUDA_STANDARD 17 CUDA_STANDARD_REQUIRED ON CUDA_VISIBILITY_PRESET hidden)
target_include_directories(dccl_cuda_kernels PRIVATE ${PROJECT_SOURCE_DIR}/include ${PROJECT_SOURCE_DIR}/src)
set(DCCL_CUDA_WARN -Xcompiler=-Wall,-Wextra,-Wno-unused-parameter)
if(DCCL_WERROR)
  list(APPEND DCCL_CUDA_WARN --Werror=all-warnings)
endif()
target_compile_options(dccl_cuda_kernels PRIVATE ${DCCL_CUDA_WARN})

target_sources(dccl_objects PRIVATE ${DCCL_CUDA_HOST})
target_compile_definitions(dccl_objects PRIVATE DCCL_HAVE_CUDA=1)
target_link_libraries(dccl_objects PRIVATE CUDA::cudart_static)
# The libraries compile no CUDA themselves, but take the kernels' objects; they
# existed before CUDA was enabled, so give them what CMake asks of a target with
# CUDA objects. The shared library keeps the static runtime's symbols to itself
# (cmake/exports.map).
foreach(lib ${DCCL_LIBRARIES})
  target_sources(${lib} PRIVATE $<TARGET_OBJECTS:dccl_cuda_kernels>)
  set_target_properties(${lib} PROPERTIES CUDA_STANDARD 17 CUDA_ARCHITECTURES "${CMAKE_CUDA_ARCHITECTURES}")
endforeach()
target_link_libraries(dccl PRIVATE CUDA::cudart_static)
target_link_libraries(dccl_internal PUBLIC CUDA::cudart_static)
message(STATUS "DirectCCL: CUDA backend on (nvcc ${CMAKE_CUDA_COMPILER_VERSION}, archs ${CMAKE_CUDA_ARCHITECTURES})")
