// layers_test.cpp: the layer rules of docs/architecture.md on the include graph. From every source of a target
// (the lists tests/layers/CMakeLists.txt writes at generate time) the project headers it includes are followed;
// torch-free targets must reach no LibTorch header, the runtime no cost-model, report, tool or command code, the
// base floor nothing above it. A control tree shows the scan flags each kind of breach and names the chain.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

namespace {

namespace fs = std::filesystem;

std::vector<std::string> split(const std::string& text, char sep) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string item; std::getline(in, item, sep);)
    if (!item.empty()) out.push_back(item);
  return out;
}

struct Include {
  std::string target;  // as written between the quotes or brackets
  bool system = false;
};

std::vector<Include> includes_of(const fs::path& file) {
  std::vector<Include> out;
  std::ifstream in(file);
  const std::regex include(R"(^\s*#\s*include\s*([<"])([^>"]+)[>"])");
  std::smatch m;
  for (std::string line; std::getline(in, line);)
    if (std::regex_search(line, m, include)) out.push_back({m[2], m[1] == "<"});
  return out;
}

// What a rule forbids: system headers by prefix (torch) and project files by path prefix (relative to the root).
struct Rule {
  std::vector<std::string> system_prefixes;
  std::vector<std::string> project_prefixes;
};

// Breaches of `rule` reachable from `sources` (paths relative to `root`, or absolute), each as
// "source -> header -> ... : what", following quoted includes resolved against the root or the including file's
// folder. Each file is followed once, from the first source that reaches it.
std::vector<std::string> breaches(const fs::path& root, const std::vector<fs::path>& sources, const Rule& rule) {
  std::vector<std::string> found;
  std::set<fs::path> seen;
  std::vector<std::pair<fs::path, std::string>> stack;  // file, chain to it
  auto relative = [&](const fs::path& p) { return fs::relative(p, root).generic_string(); };
  for (const fs::path& source : sources) {
    const fs::path file = fs::weakly_canonical(source.is_absolute() ? source : root / source);
    if (seen.insert(file).second) stack.emplace_back(file, relative(file));
  }
  while (!stack.empty()) {
    const auto [file, chain] = stack.back();
    stack.pop_back();
    for (const Include& inc : includes_of(file)) {
      if (inc.system) {
        for (const std::string& prefix : rule.system_prefixes)
          if (inc.target.rfind(prefix, 0) == 0) found.push_back(chain + ": <" + inc.target + ">");
        continue;
      }
      fs::path next = root / inc.target;
      if (!fs::exists(next)) next = file.parent_path() / inc.target;
      if (!fs::exists(next)) continue;  // a generated or macro-named include
      next = fs::weakly_canonical(next);
      const std::string name = relative(next);
      for (const std::string& prefix : rule.project_prefixes)
        if (name.rfind(prefix, 0) == 0) found.push_back(chain + " -> " + name);
      if (seen.insert(next).second) stack.emplace_back(next, chain + " -> " + name);
    }
  }
  return found;
}

// A target's sources as tests/layers/CMakeLists.txt wrote them (first line: its source folder); empty when the
// target is not part of this configuration.
std::vector<fs::path> target_sources(const std::string& target) {
  std::ifstream in(fs::path(DTLAB_LAYER_SOURCES) / (target + ".txt"));
  std::vector<fs::path> out;
  std::string dir;
  if (!std::getline(in, dir)) return out;
  for (std::string line; std::getline(in, line);)
    if (!line.empty()) out.push_back(fs::path(line).is_absolute() ? fs::path(line) : fs::path(dir) / line);
  return out;
}

const Rule kTorchFree = {{"torch/", "ATen/", "c10/", "gloo/", "cuda", "nccl", "cupti", "nvtx3/"}, {}};
const Rule kRuntime = {{}, {"analysis/", "lab/tools/", "lab/cli/", "scenarios/", "tests/"}};
// The base floor (config, mesh, shapes, checkpoint format, launcher) is included by everything above it and includes
// none of it: the strategies' ids reach config validation as an argument (lab/config.hpp StrategyChoices).
const Rule kBaseFloor = {{},
                         {"strategies/", "analysis/", "scenarios/", "tests/", "kernels/", "lab/train/", "lab/dist/",
                          "lab/comm/", "lab/tools/", "lab/cli/", "lab/model.hpp", "lab/results.hpp"}};

std::string joined(const std::vector<std::string>& lines) {
  std::string out;
  for (const auto& line : lines) out += "  " + line + "\n";
  return out;
}

void expect_rule(const std::string& targets, const Rule& rule, const char* what) {
  int checked = 0;
  for (const std::string& target : split(targets, ',')) {
    const std::vector<fs::path> sources = target_sources(target);
    if (sources.empty()) continue;
    ++checked;
    const auto found = breaches(DTLAB_SOURCE_DIR, sources, rule);
    EXPECT_TRUE(found.empty()) << target << " " << what << ":\n" << joined(found);
  }
  EXPECT_GT(checked, 0) << "no source lists under " << DTLAB_LAYER_SOURCES;
}

TEST(Layers, TorchFreeTargetsIncludeNoTorchHeader) {
  expect_rule(DTLAB_LAYER_TORCH_FREE, kTorchFree, "is torch-free but reaches");
}

