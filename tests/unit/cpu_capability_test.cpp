// cpu_capability_test.cpp: ATen's kernels run at the capability the environment asks for. CI's AVX2 pass
// (ATEN_CPU_CAPABILITY=avx2 ONEDNN_MAX_CPU_ISA=AVX2 MKL_ENABLE_INSTRUCTIONS=AVX2, .ci/run) stands in for an AVX2-only
// machine only if the cap takes: ATen ignores a value it does not know (it wants lower case: "AVX2" is ignored with a
// warning), and on an AVX-512 runner the pass would then rerun the same kernels and prove nothing. oneDNN's cap is
// checked where the lab reads it (context.cpu.kernels_capped_by); MKL's has no query in the LibTorch wheel.
#include <ATen/Version.h>
#include <gtest/gtest.h>

#include <cctype>
#include <cstdlib>
#include <iostream>
#include <string>

#include "lab/cpu_features.hpp"

namespace dtlab {
namespace {

std::string upper(std::string s) {
  for (char& c : s) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return s;
}

// What at::get_cpu_capability() says for an ATEN_CPU_CAPABILITY value ATen accepts: its name in upper case (seen with
// torch 2.11 on x86-64: DEFAULT, AVX2, AVX512).
std::string reported_for(const std::string& asked) { return upper(asked); }

TEST(CpuCapability, AtenDispatchesAtTheCapabilityTheEnvironmentAsksFor) {
  const std::string capability = at::get_cpu_capability();
  const CpuFeatures cpu = cpu_features();
  std::cout << "ATen CPU capability: " << capability << " (ATEN_CPU_CAPABILITY="
            << (std::getenv("ATEN_CPU_CAPABILITY") ? std::getenv("ATEN_CPU_CAPABILITY") : "unset") << "; cpuid: avx2 "
            << cpu.avx2 << ", avx512f " << cpu.avx512f << ")\n";
  if (const char* asked = std::getenv("ATEN_CPU_CAPABILITY"); asked && *asked) {
    EXPECT_EQ(capability, reported_for(asked))
        << "ATEN_CPU_CAPABILITY=" << asked << " did not take: ATen dispatches at " << capability
        << " (it accepts only lower-case default, avx2, avx512)";
    return;
  }
  // Unset: ATen picks from the CPU, never above what it has.
  if (capability == "AVX512") {
    EXPECT_TRUE(cpu.avx512f) << "ATen dispatches AVX-512 kernels on a CPU without AVX-512";
  }
  if (capability == "AVX2") {
    EXPECT_TRUE(cpu.avx2) << "ATen dispatches AVX2 kernels on a CPU without AVX2";
  }
}

TEST(CpuCapability, OneDnnsCapIsTheOneTheLabRecords) {
  const char* isa = std::getenv("ONEDNN_MAX_CPU_ISA");
  const std::string expected = bf16_cap_of_isa_setting("ONEDNN_MAX_CPU_ISA", isa);
  const char* old_name = std::getenv("DNNL_MAX_CPU_ISA");
  const std::string recorded = cpu_features().kernels_capped_by;
  if (!expected.empty()) {
    EXPECT_EQ(recorded, expected) << "ONEDNN_MAX_CPU_ISA=" << isa << " keeps oneDNN below bf16; runs must say so";
    EXPECT_FALSE(cpu_features().native_bf16());
  } else if (!old_name || !*old_name) {
    EXPECT_EQ(recorded, "") << "nothing caps oneDNN here, yet the lab records a cap";
  }
}

}  // namespace
}  // namespace dtlab
