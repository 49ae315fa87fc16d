# DtlabInstall.cmake: what `cmake --install` puts under the prefix (included by the top-level CMakeLists.txt once
# every installed target exists).
#   bin/dtlab, bin/scenario_*       full configuration only (they link LibTorch, found through their RPATH in the
#                                   venv's torch/lib); dtlab-report (torch-free) in every configuration
#   lib/libdtlab_*.a                the torch-free libraries, exported as dtlab::<target> (below)
#   include/{lab,strategies,analysis}/...   their headers, at the paths the code includes them by ("lab/config.hpp")
#   lib/cmake/dtlab/                dtlabConfig.cmake (find_dependency on nlohmann_json, yaml-cpp, ZLIB),
#                                   dtlabConfigVersion.cmake, dtlabTargets*.cmake
#   share/dtlab/scenarios/configs/, share/dtlab/analysis/profiles/   the configs and machine profiles, under the
#                                   paths the docs and --help name them by: `cd <prefix>/share/dtlab` and the
#                                   commands read as written. dtlab reads no file it is not given on the command line.
# The LibTorch libraries (dtlab_lab, dtlab_strategies, dtlab_tools, ...) are not installed: outside projects get the
# config, the catalogue, the cost models and the results loader, which build without LibTorch.
# tests/packaging/ installs this into a temporary prefix and builds tests/packaging/consumer/ against it.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

set(DTLAB_EXPORTED_LIBRARIES dtlab_stats dtlab_mesh dtlab_process dtlab_core dtlab_launch dtlab_catalog dtlab_cost_plans
    dtlab_analysis dtlab_cost_models)
foreach(library IN LISTS DTLAB_EXPORTED_LIBRARIES)
  target_compile_features(${library} INTERFACE cxx_std_20)  # the headers need C++20 (std::span, ...): consumers too
endforeach()
install(TARGETS ${DTLAB_EXPORTED_LIBRARIES} EXPORT dtlabTargets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR})  # include dir: each target's $<INSTALL_INTERFACE:...>
install(TARGETS dtlab-report RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
if(NOT DTLAB_ANALYSIS_ONLY)
  install(TARGETS dtlab ${DTLAB_SCENARIO_PROGRAMS} RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
endif()

# The headers of the libraries above: every analysis/ header (analysis never includes torch), and the torch-free
# headers of lab/ and strategies/ that their sources include. tests/packaging checks that every header a source of
# DTLAB_EXPORTED_LIBRARIES includes (but *_internal.hpp) is installed, that each installed header's includes are
# installed too, and that none reaches torch.
install(DIRECTORY ${PROJECT_SOURCE_DIR}/analysis/ DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/analysis
        FILES_MATCHING PATTERN "*.hpp" PATTERN "profiles" EXCLUDE)
foreach(header
    lab/config.hpp lab/model_shape.hpp lab/cpu_features.hpp lab/dtype.hpp lab/link_rate.hpp lab/unit_layout.hpp
    lab/node_layout.hpp lab/mesh.hpp lab/pipeline_schedule.hpp lab/pipeline_split.hpp
    lab/results_schema.hpp lab/stats.hpp lab/process.hpp lab/launch.hpp lab/launch/cluster.hpp
    lab/instrument/trace.hpp lab/instrument/tensorboard.hpp lab/instrument/clock.hpp
    lab/atomic_file.hpp lab/checkpoint/safetensors.hpp lab/checkpoint/store.hpp lab/checkpoint/chunk.hpp
    strategies/spec.hpp strategies/catalog.hpp strategies/cost_plan.hpp strategies/ddp_buckets.hpp
    strategies/schedule_kit.hpp strategies/sharded_plan.hpp strategies/sharded/sharding.hpp
    strategies/tensor_parallel_cost.hpp strategies/pipeline_cost.hpp)
  get_filename_component(header_dir ${header} DIRECTORY)
  install(FILES ${PROJECT_SOURCE_DIR}/${header} DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/${header_dir})
endforeach()

set(DTLAB_DATA_DIR ${CMAKE_INSTALL_DATADIR}/dtlab)
# The scenario programs read their study spec and run configs from here when installed (scenarios/runner.cpp).
install(DIRECTORY ${PROJECT_SOURCE_DIR}/scenarios/configs/ DESTINATION ${DTLAB_DATA_DIR}/scenarios/configs)
install(DIRECTORY ${PROJECT_SOURCE_DIR}/scenarios/studies/ DESTINATION ${DTLAB_DATA_DIR}/scenarios/studies)
install(DIRECTORY ${PROJECT_SOURCE_DIR}/analysis/profiles/ DESTINATION ${DTLAB_DATA_DIR}/analysis/profiles)

# The CMake package: find_package(dtlab) then target_link_libraries(app PRIVATE dtlab::dtlab_cost_models).
set(DTLAB_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/dtlab)
install(EXPORT dtlabTargets NAMESPACE dtlab:: DESTINATION ${DTLAB_CMAKE_DIR})
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/dtlabConfig.cmake.in
                              ${PROJECT_BINARY_DIR}/dtlabConfig.cmake
                              INSTALL_DESTINATION ${DTLAB_CMAKE_DIR} PATH_VARS DTLAB_DATA_DIR)
# 0.x: the interfaces still move between minor versions, so only the same minor version is compatible.
write_basic_package_version_file(${PROJECT_BINARY_DIR}/dtlabConfigVersion.cmake COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/dtlabConfig.cmake ${PROJECT_BINARY_DIR}/dtlabConfigVersion.cmake
        DESTINATION ${DTLAB_CMAKE_DIR})
