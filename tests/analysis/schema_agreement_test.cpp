// schema_agreement_test.cpp: analysis/schema.hpp (analysis' own copy) must agree with lab/results_schema.hpp
// (the owner). This is the one analysis file allowed to include lab/: that header is torch-free.
//
// EveryKeyAgrees compares the constants the compiler sees; EveryLabKeyHasACopy reads the lab header's text so a
// key the lab adds later fails here until analysis/schema.hpp (and the list below) gains it too.
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <regex>
#include <sstream>
#include <string>

#include "analysis/schema.hpp"
#include "lab/results_schema.hpp"

namespace {

namespace lab = dtlab::schema;
namespace ana = dtlab::analysis::schema;

TEST(SchemaAgreement, VersionAgrees) { EXPECT_EQ(lab::kVersion, ana::kVersion); }

TEST(SchemaAgreement, EveryKeyAgrees) {
#define DTLAB_EXPECT_SAME_KEY(name) \
  EXPECT_EQ(std::string(lab::name), std::string(ana::name)) << "constant " #name " differs between the headers"
  DTLAB_EXPECT_SAME_KEY(kSchemaVersion);
  DTLAB_EXPECT_SAME_KEY(kContext);
  DTLAB_EXPECT_SAME_KEY(kConfig);
  DTLAB_EXPECT_SAME_KEY(kModel);
  DTLAB_EXPECT_SAME_KEY(kSteps);
  DTLAB_EXPECT_SAME_KEY(kSummary);
  DTLAB_EXPECT_SAME_KEY(kMemory);
  DTLAB_EXPECT_SAME_KEY(kDtlabVersion);
  DTLAB_EXPECT_SAME_KEY(kGitSha);
  DTLAB_EXPECT_SAME_KEY(kTorchVersion);
  DTLAB_EXPECT_SAME_KEY(kHost);
  DTLAB_EXPECT_SAME_KEY(kWorldSize);
  DTLAB_EXPECT_SAME_KEY(kLauncher);
  DTLAB_EXPECT_SAME_KEY(kStartedAt);
  DTLAB_EXPECT_SAME_KEY(kCommand);
  DTLAB_EXPECT_SAME_KEY(kThreads);
  DTLAB_EXPECT_SAME_KEY(kStrategy);
  DTLAB_EXPECT_SAME_KEY(kParams);
  DTLAB_EXPECT_SAME_KEY(kFlopsPerToken);
  DTLAB_EXPECT_SAME_KEY(kPreset);
  DTLAB_EXPECT_SAME_KEY(kStep);
  DTLAB_EXPECT_SAME_KEY(kLoss);
  DTLAB_EXPECT_SAME_KEY(kLr);
  DTLAB_EXPECT_SAME_KEY(kGradNorm);
  DTLAB_EXPECT_SAME_KEY(kStepMs);
  DTLAB_EXPECT_SAME_KEY(kTokensPerS);
  DTLAB_EXPECT_SAME_KEY(kStepMsMedian);
  DTLAB_EXPECT_SAME_KEY(kStepMsMin);
  DTLAB_EXPECT_SAME_KEY(kStepMsMax);
  DTLAB_EXPECT_SAME_KEY(kFinalLoss);
  DTLAB_EXPECT_SAME_KEY(kTflops);
  DTLAB_EXPECT_SAME_KEY(kWallS);
  DTLAB_EXPECT_SAME_KEY(kMeasuredSteps);
#undef DTLAB_EXPECT_SAME_KEY
}

// name -> value for every `inline constexpr const char* kName = "value";` in a header.
std::map<std::string, std::string> string_constants(const std::string& header_path) {
  std::ifstream in(header_path);
  EXPECT_TRUE(in.good()) << "cannot read " << header_path;
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string text = ss.str();
  static const std::regex re(R"re(inline\s+constexpr\s+const\s+char\s*\*\s*(k\w+)\s*=\s*"([^"]*)")re");
  std::map<std::string, std::string> out;
  for (auto it = std::sregex_iterator(text.begin(), text.end(), re); it != std::sregex_iterator(); ++it) {
    out[(*it)[1].str()] = (*it)[2].str();
  }
  return out;
}

TEST(SchemaAgreement, EveryLabKeyHasACopy) {
  const std::string root = DTLAB_SOURCE_DIR;
  const auto lab_keys = string_constants(root + "/lab/results_schema.hpp");
  const auto ana_keys = string_constants(root + "/analysis/schema.hpp");
  ASSERT_GT(lab_keys.size(), 20u) << "the lab header's constants were not found; did its format change?";
  for (const auto& [name, value] : lab_keys) {
    auto it = ana_keys.find(name);
    ASSERT_NE(it, ana_keys.end()) << name << " = \"" << value
                                  << "\" is in lab/results_schema.hpp but missing from analysis/schema.hpp";
    EXPECT_EQ(it->second, value) << name << " differs between lab/results_schema.hpp and analysis/schema.hpp";
  }
}

}  // namespace