TEST(Layers, TheRuntimeIncludesNoCostModelReportToolOrCommand) {
#ifdef DTLAB_ANALYSIS_ONLY
  GTEST_SKIP() << "-DDTLAB_ANALYSIS_ONLY=ON configures no runtime target; a full configuration checks this rule";
#endif
  expect_rule(DTLAB_LAYER_RUNTIME, kRuntime, "is the runtime but reaches");
}

TEST(Layers, TheBaseFloorIncludesNoCatalogueStrategyCostModelOrRuntime) {
  expect_rule(DTLAB_LAYER_BASE_FLOOR, kBaseFloor, "is the base floor but reaches");
}

// Inside the runtime the folders form floors too, lowest first: instrument/ (clock, profiler, records, fault hooks),
// comm/, dist/ (the world that builds communicators), and train/ above them all; data/ beside comm/. A folder
// includes nothing from a floor above it (the comm <-> instrument and comm <-> dist loops of the 2026-12 review
// stay gone); comm-bench's driver, which needs a world, lives with the tools (lab/tools/comm_bench*).
struct FolderFloor {
  std::string folder;
  Rule above;
};
const std::vector<FolderFloor> kRuntimeFolders = {
    {"lab/instrument/", {{}, {"lab/comm/", "lab/dist/", "lab/train/", "lab/tools/", "lab/cli/"}}},
    {"lab/comm/", {{}, {"lab/dist/", "lab/train/", "lab/tools/", "lab/cli/"}}},
    {"lab/data/", {{}, {"lab/dist/", "lab/train/", "lab/tools/", "lab/cli/"}}},
    {"lab/dist/", {{}, {"lab/train/", "lab/tools/", "lab/cli/"}}},
};

std::vector<fs::path> files_in(const fs::path& folder) {
  std::vector<fs::path> out;
  for (const auto& entry : fs::directory_iterator(folder))
    if (entry.path().extension() == ".cpp" || entry.path().extension() == ".hpp") out.push_back(entry.path());
  std::sort(out.begin(), out.end());
  return out;
}

TEST(Layers, TheRuntimeFoldersIncludeNothingFromAFolderAboveThem) {
  for (const FolderFloor& floor : kRuntimeFolders) {
    const std::vector<fs::path> sources = files_in(fs::path(DTLAB_SOURCE_DIR) / floor.folder);
    ASSERT_FALSE(sources.empty()) << floor.folder;
    const auto found = breaches(DTLAB_SOURCE_DIR, sources, floor.above);
    EXPECT_TRUE(found.empty()) << floor.folder << " reaches a folder above it:\n" << joined(found);
  }
}

TEST(Layers, TheIncludeScanFlagsBreachesWithTheirChain) {  // the control
  const fs::path root = fs::path(::testing::TempDir()) / "dtlab_layers_control";
  fs::remove_all(root);
  fs::create_directories(root / "lab");
  fs::create_directories(root / "analysis");
  std::ofstream(root / "lab/plan.cpp") << "#include \"lab/shape.hpp\"\n#include <vector>\n";
  std::ofstream(root / "lab/shape.hpp") << "#pragma once\n#include \"tensor.hpp\"\n";
  std::ofstream(root / "lab/tensor.hpp") << "#pragma once\n  #include <ATen/ATen.h>\n";
  std::ofstream(root / "lab/loop.cpp") << "#include \"analysis/report.hpp\"\n";
  std::ofstream(root / "analysis/report.hpp") << "#pragma once\n";

  const auto torch = breaches(root, {"lab/plan.cpp"}, kTorchFree);
  ASSERT_EQ(torch.size(), 1u) << joined(torch);
  EXPECT_EQ(torch[0], "lab/plan.cpp -> lab/shape.hpp -> lab/tensor.hpp: <ATen/ATen.h>");
  const auto runtime = breaches(root, {"lab/loop.cpp", "lab/plan.cpp"}, kRuntime);
  ASSERT_EQ(runtime.size(), 1u) << joined(runtime);
  EXPECT_EQ(runtime[0], "lab/loop.cpp -> analysis/report.hpp");
  EXPECT_TRUE(breaches(root, {"lab/plan.cpp"}, kRuntime).empty());
  fs::create_directories(root / "strategies");
  std::ofstream(root / "strategies/catalog.hpp") << "#pragma once\n";
  std::ofstream(root / "lab/config_rules.cpp") << "#include \"lab/shape.hpp\"\n#include \"strategies/catalog.hpp\"\n";
  const auto base = breaches(root, {"lab/config_rules.cpp"}, kBaseFloor);
  ASSERT_EQ(base.size(), 1u) << joined(base);
  EXPECT_EQ(base[0], "lab/config_rules.cpp -> strategies/catalog.hpp");
  fs::create_directories(root / "lab/comm");
  fs::create_directories(root / "lab/dist");
  std::ofstream(root / "lab/comm/comm.cpp") << "#include \"lab/dist/fault.hpp\"\n";
  std::ofstream(root / "lab/dist/fault.hpp") << "#pragma once\n";
  const auto loop = breaches(root, files_in(root / "lab/comm"), kRuntimeFolders[1].above);
  ASSERT_EQ(loop.size(), 1u) << joined(loop);
  EXPECT_EQ(loop[0], "lab/comm/comm.cpp -> lab/dist/fault.hpp");
  fs::remove_all(root);
}

}  // namespace
