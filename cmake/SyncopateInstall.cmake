# Installs libsyncopate.so (ops/) as a library of the field: the shared library (SONAME
# libsyncopate.so.0), its public headers (syncopate/ops.h, syncopate/syncopate_ops.h and the
# syncopate/status.h they share with the client), a CMake package (find_package(Syncopate) gives
# Syncopate::syncopate) and a pkg-config file (syncopate.pc). Both carry the CUDA toolkit's include
# directory, as ops.h includes <cuda.h>; neither links libcuda, which the library loads at run
# time. tests/install/run_consumer_test.sh installs the build and compiles a consumer against both.
if(NOT TARGET syncopate_shared)
  return()
endif()

include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

set(SYNCOPATE_CMAKE_INSTALL_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/Syncopate)

# Consumers see Syncopate::syncopate, not the build's target name.
set_target_properties(syncopate_shared PROPERTIES EXPORT_NAME syncopate)
# The static libraries linked into it are PRIVATE to a shared library, so the export needs none
# of them.
install(TARGETS syncopate_shared EXPORT SyncopateTargets
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
install(FILES ${PROJECT_SOURCE_DIR}/ops/include/syncopate/ops.h
              ${PROJECT_SOURCE_DIR}/ops/include/syncopate/syncopate_ops.h
        DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/syncopate)
# client/ installs its include/syncopate/ (status.h among it) only where the client is built.
if(NOT TARGET syncopate_client)
  install(FILES ${PROJECT_SOURCE_DIR}/client/include/syncopate/status.h
          DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/syncopate)
endif()

install(EXPORT SyncopateTargets NAMESPACE Syncopate:: FILE SyncopateTargets.cmake
        DESTINATION ${SYNCOPATE_CMAKE_INSTALL_DIR})
configure_package_config_file(${CMAKE_CURRENT_LIST_DIR}/SyncopateConfig.cmake.in
  ${PROJECT_BINARY_DIR}/cmake/SyncopateConfig.cmake
  INSTALL_DESTINATION ${SYNCOPATE_CMAKE_INSTALL_DIR})
write_basic_package_version_file(${PROJECT_BINARY_DIR}/cmake/SyncopateConfigVersion.cmake
  VERSION ${PROJECT_VERSION} COMPATIBILITY SameMajorVersion)
install(FILES ${PROJECT_BINARY_DIR}/cmake/SyncopateConfig.cmake
              ${PROJECT_BINARY_DIR}/cmake/SyncopateConfigVersion.cmake
        DESTINATION ${SYNCOPATE_CMAKE_INSTALL_DIR})

# syncopate.pc: everything is filled in now but the prefix, which is the one the install runs
# with (`cmake --install --prefix` differs from CMAKE_INSTALL_PREFIX): the configured file keeps
# @CMAKE_INSTALL_PREFIX@, and the install step substitutes it.
set(SYNCOPATE_PC_PREFIX "@CMAKE_INSTALL_PREFIX@")
foreach(dir LIBDIR INCLUDEDIR)
  if(IS_ABSOLUTE "${CMAKE_INSTALL_${dir}}")
    set(SYNCOPATE_PC_${dir} "${CMAKE_INSTALL_${dir}}")
  else()
    set(SYNCOPATE_PC_${dir} "\${prefix}/${CMAKE_INSTALL_${dir}}")
  endif()
endforeach()
set(SYNCOPATE_PC_CUDA_CFLAGS "")
foreach(dir IN LISTS CUDAToolkit_INCLUDE_DIRS)
  string(APPEND SYNCOPATE_PC_CUDA_CFLAGS " -I${dir}")
endforeach()
configure_file(${CMAKE_CURRENT_LIST_DIR}/syncopate.pc.in
  ${PROJECT_BINARY_DIR}/cmake/syncopate.pc.configured @ONLY)
install(CODE "configure_file(\"${PROJECT_BINARY_DIR}/cmake/syncopate.pc.configured\"
                             \"${PROJECT_BINARY_DIR}/cmake/syncopate.pc\" @ONLY)")
install(FILES ${PROJECT_BINARY_DIR}/cmake/syncopate.pc
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)

# The syncopate Python package (ops/python) beside the library, so that
# PYTHONPATH=<prefix>/<libdir>/python3/site-packages finds both with nothing else installed
# (`pip install ops/python` is the other way; the package looks for the library next to itself).
install(DIRECTORY ${PROJECT_SOURCE_DIR}/ops/python/syncopate
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/python3/site-packages
        PATTERN __pycache__ EXCLUDE)
