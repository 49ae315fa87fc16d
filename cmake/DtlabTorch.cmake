# DtlabTorch.cmake: LibTorch from the PyPI wheel in dtlab's cached venv, as explicit imported targets.
#
# We do not call find_package(Torch): the wheel's TorchConfig pulls in the CUDA toolchain and links
# torch_cuda into everything. Instead:
#   dtlab::torch_cpu  -> libtorch_cpu.so + libc10.so (+ headers, ABI and c10d defines)
#   dtlab::torch_cuda -> adds libtorch_cuda.so + libc10_cuda.so and USE_C10D_NCCL (cuda config only)
# Inputs: DTLAB_TORCH_ROOT (site-packages/torch); default from DTLAB_CACHE or ~/.cache/dtlab/venv.

set(_dtlab_cache "$ENV{DTLAB_CACHE}")
if(NOT _dtlab_cache)
  set(_dtlab_cache "$ENV{HOME}/.cache/dtlab")
endif()
if(NOT DTLAB_TORCH_ROOT)
  file(GLOB _torch_roots "${_dtlab_cache}/venv/lib/python3*/site-packages/torch")
  list(GET _torch_roots 0 _first_root)
  set(DTLAB_TORCH_ROOT "${_first_root}" CACHE PATH "site-packages/torch of the torch==2.11.0 wheel")
endif()
if(NOT EXISTS "${DTLAB_TORCH_ROOT}/lib/libtorch_cpu.so")
  message(FATAL_ERROR "LibTorch not found at DTLAB_TORCH_ROOT='${DTLAB_TORCH_ROOT}' "
                      "(expected lib/libtorch_cpu.so). Run `make setup` first.")
endif()

file(READ "${DTLAB_TORCH_ROOT}/version.py" _torch_version_py)
string(REGEX MATCH "__version__ = '([0-9.]+)" _m "${_torch_version_py}")
set(DTLAB_TORCH_VERSION "${CMAKE_MATCH_1}")
if(NOT DTLAB_TORCH_VERSION VERSION_EQUAL 2.11.0)
  message(FATAL_ERROR "dtlab needs torch 2.11.0; ${DTLAB_TORCH_ROOT} has '${DTLAB_TORCH_VERSION}'. Run `make setup`.")
endif()
set(DTLAB_TORCH_LIB_DIR "${DTLAB_TORCH_ROOT}/lib")

add_library(dtlab_torch_cpu INTERFACE)
target_include_directories(dtlab_torch_cpu SYSTEM INTERFACE
  "${DTLAB_TORCH_ROOT}/include" "${DTLAB_TORCH_ROOT}/include/torch/csrc/api/include")
target_compile_definitions(dtlab_torch_cpu INTERFACE
  _GLIBCXX_USE_CXX11_ABI=1 USE_DISTRIBUTED USE_C10D_GLOO)
target_link_libraries(dtlab_torch_cpu INTERFACE
  "${DTLAB_TORCH_LIB_DIR}/libtorch_cpu.so" "${DTLAB_TORCH_LIB_DIR}/libc10.so")
add_library(dtlab::torch_cpu ALIAS dtlab_torch_cpu)

if(DTLAB_CUDA)
  add_library(dtlab_torch_cuda INTERFACE)
  target_link_libraries(dtlab_torch_cuda INTERFACE dtlab_torch_cpu
    "${DTLAB_TORCH_LIB_DIR}/libtorch_cuda.so" "${DTLAB_TORCH_LIB_DIR}/libc10_cuda.so" CUDA::cudart)
  target_compile_definitions(dtlab_torch_cuda INTERFACE USE_C10D_NCCL DTLAB_WITH_CUDA=1)
  add_library(dtlab::torch_cuda ALIAS dtlab_torch_cuda)
endif()

# Binaries find libtorch through their RPATH (no LD_LIBRARY_PATH needed).
set(CMAKE_BUILD_RPATH "${DTLAB_TORCH_LIB_DIR}")
set(CMAKE_INSTALL_RPATH "${DTLAB_TORCH_LIB_DIR}")
