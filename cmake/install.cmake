# cmake --install: libdccl.so with its soname links, include/dccl/, the CMake
# package (find_package(DirectCCL CONFIG) -> DirectCCL::dccl) and dccl.pc. The
# tools install from tools/CMakeLists.txt. Both package files are relocatable:
# they find the prefix from where they lie, so `cmake --install --prefix P`
# works for any P, whatever CMAKE_INSTALL_PREFIX was at configure time.
include(CMakePackageConfigHelpers)

install(TARGETS dccl EXPORT DirectCCLTargets LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
# NCCL's network plugin (NCCL_NET_PLUGIN=dccl finds it on the library path).
install(TARGETS nccl-net-dccl LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/dccl DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})

set(dccl_cmake_dir ${CMAKE_INSTALL_LIBDIR}/cmake/DirectCCL)
install(EXPORT DirectCCLTargets NAMESPACE DirectCCL:: DESTINATION ${dccl_cmake_dir})
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/DirectCCLConfig.cmake.in
                              ${PROJECT_BINARY_DIR}/DirectCCLConfig.cmake INSTALL_DESTINATION ${dccl_cmake_dir})
# The ABI promise of the soname (cmake/library.cmake): same major, and same minor while the major is 0.
if(PROJECT_VERSION_MAJOR EQUAL 0)
  set(dccl_compat SameMinorVersion)
else()
  set(dccl_compat SameMajorVersion)
endif()
write_basic_package_version_file(${PROJECT_BINARY_DIR}/DirectCCLConfigVersion.cmake COMPATIBILITY ${dccl_compat})
install(FILES ${PROJECT_BINARY_DIR}/DirectCCLConfig.cmake ${PROJECT_BINARY_DIR}/DirectCCLConfigVersion.cmake
        DESTINATION ${dccl_cmake_dir})

# dccl.pc: the prefix is found from the file's own folder (${pcfiledir}).
# libfabric is private to the shared library: named for static links only
# (Requires.private when pkg-config found it, else Libs.private).
set(dccl_pc_dir ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
foreach(dir LIBDIR INCLUDEDIR)
  if(IS_ABSOLUTE "${CMAKE_INSTALL_${dir}}")
    set(DCCL_PC_${dir} "${CMAKE_INSTALL_${dir}}")
  else()
    set(DCCL_PC_${dir} "\${prefix}/${CMAKE_INSTALL_${dir}}")
  endif()
endforeach()
if(IS_ABSOLUTE "${dccl_pc_dir}")
  set(DCCL_PC_PREFIX "${CMAKE_INSTALL_PREFIX}")
else()
  file(RELATIVE_PATH dccl_pc_up /${dccl_pc_dir} /)
  string(REGEX REPLACE "/$" "" dccl_pc_up "${dccl_pc_up}")
  set(DCCL_PC_PREFIX "\${pcfiledir}/${dccl_pc_up}")
endif()
set(DCCL_PC_LIBS_PRIVATE -pthread)
foreach(lib ${CMAKE_DL_LIBS})
  string(APPEND DCCL_PC_LIBS_PRIVATE " -l${lib}")
endforeach()
if(FABRIC_FOUND)
  set(DCCL_PC_REQUIRES_PRIVATE libfabric)
else()
  set(DCCL_PC_REQUIRES_PRIVATE "")
  string(APPEND DCCL_PC_LIBS_PRIVATE " ${FABRIC_LIBRARY}")
endif()
configure_file(${PROJECT_SOURCE_DIR}/cmake/dccl.pc.in ${PROJECT_BINARY_DIR}/dccl.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/dccl.pc DESTINATION ${dccl_pc_dir})
