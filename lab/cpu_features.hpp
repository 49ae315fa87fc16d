// cpu_features.hpp: what this machine's CPU can do that changes the lab's timings, read from cpuid (torch-free).
//
//   const CpuFeatures cpu = cpu_features();
//   if (!cpu.native_bf16()) std::cout << cpu.bf16_summary() << "\n";   // "no native bf16 ...: bf16 matmuls ..."
//
// Machines of one kind differ: some have AVX-512 with BF16 (or AMX), some only AVX2. Whether bf16 matrix multiplies
// run natively or are converted to fp32 flips the time result of every mixed-precision run, so result.json records
// these facts (context.cpu) and the report states them beside bf16 timings. A flag counts only when the CPU has it
// and the operating system saves the registers it needs (XCR0, read with xgetbv); on a CPU that is not x86-64 every
// flag is false and the model name comes from /proc/cpuinfo. An environment that caps oneDNN's instruction set below
// the bf16 ones (ONEDNN_MAX_CPU_ISA=AVX2, as the CI's AVX2 pass sets it to stand in for an AVX2-only machine) keeps
// the kernels from them: native_bf16() is then false, and kernels_capped_by names the setting.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

namespace dtlab {

struct CpuFeatures {
  std::string model;  // the brand string, e.g. "AMD EPYC 9R14 96-Core Processor"; "unknown CPU" when not readable
  int cores = 1;      // logical CPUs this process may use (std::thread::hardware_concurrency)
  bool avx2 = false;
  bool avx512f = false;
  bool avx512_bf16 = false;  // AVX512_BF16: vdpbf16ps, bf16 dot products at the AVX-512 width
  bool amx_bf16 = false;     // AMX-BF16: tile matrix multiplies in bf16 (Sapphire Rapids and later)
  // "ONEDNN_MAX_CPU_ISA=AVX2" when the environment keeps oneDNN below the bf16 instructions; "" when nothing does.
  std::string kernels_capped_by;
  // bf16 matrix multiplies have instructions of their own and oneDNN may use them; without, they run by converting to
  // fp32.
  bool native_bf16() const { return (avx512_bf16 || amx_bf16) && kernels_capped_by.empty(); }
  // One sentence for people: the model and what it means for bf16 step times.
  std::string bf16_summary() const;
};

// This machine's CPU (cpuid once per call; cheap), and the cap of ONEDNN_MAX_CPU_ISA (or its old name
// DNNL_MAX_CPU_ISA) in this process's environment.
CpuFeatures cpu_features();

// "NAME=VALUE" when oneDNN's max-ISA setting `value` (case-insensitive, as oneDNN reads it) stops below AVX-512 BF16
// (SSE41 .. AVX512_CORE_VNNI); "" when it allows bf16 (AVX512_CORE_BF16 and above, ALL, DEFAULT) or is unset/empty.
std::string bf16_cap_of_isa_setting(const std::string& name, const char* value);

// {model, cores, avx2, avx512f, avx512_bf16, amx_bf16, kernels_capped_by, native_bf16}: result.json context.cpu.
nlohmann::json to_json(const CpuFeatures& cpu);

}  // namespace dtlab
