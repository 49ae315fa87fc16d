// fixtures_test.cpp: every result.json under tests/analysis/fixtures/ is consistent with the model it claims
// (review C16). The fixtures are real runs (fixtures/make_fixtures.py, `make fixtures`); this test is what stops a
// hand-made number from coming back: the parameter count and FLOPs per token must equal what the torch-free
// shape code computes from the run's own config, the first loss must sit near ln(vocab) (a freshly initialised
// model predicts near-uniformly), every loss must be finite, and there must be config.train.steps steps.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "lab/config.hpp"
#include "lab/model_shape.hpp"
#include "strategies/catalog.hpp"
#include "test_util.hpp"

namespace dtlab::analysis {
namespace {
namespace fs = std::filesystem;
using nlohmann::json;
using testing::contains;

// A fresh model's logits are near zero (init_std 0.02), so its loss is ln(vocab) up to a few hundredths; 0.3 nats
// leaves room for any data and still refuses the 7.21 of a hand-made tiny (ln 256 = 5.55).
constexpr double kFirstLossToleranceNats = 0.3;

// Run dirs (relative to the fixtures dir) that are deliberately OLD: make_fixtures.py cuts their result.json down
// to the keys of the first results writer. They still carry everything checked here (config, model, steps were
// there from the start), and must lack the newer keys, or they no longer test what they are for.
const std::vector<std::string> kOldRuns = {"instrument/overlap/old"};
const std::vector<std::string> kKeysAnOldResultLacks = {"prediction", "comm", "collectives", "dtypes"};

std::string fmt(double v) {
  std::ostringstream s;
  s.precision(10);
  s << v;
  return s.str();
}

// The loss of steps[i] (or of one steps.jsonl line); records a problem and returns NaN when it is not a number.
double loss_of(const json& step, const std::string& where, std::vector<std::string>& problems) {
  if (!step.is_object() || !step.contains("loss") || !step["loss"].is_number()) {
    problems.push_back(where + ": \"loss\" is missing or not a number");
    return NAN;
  }
  const double loss = step["loss"].get<double>();
  if (!std::isfinite(loss)) problems.push_back(where + ": loss " + fmt(loss) + " is not finite");
  return loss;
}

// Steps done before the run began: those of the checkpoint it resumed from (result.json checkpoints.resumed_from).
std::int64_t resumed_steps(const json& doc) {
  return doc.value(json::json_pointer("/checkpoints/resumed_from/step"), std::int64_t{0});
}

// Every way `doc` (one result.json, named `source` in the messages) disagrees with the model it claims; empty
// when it is consistent. The expected figures come from lab/model_shape.hpp, not from the trainer that wrote it.
std::vector<std::string> consistency_problems(const json& doc, const std::string& source) {
  std::vector<std::string> problems;
  auto problem = [&](const std::string& what) { problems.push_back(source + ": " + what); };
  for (const char* key : {"context", "config", "model", "steps"}) {
    if (!doc.contains(key)) problem(std::string("missing key \"") + key + "\"");
  }
  if (!problems.empty()) return problems;

  Config config;
  try {
    config = from_json(doc["config"], doc["context"].value("world_size", 1));
  } catch (const std::exception& e) {
    problem(std::string("config does not load: ") + e.what());
    return problems;
  }
  const ModelCounts counts = model_counts(config.model);
  const json& model = doc["model"];
  if (!model.contains("params") || model["params"] != counts.params) {
    problem("model.params = " + model.value("params", json()).dump() + ", but its config's shape (preset " +
            config.model.preset + ") has " + std::to_string(counts.params) + " parameters");
  }
  if (!model.contains("flops_per_token") || !model["flops_per_token"].is_number() ||
      std::abs(model["flops_per_token"].get<double>() - counts.flops_per_token) > 1e-9 * counts.flops_per_token) {
    problem("model.flops_per_token = " + model.value("flops_per_token", json()).dump() +
            ", but its config's shape has " + fmt(counts.flops_per_token));
  }
  if (model.value("preset", std::string()) != config.model.preset) {
    problem("model.preset = " + model.value("preset", json()).dump() +
            ", but config.model.preset = " + config.model.preset);
  }

  // A run stopped out of memory (status oom) has the steps it finished before the refused one; a run resumed from a
  // checkpoint the steps after the checkpoint's.
  const json& steps = doc["steps"];
  const bool stopped = doc.value("status", "") == "oom";
  const std::int64_t resumed = resumed_steps(doc);
  const std::int64_t want_steps =
      stopped ? std::max<std::int64_t>(0, doc["oom"].value("step", std::int64_t{0}) - 1) : config.train.steps - resumed;
  if (!steps.is_array() || static_cast<std::int64_t>(steps.size()) != want_steps) {
    problem("has " + std::to_string(steps.is_array() ? steps.size() : 0) + " steps, " +
            (stopped   ? "the steps before its out-of-memory stop = "
             : resumed ? "config.train.steps - the checkpoint's steps = "
                       : "config.train.steps = ") +
            std::to_string(want_steps));
  }
  if (!steps.is_array() || steps.empty()) return problems;
  for (std::size_t i = 0; i < steps.size(); ++i)
    loss_of(steps[i], source + ": steps[" + std::to_string(i) + "]", problems);
  const double first = steps[0].is_object() && steps[0].contains("loss") && steps[0]["loss"].is_number()
                           ? steps[0]["loss"].get<double>()
                           : NAN;  // already reported above
  const double uniform = std::log(static_cast<double>(config.model.vocab_size));
  if (std::isfinite(first) && std::abs(first - uniform) > kFirstLossToleranceNats) {
    problem("first loss " + fmt(first) + " is not within " + fmt(kFirstLossToleranceNats) + " of ln(vocab_size " +
            std::to_string(config.model.vocab_size) + ") = " + fmt(uniform) +
            ", what a freshly initialised model scores");
  }
  return problems;
}

// Each rank<r>/steps.jsonl next to a result.json: `want_steps` lines (or one more, `may_be_one_ahead`: a rank that
// finished the step another rank ran out of memory in), every loss finite.
std::vector<std::string> steps_file_problems(const fs::path& file, std::int64_t want_steps, bool may_be_one_ahead) {
  std::vector<std::string> problems;
  std::ifstream in(file);
  std::string line;
  std::int64_t n = 0;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    ++n;
    try {
      loss_of(json::parse(line), file.string() + ":" + std::to_string(n), problems);
    } catch (const json::exception& e) {
      problems.push_back(file.string() + ":" + std::to_string(n) + ": not JSON: " + e.what());
    }
  }
  if (n != want_steps && !(may_be_one_ahead && n == want_steps + 1)) {
    problems.push_back(file.string() + ": " + std::to_string(n) + " lines, expected " + std::to_string(want_steps));
  }
  return problems;
}

json read_json(const fs::path& p) { return json::parse(testing::read_text(p)); }

std::vector<fs::path> result_files() {
  std::vector<fs::path> files;
  for (const auto& e : fs::recursive_directory_iterator(testing::fixtures_dir()))
    if (e.is_regular_file() && e.path().filename() == "result.json") files.push_back(e.path());
  std::sort(files.begin(), files.end());
  return files;
}

TEST(Fixtures, EveryResultIsConsistentWithTheModelItClaims) {
  const std::vector<fs::path> files = result_files();
  ASSERT_GE(files.size(), 15u) << "make_fixtures.py writes 15 runs; fixtures missing: run `make fixtures`";
  for (const fs::path& file : files) {
    const json doc = read_json(file);
    for (const std::string& p : consistency_problems(doc, file.string())) ADD_FAILURE() << p;
    for (const auto& e : fs::directory_iterator(file.parent_path())) {
      const fs::path steps = e.path() / "steps.jsonl";
      if (e.is_directory() && e.path().filename().string().rfind("rank", 0) == 0 && fs::exists(steps)) {
        const bool stopped = doc.value("status", "") == "oom";
        const std::int64_t want = stopped
                                      ? doc["steps"].size()
                                      : doc.value(json::json_pointer("/config/train/steps"), -1) - resumed_steps(doc);
        for (const std::string& p : steps_file_problems(steps, want, stopped)) ADD_FAILURE() << p;
      }
    }
  }
}

TEST(Fixtures, OldResultsLackTheNewerKeys) {
  for (const std::string& run : kOldRuns) {
    const fs::path dir = fs::path(testing::fixtures_dir()) / run;
    const json doc = read_json(dir / "result.json");
    for (const std::string& key : kKeysAnOldResultLacks) EXPECT_FALSE(doc.contains(key)) << run << ": " << key;
    EXPECT_FALSE(doc["summary"].contains("phases_ms")) << run;
    EXPECT_FALSE(doc["steps"][0].contains("phases_ms")) << run;
    EXPECT_FALSE(fs::exists(dir / "rank0" / "timeline.json")) << run;
  }
}

TEST(Fixtures, TheCheckRefusesFabricatedNumbers) {
  // A real fixture, then the hand-made figures review C16 found in the old fixtures, one at a time.
  const fs::path file = fs::path(testing::fixtures_dir()) / "results" / "baseline" / "single" / "result.json";
  const json real = read_json(file);
  ASSERT_TRUE(consistency_problems(real, "real").empty());
  const std::int64_t steps = real["config"]["train"]["steps"];
  const std::int64_t params = model_counts(from_json(real["config"], 1).model).params;

  auto only_problem = [](const json& doc) {
    const std::vector<std::string> p = consistency_problems(doc, "fabricated");
    EXPECT_EQ(p.size(), 1u) << ::testing::PrintToString(p);
    return p.empty() ? std::string() : p.front();
  };
  json doc = real;
  doc["model"]["params"] = 150784;  // the old tiny fixture's count; the real one is 123,712
  EXPECT_TRUE(contains(only_problem(doc),
                       "model.params = 150784, but its config's shape (preset tiny) has " + std::to_string(params)));
  doc = real;
  doc["model"]["flops_per_token"] = 1020000.0;
  EXPECT_TRUE(contains(only_problem(doc), "model.flops_per_token = 1020000.0"));
  doc = real;
  doc["steps"][0]["loss"] = 7.2068;  // above ln 256: no fresh model scores worse than uniform by 1.7 nats
  EXPECT_TRUE(contains(only_problem(doc), "first loss 7.2068 is not within 0.3 of ln(vocab_size 256)"));
  doc = real;
  doc["steps"].erase(doc["steps"].size() - 1);
  EXPECT_TRUE(contains(only_problem(doc),
                       "has " + std::to_string(steps - 1) + " steps, config.train.steps = " + std::to_string(steps)));
  doc = real;
  doc["steps"][2]["loss"] = nullptr;  // how nlohmann::json writes a NaN
  EXPECT_TRUE(contains(only_problem(doc), "steps[2]: \"loss\" is missing or not a number"));
  doc = real;
  doc["model"]["preset"] = "small";
  EXPECT_TRUE(contains(only_problem(doc), "model.preset = \"small\", but config.model.preset = tiny"));
}

}  // namespace
}  // namespace dtlab::analysis
