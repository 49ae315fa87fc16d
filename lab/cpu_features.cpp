// cpu_features.cpp: cpuid and xgetbv on x86-64, /proc/cpuinfo's model name elsewhere (see cpu_features.hpp).
#include "lab/cpu_features.hpp"

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <thread>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#define DTLAB_X86 1
#endif

namespace dtlab {
namespace {

std::string trimmed(const std::string& s) {
  const auto first = s.find_first_not_of(" \t");
  if (first == std::string::npos) return "";
  return s.substr(first, s.find_last_not_of(" \t") - first + 1);
}

std::string model_from_proc_cpuinfo() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("model name", 0) == 0 && line.find(':') != std::string::npos)
      return trimmed(line.substr(line.find(':') + 1));
  return "";
}

#ifdef DTLAB_X86
bool bit(unsigned value, int index) { return ((value >> index) & 1U) != 0; }

// The brand string of leaves 0x80000002..4 (48 characters, NUL-padded); "" when the CPU has none.
std::string brand_string() {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (__get_cpuid(0x80000000U, &eax, &ebx, &ecx, &edx) == 0 || eax < 0x80000004U) return "";
  char brand[49] = {0};
  for (unsigned leaf = 0; leaf < 3; ++leaf) {
    unsigned regs[4] = {0, 0, 0, 0};
    __get_cpuid(0x80000002U + leaf, &regs[0], &regs[1], &regs[2], &regs[3]);
    std::memcpy(brand + 16 * leaf, regs, sizeof regs);
  }
  return trimmed(brand);
}

// XCR0: which register states the operating system saves on a context switch (0 when OSXSAVE is off).
std::uint64_t xcr0() {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (__get_cpuid(1, &eax, &ebx, &ecx, &edx) == 0 || !bit(ecx, 27)) return 0;  // OSXSAVE
  unsigned lo = 0, hi = 0;
  __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
  return (static_cast<std::uint64_t>(hi) << 32) | lo;
}
#endif

}  // namespace

std::string CpuFeatures::bf16_summary() const {
  std::string flags = avx512_bf16 && amx_bf16 ? "AVX-512 BF16 and AMX-BF16"
                      : avx512_bf16           ? "AVX-512 BF16"
                      : amx_bf16              ? "AMX-BF16"
                                              : "";
  if (native_bf16())
    return model + " has native bf16 (" + flags +
           ", from cpuid): bf16 matrix multiplies have instructions of their own and can beat fp32.";
  if (!flags.empty())
    return model + " has " + flags + " (cpuid), but " + kernels_capped_by +
           " keeps oneDNN from them: bf16 matrix multiplies run as on a CPU without native bf16, so bf16 saves memory "
           "and bytes but costs time.";
  return model + " has no native bf16 (cpuid: no AVX-512 BF16, no AMX" + (avx512f ? "; AVX-512F" : "") +
         (avx2 ? (avx512f ? ", AVX2" : "; AVX2") : "") +
         "): bf16 matrix multiplies are converted to fp32 and back, so bf16 saves memory and bytes but costs time.";
}

std::string bf16_cap_of_isa_setting(const std::string& name, const char* value) {
  if (value == nullptr) return "";
  std::string isa = value;
  std::transform(isa.begin(), isa.end(), isa.begin(),
                 [](unsigned char c) { return static_cast<char>(std::toupper(c)); });
  // oneDNN's names for the instruction sets below AVX512_CORE_BF16, the first with bf16 dot products.
  static const char* const below_bf16[] = {"SSE41",           "AVX", "AVX2", "AVX2_VNNI", "AVX2_VNNI_2", "AVX512_CORE",
                                           "AVX512_CORE_VNNI"};
  for (const char* level : below_bf16)
    if (isa == level) return name + "=" + value;
  return "";
}

CpuFeatures cpu_features() {
  CpuFeatures cpu;
  cpu.cores = std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
#ifdef DTLAB_X86
  cpu.model = brand_string();
  const std::uint64_t os = xcr0();
  const bool os_avx = (os & 0x6U) == 0x6U;                 // XMM and YMM state
  const bool os_avx512 = os_avx && (os & 0xE0U) == 0xE0U;  // opmask, ZMM_Hi256, Hi16_ZMM
  const bool os_amx = (os & 0x60000U) == 0x60000U;         // XTILECFG, XTILEDATA
  unsigned max_leaf = 0, ebx = 0, ecx = 0, edx = 0;
  __get_cpuid(0, &max_leaf, &ebx, &ecx, &edx);
  if (max_leaf >= 7) {
    unsigned eax7 = 0, ebx7 = 0, ecx7 = 0, edx7 = 0;
    __cpuid_count(7, 0, eax7, ebx7, ecx7, edx7);
    cpu.avx2 = os_avx && bit(ebx7, 5);
    cpu.avx512f = os_avx512 && bit(ebx7, 16);
    cpu.amx_bf16 = os_amx && bit(edx7, 22);
    if (eax7 >= 1) {  // sub-leaf 1 exists
      unsigned eax71 = 0, ebx71 = 0, ecx71 = 0, edx71 = 0;
      __cpuid_count(7, 1, eax71, ebx71, ecx71, edx71);
      cpu.avx512_bf16 = cpu.avx512f && bit(eax71, 5);
    }
  }
#endif
  for (const char* name : {"ONEDNN_MAX_CPU_ISA", "DNNL_MAX_CPU_ISA"})
    if (cpu.kernels_capped_by.empty()) cpu.kernels_capped_by = bf16_cap_of_isa_setting(name, std::getenv(name));
  if (cpu.model.empty()) cpu.model = model_from_proc_cpuinfo();
  if (cpu.model.empty()) cpu.model = "unknown CPU";
  return cpu;
}

nlohmann::json to_json(const CpuFeatures& cpu) {
  return {{"model", cpu.model},
          {"cores", cpu.cores},
          {"avx2", cpu.avx2},
          {"avx512f", cpu.avx512f},
          {"avx512_bf16", cpu.avx512_bf16},
          {"amx_bf16", cpu.amx_bf16},
          {"kernels_capped_by", cpu.kernels_capped_by},
          {"native_bf16", cpu.native_bf16()}};
}

}  // namespace dtlab
