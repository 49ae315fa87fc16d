// nvtx_recorder.cpp: an NVTX tool for tests (cuda configuration). NVTX loads the library named by
// NVTX_INJECTION64_PATH at a process's first NVTX call, as Nsight Systems' own injection is loaded; this one appends
// the name of every range pushed with nvtxRangePushA to the file named by DTLAB_NVTX_LOG, one per line. NVTX needs no
// GPU, so gpu_tests' Nvtx case runs on any machine with a cuda build.
#include <cstdio>
#include <cstdlib>
#include <mutex>

#include <nvtx3/nvToolsExt.h>

namespace {

std::mutex log_mutex;

std::FILE* log_file() {
  static std::FILE* file = [] {
    const char* path = std::getenv("DTLAB_NVTX_LOG");
    return path ? std::fopen(path, "a") : nullptr;
  }();
  return file;
}

int NVTX_API record_push(const char* message) {
  std::lock_guard<std::mutex> lock(log_mutex);
  if (std::FILE* file = log_file()) {
    std::fprintf(file, "%s\n", message ? message : "");
    std::fflush(file);
  }
  return 0;
}

int NVTX_API record_pop() { return 0; }

}  // namespace

// NVTX's entry point for a tool: fill in the core module's push and pop. Returns 1 when attached.
extern "C" __attribute__((visibility("default"))) int InitializeInjectionNvtx2(NvtxGetExportTableFunc_t get_table) {
  const auto* callbacks = static_cast<const NvtxExportTableCallbacks*>(get_table(NVTX_ETID_CALLBACKS));
  if (callbacks == nullptr) return 0;
  NvtxFunctionTable table = nullptr;
  unsigned int size = 0;
  if (callbacks->GetModuleFunctionTable(NVTX_CB_MODULE_CORE, &table, &size) == 0 || size <= NVTX_CBID_CORE_RangePop)
    return 0;
  *table[NVTX_CBID_CORE_RangePushA] = reinterpret_cast<NvtxFunctionPointer>(&record_push);
  *table[NVTX_CBID_CORE_RangePop] = reinterpret_cast<NvtxFunctionPointer>(&record_pop);
  return 1;
}
