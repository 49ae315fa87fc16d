// cpu_features_test.cpp: cpuid's answers against the kernel's (/proc/cpuinfo flags), and what the lab says of them.
#include "lab/cpu_features.hpp"

#include <cstdlib>
#include <fstream>
#include <set>
#include <sstream>
#include <string>

#include <gtest/gtest.h>

namespace dtlab {
namespace {

// The `flags` line of the first processor in /proc/cpuinfo (the kernel's reading of cpuid and XCR0).
std::set<std::string> kernel_cpu_flags() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  std::set<std::string> flags;
  while (std::getline(in, line)) {
    if (line.rfind("flags", 0) != 0 || line.find(':') == std::string::npos) continue;
    std::istringstream words(line.substr(line.find(':') + 1));
    for (std::string w; words >> w;) flags.insert(w);
    break;
  }
  return flags;
}

TEST(CpuFeatures, AgreeWithTheKernelsFlags) {
  const std::set<std::string> flags = kernel_cpu_flags();
  if (flags.empty()) GTEST_SKIP() << "/proc/cpuinfo has no flags line (not an x86 Linux machine)";
  const CpuFeatures cpu = cpu_features();
  EXPECT_EQ(cpu.avx2, flags.count("avx2") == 1);
  EXPECT_EQ(cpu.avx512f, flags.count("avx512f") == 1);
  EXPECT_EQ(cpu.avx512_bf16, flags.count("avx512_bf16") == 1);
  EXPECT_EQ(cpu.amx_bf16, flags.count("amx_bf16") == 1);
  EXPECT_FALSE(cpu.model.empty());
  EXPECT_GE(cpu.cores, 1);
  std::cout << "this CPU: " << cpu.bf16_summary() << "\n";
}

TEST(CpuFeatures, TheBf16SentenceSaysWhichWayTheTimeGoes) {
  CpuFeatures avx2_only;
  avx2_only.model = "Some CPU";
  avx2_only.avx2 = true;
  EXPECT_FALSE(avx2_only.native_bf16());
  EXPECT_NE(avx2_only.bf16_summary().find("no native bf16"), std::string::npos) << avx2_only.bf16_summary();
  EXPECT_NE(avx2_only.bf16_summary().find("costs time"), std::string::npos) << avx2_only.bf16_summary();

  CpuFeatures with_bf16 = avx2_only;
  with_bf16.avx512f = with_bf16.avx512_bf16 = true;
  EXPECT_TRUE(with_bf16.native_bf16());
  EXPECT_NE(with_bf16.bf16_summary().find("AVX-512 BF16"), std::string::npos) << with_bf16.bf16_summary();
  EXPECT_EQ(with_bf16.bf16_summary().find("no native"), std::string::npos) << with_bf16.bf16_summary();

  const nlohmann::json j = to_json(with_bf16);
  EXPECT_EQ(j.at("model"), "Some CPU");
  EXPECT_TRUE(j.at("native_bf16").get<bool>());
  EXPECT_FALSE(j.at("amx_bf16").get<bool>());
}

// oneDNN's max-ISA setting below AVX512_CORE_BF16 keeps the kernels from bf16 instructions the CPU has: the lab then
// says bf16 is not native, and names the setting. At AVX512_CORE_BF16 and above, or unset, nothing is capped.
TEST(CpuFeatures, AnIsaCapBelowBf16MeansNoNativeBf16) {
  EXPECT_EQ(bf16_cap_of_isa_setting("ONEDNN_MAX_CPU_ISA", "AVX2"), "ONEDNN_MAX_CPU_ISA=AVX2");
  EXPECT_EQ(bf16_cap_of_isa_setting("DNNL_MAX_CPU_ISA", "avx512_core_vnni"), "DNNL_MAX_CPU_ISA=avx512_core_vnni");
  for (const char* allows : {"AVX512_CORE_BF16", "avx512_core_amx", "ALL", "DEFAULT", ""})
    EXPECT_EQ(bf16_cap_of_isa_setting("ONEDNN_MAX_CPU_ISA", allows), "") << allows;
  EXPECT_EQ(bf16_cap_of_isa_setting("ONEDNN_MAX_CPU_ISA", nullptr), "");

  CpuFeatures capped;
  capped.model = "Some CPU";
  capped.avx2 = capped.avx512f = capped.amx_bf16 = true;
  capped.kernels_capped_by = "ONEDNN_MAX_CPU_ISA=AVX2";
  EXPECT_FALSE(capped.native_bf16());
  EXPECT_NE(capped.bf16_summary().find("has AMX-BF16 (cpuid), but ONEDNN_MAX_CPU_ISA=AVX2 keeps oneDNN from them"),
            std::string::npos)
      << capped.bf16_summary();
  EXPECT_EQ(to_json(capped).at("kernels_capped_by"), "ONEDNN_MAX_CPU_ISA=AVX2");
  EXPECT_FALSE(to_json(capped).at("native_bf16").get<bool>());

  // cpu_features() reads the setting from this process's environment (restored after).
  const char* before = std::getenv("ONEDNN_MAX_CPU_ISA");
  const std::string saved = before ? before : "";
  ::setenv("ONEDNN_MAX_CPU_ISA", "avx2", 1);
  const CpuFeatures here = cpu_features();
  if (before)
    ::setenv("ONEDNN_MAX_CPU_ISA", saved.c_str(), 1);
  else
    ::unsetenv("ONEDNN_MAX_CPU_ISA");
  EXPECT_EQ(here.kernels_capped_by, "ONEDNN_MAX_CPU_ISA=avx2");
  EXPECT_FALSE(here.native_bf16());
}

}  // namespace
}  // namespace dtlab
