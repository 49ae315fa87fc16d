// catalog_test.cpp: the strategy catalogue (strategies/catalog.def) is the one list of strategies — the specs, the
// registry of factories and config validation agree with it — and no strategy id is matched as a string outside
// its own two files and the catalogue (the lint below, with a control it must flag).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>

#include "lab/config.hpp"
#include "strategies/catalog.hpp"
#include "strategies/registry.hpp"

namespace dtlab {
namespace {

namespace fs = std::filesystem;

std::string read_file(const fs::path& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// The ids of a catalogue file, in order.
std::vector<std::string> ids_of(const fs::path& def) {
  std::vector<std::string> ids;
  std::istringstream lines(read_file(def));
  std::string line;
  const std::regex entry(R"(^DTLAB_STRATEGY\((\w+)\)$)");
  for (std::smatch m; std::getline(lines, line);)
    if (std::regex_match(line, m, entry)) ids.push_back(m[1]);
  return ids;
}

const fs::path kSource = DTLAB_SOURCE_DIR;

TEST(Catalog, SpecsRegistryAndCatalogueFileListTheSameStrategiesInOrder) {
  const std::vector<std::string> from_file = ids_of(kSource / "strategies/catalog.def");
  ASSERT_FALSE(from_file.empty());
  EXPECT_EQ(strategy_ids(), from_file);
  EXPECT_EQ(registered_strategy_ids(), from_file);
  for (const std::string& id : from_file) EXPECT_EQ(make_strategy(id)->id(), id);
}

TEST(Catalog, EverySpecHasADocAPlanAScheduleAndRealKeys) {
  const std::vector<std::string> keys = config_keys();
  const std::set<std::string> known(keys.begin(), keys.end());
  for (const StrategySpec* spec : strategy_specs()) {
    SCOPED_TRACE(std::string(spec->id));
    EXPECT_FALSE(spec->doc.empty());
    EXPECT_NE(spec->plan, nullptr);
    EXPECT_NE(spec->exposed_comm_ms, nullptr);
    for (std::string_view key : spec->keys) EXPECT_TRUE(known.contains(std::string(key))) << key;
    // The plan is labelled with the spec's id and reached through the catalogue.
    const int world = spec->id == kReferenceStrategy ? 1 : 2;
    const Config config = load_config("", {"model.preset=tiny", "parallel.strategy=" + std::string(spec->id)}, world);
    EXPECT_EQ(cost_plan(config, world - 1).strategy, spec->id);
    EXPECT_EQ(data_parallel_size(config), world);
  }
}

// Every strategy says what it does and when to choose it (the report's summary shows both); the report's baseline is
// a strategy of the catalogue.
TEST(Catalog, EveryStrategySaysWhenToChooseItAndTheBaselineExists) {
  for (const StrategySpec* spec : strategy_specs()) {
    EXPECT_FALSE(spec->doc.empty()) << spec->id;
    EXPECT_FALSE(spec->choose_when.empty()) << spec->id << ": no choose_when line";
  }
  EXPECT_NE(find_strategy_spec(kComparisonBaseline), nullptr) << kComparisonBaseline;
}

TEST(Catalog, UnknownIdsAreRefusedNamingEveryStrategyOfTheBuild) {
  try {
    strategy_spec("tensor_parallel");
    FAIL() << "no error";
  } catch (const std::invalid_argument& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("parallel.strategy='tensor_parallel' is not available in this build"), std::string::npos);
    for (const std::string& id : strategy_ids()) EXPECT_NE(what.find(id), std::string::npos) << what;
  }
  EXPECT_THROW(make_strategy("tensor_parallel"), std::invalid_argument);
  // Config validation takes its closed set from the catalogue.
  try {
    load_config("", {"parallel.strategy=tensor_parallel"}, 1);
    FAIL() << "no error";
  } catch (const ConfigError& e) {
    for (const std::string& id : strategy_ids()) EXPECT_NE(std::string(e.what()).find(id), std::string::npos);
  }
  // The toy of tests/strategy/toy/ lives in the test catalogue only.
  EXPECT_EQ(find_strategy_spec("ddp_nobucket"), nullptr);
}

// Lines of `path` that spell a strategy id as a whole string literal outside a comment.
std::vector<std::string> id_literals(const fs::path& path, const std::vector<std::string>& ids) {
  std::vector<std::string> hits;
  std::istringstream lines(read_file(path));
  std::string line;
  for (int number = 1; std::getline(lines, line); ++number) {
    const size_t comment = line.find("//");
    const std::string code = line.substr(0, comment);
    for (const std::string& id : ids)
      if (code.find('"' + id + '"') != std::string::npos)
        hits.push_back(path.string() + ":" + std::to_string(number) + ": \"" + id + "\"");
  }
  return hits;
}

// Sources under `dirs` of `root` that name a strategy by string, except each strategy's own pair, the catalogue and
// the config default (the reference strategy, kReferenceStrategy).
std::vector<std::string> strategy_id_leaks(const fs::path& root, const std::vector<std::string>& dirs,
                                           const std::vector<std::string>& ids) {
  std::vector<std::string> leaks;
  for (const std::string& dir : dirs) {
    if (!fs::exists(root / dir)) continue;
    for (const auto& entry : fs::recursive_directory_iterator(root / dir)) {
      const fs::path& p = entry.path();
      if (!entry.is_regular_file() || (p.extension() != ".cpp" && p.extension() != ".hpp")) continue;
      const std::string name = p.stem().string();
      const std::string relative = fs::relative(p, root).string();
      // analysis/course.cpp names studies, not strategies: the study `ddp` (scenarios/studies/ddp.yaml) shares its
      // name with the strategy.
      bool own = relative.rfind("strategies/catalog.", 0) == 0 || relative == "analysis/course.cpp";
      for (const std::string& id : ids) own = own || name == id || name == id + "_cost";
      if (own) continue;
      for (std::string& hit : id_literals(p, ids)) {
        if (relative == "lab/config.hpp" && hit.find('"' + std::string(kReferenceStrategy) + '"') != std::string::npos)
          continue;  // ParallelConfig's default: the reference strategy
        leaks.push_back(std::move(hit));
      }
    }
  }
  return leaks;
}

// The layers that must consult the catalogue. scenarios/ names strategies only in its study specs (YAML, not
// scanned); tests may name any strategy.
const std::vector<std::string> kLintedDirs = {"lab", "analysis", "strategies", "kernels", "scenarios"};

TEST(Layers, NoStrategyIdLiteralsOutsideTheirOwnFilesAndTheCatalogue) {
  const auto ids = strategy_ids();
  const std::vector<std::string> leaks = strategy_id_leaks(kSource, kLintedDirs, ids);
  std::string list;
  for (const auto& leak : leaks) list += leak + "\n";
  EXPECT_TRUE(leaks.empty()) << "strategy ids matched as strings (use the catalogue, strategies/catalog.hpp):\n"
                             << list;
}

TEST(Layers, TheIdLintFlagsALeakAndSparesTheStrategysOwnFiles) {  // the control
  const fs::path root = fs::path(::testing::TempDir()) / "dtlab_id_lint";
  fs::remove_all(root);
  fs::create_directories(root / "analysis");
  fs::create_directories(root / "strategies");
  std::ofstream(root / "analysis/leak.cpp") << "if (id == \"zero1\") return 1;  // a leak\n// \"ddp\" in a comment\n";
  std::ofstream(root / "strategies/zero1_cost.cpp") << "const char* id = \"zero1\";\n";
  const auto leaks = strategy_id_leaks(root, {"analysis", "strategies"}, strategy_ids());
  ASSERT_EQ(leaks.size(), 1u);
  EXPECT_NE(leaks[0].find("analysis/leak.cpp:1: \"zero1\""), std::string::npos) << leaks[0];
  fs::remove_all(root);
}

}  // namespace
}  // namespace dtlab
