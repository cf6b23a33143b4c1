# libnccl-net-dccl.so: NCCL's network plugin on DirectCCL's transport
# (src/plugin/nccl/, docs/nccl-plugin.md). NCCL loads it when NCCL_NET_PLUGIN=dccl.
# It carries the layers it uses (from dccl_internal, built with hidden
# visibility) and exports only the tables ncclNetPlugin_v7 .. v11
# (cmake/nccl_plugin.map), so it does not depend on libdccl.so.
file(GLOB DCCL_PLUGIN_SOURCES CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/src/plugin/nccl/*.cc)
add_library(nccl-net-dccl SHARED ${DCCL_PLUGIN_SOURCES})
target_compile_options(nccl-net-dccl PRIVATE ${DCCL_WARN} ${DCCL_ARCH_OPTIONS})
target_link_libraries(nccl-net-dccl PRIVATE dccl_internal)
set(dccl_plugin_map ${PROJECT_SOURCE_DIR}/cmake/nccl_plugin.map)
target_link_options(nccl-net-dccl PRIVATE LINKER:--version-script=${dccl_plugin_map})
set_target_properties(nccl-net-dccl PROPERTIES C_VISIBILITY_PRESET hidden CXX_VISIBILITY_PRESET hidden
                                               VISIBILITY_INLINES_HIDDEN ON LINK_DEPENDS ${dccl_plugin_map}
                                               INSTALL_RPATH_USE_LINK_PATH ON)
