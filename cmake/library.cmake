# The library's targets, included by the top-level CMakeLists. Every source in
# src/ is compiled once, into dccl_objects, and linked twice:
#
#   dccl           the shared library that is installed (DirectCCL::dccl). It
#                  exports the C API of include/dccl/dccl.h and nothing else:
#                  the sources build with hidden visibility, dccl.h gives its
#                  declarations default visibility, and cmake/exports.map hides
#                  what else would leak (template instances of the standard
#                  library, static archives such as the CUDA runtime).
#   dccl_internal  a static library of the same objects, for the tools and
#                  tests that call the layers under src/ directly. Never
#                  installed.
#
# cmake/cuda.cmake adds the CUDA backend's toolkit files (src/mem/cuda/toolkit/)
# to dccl_objects and its kernels to both libraries (DCCL_LIBRARIES lists them).
file(GLOB_RECURSE DCCL_SOURCES CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/src/*.cc)
list(FILTER DCCL_SOURCES EXCLUDE REGEX "/src/mem/cuda/toolkit/")
# The NCCL network plugin is a library of its own (cmake/nccl_plugin.cmake).
list(FILTER DCCL_SOURCES EXCLUDE REGEX "/src/plugin/")

add_library(dccl_objects OBJECT ${DCCL_SOURCES})
target_include_directories(dccl_objects PRIVATE ${PROJECT_SOURCE_DIR}/include ${PROJECT_SOURCE_DIR}/src)
target_compile_options(dccl_objects PRIVATE ${DCCL_WARN} ${DCCL_ARCH_OPTIONS})
# Thread-locals in a shared library are reached through __tls_get_addr by default
# (a call and a lookup per access); with TLS descriptors (x86-64) an access to a
# variable in the static TLS block is a load. The library's hot path touches a few
# per call (the flight recorder's current entry, the affinity state), about 70
# instructions of an 8-byte allreduce's 3,300 (bench/results/2026-12-05-small).
include(CheckCXXCompilerFlag)
check_cxx_compiler_flag(-mtls-dialect=gnu2 DCCL_HAVE_TLSDESC)
if(DCCL_HAVE_TLSDESC)
  target_compile_options(dccl_objects PRIVATE -mtls-dialect=gnu2)
endif()
target_compile_definitions(dccl_objects PRIVATE DCCL_VERSION_STRING="${PROJECT_VERSION}")
target_link_libraries(dccl_objects PRIVATE PkgConfig::FABRIC Threads::Threads)
set_target_properties(dccl_objects PROPERTIES C_VISIBILITY_PRESET hidden CXX_VISIBILITY_PRESET hidden
                                              VISIBILITY_INLINES_HIDDEN ON)

# The soname carries the major version, and the minor one too while the major
# is 0 (0.x releases may change the ABI): libdccl.so.0.1 for 0.1.z.
if(PROJECT_VERSION_MAJOR EQUAL 0)
  set(DCCL_SOVERSION 0.${PROJECT_VERSION_MINOR})
else()
  set(DCCL_SOVERSION ${PROJECT_VERSION_MAJOR})
endif()

add_library(dccl SHARED $<TARGET_OBJECTS:dccl_objects>)
add_library(DirectCCL::dccl ALIAS dccl)
target_include_directories(dccl PUBLIC $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}/include>
                                       $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)
target_link_libraries(dccl PUBLIC Threads::Threads PRIVATE PkgConfig::FABRIC ${CMAKE_DL_LIBS})
set(dccl_map ${PROJECT_SOURCE_DIR}/cmake/exports.map)
target_link_options(dccl PRIVATE LINKER:--version-script=${dccl_map})
if(DCCL_SANITIZE STREQUAL "")
  # Every symbol resolved at link time (the sanitizers' runtimes come from the executable).
  target_link_options(dccl PRIVATE LINKER:--no-undefined)
endif()
# Installed, it finds a libfabric outside the system's folders through its RUNPATH.
set_target_properties(dccl PROPERTIES VERSION ${PROJECT_VERSION} SOVERSION ${DCCL_SOVERSION}
                                      LINK_DEPENDS ${dccl_map} INSTALL_RPATH_USE_LINK_PATH ON)

add_library(dccl_internal STATIC $<TARGET_OBJECTS:dccl_objects>)
target_include_directories(dccl_internal PUBLIC ${PROJECT_SOURCE_DIR}/include ${PROJECT_SOURCE_DIR}/src)
target_link_libraries(dccl_internal PUBLIC Threads::Threads PkgConfig::FABRIC ${CMAKE_DL_LIBS})

set(DCCL_LIBRARIES dccl dccl_internal)
