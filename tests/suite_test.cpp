// suite_test.cpp: the test suite's own rule about the GPU (tests/CMakeLists.txt). Every test runs with the GPU hidden
// (CUDA_VISIBLE_DEVICES empty) except the GPU cases: gpu_tests and the unit cases of DTLAB_GPU_UNIT_CASES. Read from
// ctest's own listing of this build (ctest --show-only=json-v1), so a test registered without the rule is named here.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "lab/process.hpp"

namespace {

bool hides_the_gpu(const nlohmann::json& test) {
  for (const auto& property : test.value("properties", nlohmann::json::array())) {
    if (property.value("name", "") != "ENVIRONMENT") continue;
    for (const auto& entry : property["value"])
      if (entry == "CUDA_VISIBLE_DEVICES=") return true;
  }
  return false;
}

// A gtest filter's positive patterns ("A.b:C.*") as one regex.
std::regex filter_regex(const std::string& filter) {
  std::string pattern;
  std::istringstream parts(filter);
  for (std::string part; std::getline(parts, part, ':');) {
    if (!pattern.empty()) pattern += "|";
    for (const char c : part)
      pattern += c == '*' ? std::string(".*") : c == '.' ? std::string("\\.") : std::string(1, c);
  }
  return std::regex(pattern);
}

std::string program_of(const nlohmann::json& test) {
  if (!test.contains("command") || test["command"].empty()) return "";
  const std::string path = test["command"][0];
  return path.substr(path.find_last_of('/') + 1);
}

TEST(Suite, CpuTestsSeeNoGpu) {
  const std::string command = CTEST_COMMAND " --test-dir " DTLAB_BINARY_DIR " --show-only=json-v1";
  const dtlab::ProcessResult listing = dtlab::run_process(
      {.argv = {CTEST_COMMAND, "--test-dir", DTLAB_BINARY_DIR, "--show-only=json-v1"}}, /*capture_output=*/true);
  ASSERT_EQ(listing.exit_code, 0) << command << " failed (exit code " << listing.exit_code << "):\n"
                                  << listing.output.substr(0, 400);
  const nlohmann::json parsed = nlohmann::json::parse(listing.output, nullptr, false);
  ASSERT_TRUE(parsed.is_object()) << command << " printed no JSON object:\n" << listing.output.substr(0, 400);
  const nlohmann::json tests = parsed.value("tests", nlohmann::json::array());
  ASSERT_GT(tests.size(), 10U) << "ctest listed no tests of " << DTLAB_BINARY_DIR;

  const std::regex gpu_unit_case = filter_regex(GPU_UNIT_CASES);
  std::vector<std::string> sees_gpu_wrongly, gpu_case_hidden;
  size_t gpu_cases = 0;
  for (const auto& test : tests) {
    const std::string name = test.value("name", "");
    const std::string program = program_of(test);
    const bool gpu_case = program == "gpu_tests" || (program == "unit_tests" && std::regex_match(name, gpu_unit_case));
    gpu_cases += gpu_case ? 1 : 0;
    if (gpu_case && hides_the_gpu(test)) gpu_case_hidden.push_back(name);
    if (!gpu_case && !hides_the_gpu(test)) sees_gpu_wrongly.push_back(name);
  }
  std::string wrong;
  for (const auto& name : sees_gpu_wrongly) wrong += "\n  " + name;
  EXPECT_TRUE(sees_gpu_wrongly.empty()) << sees_gpu_wrongly.size()
                                        << " CPU test(s) would see a GPU: append ${DTLAB_CPU_ONLY} to their properties "
                                        << "(tests/CMakeLists.txt), or list them as GPU cases:" << wrong;
  std::string hidden;
  for (const auto& name : gpu_case_hidden) hidden += "\n  " + name;
  EXPECT_TRUE(gpu_case_hidden.empty()) << "GPU case(s) that would never see a GPU:" << hidden;
  if (gpu_cases == 0) GTEST_SKIP() << "this configuration builds no GPU cases (no gpu_tests or unit_tests)";
}

}  // namespace
