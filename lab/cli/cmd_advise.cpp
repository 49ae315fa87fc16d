// cmd_advise.cpp: `dtlab advise` — the best configuration for a model under a memory budget, explained, and checked
// by running the top picks (analysis/cost/advise.hpp, lab/cli/verify_runs.hpp) — and `dtlab max-batch`, the
// largest micro-batch (or sequence length) that fits, predicted and then confirmed on both sides of the boundary.
//
//   dtlab advise --config F [key=value ...] --world-size N [--nodes M --inter-link R] --memory-budget 16GiB
//                [--profile P] [--top K] [--json] [--verify K --out DIR]
//   dtlab max-batch --config F [key=value ...] --world-size N --memory-budget B [--seq-len] [--verify --out DIR]
//
// advise's --profile defaults to this machine's calibrated profile, results/calibration/profile.json (what `make
// calibrate` writes); the config's train.micro_batch is where its micro-batch search starts, and need not divide the
// batch at --world-size.
//
// --verify writes DIR/<NN>/ (one run directory per verified candidate, each with its result.json), DIR/advice.json
// (the advice and the verification) and DIR/scenario.json, so `dtlab report DIR` shows the runs.
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <stdexcept>
#include <string>
#include <system_error>
#include <vector>

#include "analysis/cost/advise.hpp"
#include "analysis/cost/max_batch.hpp"
#include "analysis/cost/topology.hpp"
#include "lab/cli/command.hpp"
#include "lab/cli/verify_runs.hpp"
#include "lab/config.hpp"
#include "lab/launch/cluster.hpp"
#include "lab/stats.hpp"
#include "strategies/catalog.hpp"

namespace dtlab::cli {
namespace {

namespace fs = std::filesystem;

// Two measured times this close (fraction of the best) count as the same: the advice held.
constexpr double kHeldFraction = 0.05;

// The machine profile `make calibrate` writes, which advise uses when --profile is not given.
constexpr const char* kCalibratedProfile = "results/calibration/profile.json";

struct AdviseArgs {
  std::string config_path, profile_path, budget, inter_link, intra_link, out_dir = "results/advice";
  std::vector<std::string> overrides;
  int world_size = 1, nodes = 1, top = 5, verify = 0, steps = 8, repeats = 2;
  bool json = false, seq_len = false, confirm = false;
};

int64_t parse_budget(const std::string& text) {
  int64_t bytes = 0;
  try {
    bytes = memory_limit_bytes(MemoryConfig{text});
  } catch (const ConfigError&) {
    bytes = 0;
  }
  if (bytes <= 0)
    throw std::invalid_argument("--memory-budget " + text +
                                ": must be a size per rank with a binary unit, e.g. 16GiB or 512MiB");
  return bytes;
}

// The config as loaded when its micro-batch is left to the advisor: with micro-batch 1 (which divides whenever the
// global batch divides among the ranks), then given back the micro-batch it was written with as the search's
// starting point. Rethrows `refused` when the config breaks a rule the micro-batch does not explain.
Config with_searched_micro_batch(const AdviseArgs& a, const ConfigError& refused, FILE* say) {
  std::vector<std::string> free_batch = a.overrides;
  free_batch.insert(free_batch.end(), {"train.micro_batch=1", "train.accumulation=0"});
  Config config;
  try {
    config = load_config(a.config_path, free_batch, a.world_size);
  } catch (const ConfigError&) {
    throw refused;
  }
  // The micro-batch as written: read at one rank, where the batch rule asks only that it divide the global batch.
  std::vector<std::string> one_rank = a.overrides;
  one_rank.emplace_back("train.accumulation=0");
  std::string written = "train.micro_batch";
  try {
    config.train.micro_batch = load_config(a.config_path, one_rank, 1).train.micro_batch;
    written += "=" + std::to_string(config.train.micro_batch);
  } catch (const ConfigError&) {
    config.train.micro_batch = config.train.global_batch;  // it does not divide the global batch either
  }
  config.train.accumulation = 0;  // the advisor derives it with each micro-batch it tries
  const Config start = analysis::at_starting_micro_batch(config);
  std::fprintf(say,
               "advise: %s does not divide train.global_batch=%lld at %d ranks (%lld sequences per rank); the "
               "advisor chooses the micro-batch: its search starts from %lld\n",
               written.c_str(), static_cast<long long>(config.train.global_batch), a.world_size,
               static_cast<long long>(start.train.micro_batch * start.train.accumulation),
               static_cast<long long>(start.train.micro_batch));
  return config;
}

// The config at the job's world size and layout (nodes must divide the ranks). With `searched_micro_batch` (advise),
// a micro-batch that does not divide the batch at this world size is the search's starting point, not a refusal.
Config job_config(const AdviseArgs& a, bool searched_micro_batch = false) {
  if (a.world_size % a.nodes != 0)
    throw std::invalid_argument("--nodes " + std::to_string(a.nodes) + " does not divide --world-size " +
                                std::to_string(a.world_size) + " (every node runs the same number of ranks)");
  Config config;
  try {
    config = load_config(a.config_path, a.overrides, a.world_size);
  } catch (const ConfigError& refused) {
    if (!searched_micro_batch) throw;
    config = with_searched_micro_batch(a, refused, a.json ? stderr : stdout);
  }
  if (a.nodes > 1) config.ranks_per_node = a.world_size / a.nodes;
  config.host_ranks = a.world_size;  // --verify runs every rank here; --nodes are emulated nodes of this machine
  return config;
}

VerifyJob verify_job(const AdviseArgs& a, int64_t budget) {
  VerifyJob job;
  job.config_path = a.config_path;
  job.overrides = a.overrides;
  job.world_size = a.world_size;
  job.nodes = a.nodes;
  job.inter_link = a.inter_link;
  job.intra_link = a.intra_link;
  job.profile_path = a.profile_path;
  job.budget_bytes = budget;
  job.steps = a.steps;
  return job;
}

void write_json(const fs::path& file, const nlohmann::json& j) {
  std::ofstream out(file);
  out << j.dump(2) << "\n";
  if (!out) throw std::runtime_error("cannot write " + file.string());
}

// DIR/scenario.json listing the runs, so `dtlab report DIR` renders them like a study's.
void write_scenario(const fs::path& dir, const std::string& title, const std::string& description,
                    const std::vector<std::string>& notes, const std::vector<std::pair<std::string, Measured>>& runs,
                    int world_size) {
  nlohmann::json j = {{"scenario", "advice"}, {"title", title}, {"description", description}, {"notes", notes}};
  j["runs"] = nlohmann::json::array();
  for (const auto& [name, m] : runs)
    j["runs"].push_back(
        {{"name", name}, {"dir", m.dir.filename().string()}, {"command", m.command}, {"world_size", world_size}});
  write_json(dir / "scenario.json", j);
}

// Runs the top K candidates (predicted to fit) and up to two of the nearest rejected (predicted out of memory),
// each under memory.limit = the budget, and compares: the measured best of the top K against the predicted top-1
// (the advice held when it is within kHeldFraction), and each run's feasibility against its prediction. The top K
// run `repeats` times in turn (1, 2, 3, 1, 2, 3): on a shared machine a run's speed drifts by more than 5% over a
// minute. Each candidate's figure is the median of its repeats. (The fastest repeat was used before: against the
// fastest of the K·repeats runs of all candidates it compares one candidate's luckiest of `repeats` draws with the
// luckiest of K·repeats, which goes against the top-1 even among identical jobs — on the 2-core machine of
// 2026-11-26 one run of a job measured 369 ms and its other two 432 and 453.)
int run_verify(const AdviseArgs& a, const analysis::Advice& advice) {
  const size_t k = std::min<size_t>(static_cast<size_t>(a.verify), advice.ranked.size());
  if (k == 0) {
    std::printf("\nverify: nothing to run (no candidate fits)\n");
    return 0;
  }
  std::vector<const analysis::Candidate*> picks;
  for (size_t i = 0; i < k; ++i) picks.push_back(&advice.ranked[i]);
  for (size_t i = 0; i < advice.rejected.size() && i < 2; ++i) picks.push_back(&advice.rejected[i]);
  const VerifyJob job = verify_job(a, advice.budget_bytes);
  const fs::path out(a.out_dir);
  fs::create_directories(out);
  std::printf(
      "\nverify: the top %zu (%d times each, in turn) and %zu over the budget, %d steps each under "
      "memory.limit=%lld (runs in %s)\n",
      k, a.repeats, picks.size() - k, a.steps, static_cast<long long>(advice.budget_bytes), out.c_str());
  // Earlier rounds of the top K: each candidate reports the median over its completed repeats.
  std::vector<std::vector<double>> repeats_ms(k);
  for (int round = 1; round < a.repeats; ++round)
    for (size_t i = 0; i < k; ++i) {
      char name[32];
      std::snprintf(name, sizeof name, "%02zu-r%d", i + 1, round);
      const Measured m = run_job(job, picks[i]->settings.overrides, out / name);
      if (m.status == "completed") repeats_ms[i].push_back(m.step_ms_median);
    }
  std::printf("%4s %12s %12s %12s %12s %10s  %s\n", "#", "predicted ms", "measured ms", "pred. peak", "meas. peak",
              "status", "settings");
  std::vector<std::pair<std::string, Measured>> runs;
  nlohmann::json rows = nlohmann::json::array();
  int best = -1, feasible_right = 0, outside_margin = 0, outside_margin_right = 0;
  for (size_t i = 0; i < picks.size(); ++i) {
    const analysis::Candidate& c = *picks[i];
    const bool predicted_fit = i < k;
    char name[32];
    std::snprintf(name, sizeof name, predicted_fit ? "%02zu" : "over-%zu", predicted_fit ? i + 1 : i - k + 1);
    Measured m = run_job(job, c.settings.overrides, out / name);
    std::vector<double> repeats;
    if (predicted_fit) {
      repeats = repeats_ms[i];
      if (m.status == "completed") {
        repeats.push_back(m.step_ms_median);
        m.step_ms_median = median(repeats);
      }
    }
    std::printf("%4s %12.1f %12.1f %12s %12s %10s  %s\n", name, c.step_ms, m.step_ms_median,
                analysis::format_bytes(static_cast<double>(c.memory.device_peak)).c_str(),
                analysis::format_bytes(m.peak_bytes).c_str(), m.status.c_str(), c.describe().c_str());
    if (m.status == "oom") std::printf("       out of memory: %s\n", m.oom_message.c_str());
    if (m.status == "failed") std::printf("       failed (exit %d): see %s/log.txt\n", m.exit_code, m.dir.c_str());
    if (predicted_fit && m.status == "completed" &&
        (best < 0 || m.step_ms_median < runs[static_cast<size_t>(best)].second.step_ms_median))
      best = static_cast<int>(i);
    const bool right = m.status == (predicted_fit ? "completed" : "oom");
    const double margin = static_cast<double>(c.memory.device_peak) / static_cast<double>(advice.budget_bytes) - 1;
    feasible_right += right ? 1 : 0;
    if (std::abs(margin) > kHeldFraction) {
      ++outside_margin;
      outside_margin_right += right ? 1 : 0;
    }
    rows.push_back({{"name", name},
                    {"description", c.describe()},
                    {"overrides", c.settings.overrides},
                    {"dir", m.dir.string()},
                    {"command", m.command},
                    {"status", m.status},
                    {"exit_code", m.exit_code},
                    {"predicted_fits", predicted_fit},
                    {"feasibility_right", right},
                    {"peak_margin", margin},
                    {"predicted_step_ms", c.step_ms},
                    {"measured_step_ms", m.step_ms_median},
                    {"repeats_step_ms", repeats},
                    {"predicted_peak_bytes", c.memory.device_peak},
                    {"measured_peak_bytes", m.peak_bytes}});
    runs.emplace_back(name, m);
  }
  nlohmann::json verification = {{"runs", rows},
                                 {"steps", a.steps},
                                 {"repeats", a.repeats},
                                 {"held_within", kHeldFraction},
                                 {"feasibility_right", feasible_right},
                                 {"feasibility_checked", picks.size()},
                                 {"outside_margin_right", outside_margin_right},
                                 {"outside_margin", outside_margin}};
  bool held = false;
  if (best < 0) {
    std::printf("no verified candidate completed: the advice did not hold\n");
    verification["measured_best"] = nullptr;
  } else {
    const double top1 = runs[0].second.step_ms_median, best_ms = runs[static_cast<size_t>(best)].second.step_ms_median;
    held = runs[0].second.status == "completed" && top1 <= (1 + kHeldFraction) * best_ms;
    std::printf(
        "measured best of the top %zu: #%d at %.1f ms; the predicted top-1 measured %.1f ms (%+.1f%%): the "
        "advice %s\n",
        k, best + 1, best_ms, top1, 100 * (top1 / best_ms - 1),
        held ? "held (within 5% of the best)" : "did not hold (more than 5% slower than the best)");
    verification["measured_best"] = best + 1;
  }
  std::printf(
      "feasibility as predicted: %d of %zu runs (%d of %d with a predicted peak more than 5%% from the budget)\n",
      feasible_right, picks.size(), outside_margin_right, outside_margin);
  verification["held"] = held;
  nlohmann::json doc = analysis::to_json(advice);
  doc["verification"] = verification;
  write_json(out / "advice.json", doc);
  std::vector<std::string> notes = advice.explanation;
  notes.push_back(held ? "The advice held: the predicted top-1 measured within 5% of the best verified run."
                       : "The advice did not hold: see advice.json.");
  write_scenario(out, "Advice verified: the top " + std::to_string(k) + " predicted configurations, run",
                 "dtlab advise under a budget of " + analysis::format_bytes(static_cast<double>(advice.budget_bytes)) +
                     " per rank; runs named by their predicted rank (01 = the advice; over-N: predicted over the "
                     "budget, expected to stop out of memory).",
                 notes, runs, a.world_size);
  return 0;
}

// --profile, or this machine's calibrated profile when it exists (saying so), or an error naming how to make one.
std::string advise_profile(const std::string& given, FILE* say) {
  if (!given.empty()) return given;
  std::error_code error;
  if (!fs::exists(kCalibratedProfile, error))
    throw ConfigError(std::string("advise: no --profile given and ") + kCalibratedProfile +
                      " does not exist: measure this machine with `make calibrate` (or `dtlab calibrate --out " +
                      kCalibratedProfile +
                      "`), or name a profile with --profile (analysis/profiles/h100_sxm.json "
                      "projects an H100)");
  std::fprintf(say, "advise: using the calibrated profile %s\n", kCalibratedProfile);
  return kCalibratedProfile;
}

void add_job_flags(CLI::App* app, AdviseArgs& a) {
  app->add_option("--config", a.config_path, "YAML config file: the model and batch")->required();
  app->add_option("overrides", a.overrides, "section.key=value overrides, e.g. model.preset=medium");
  app->add_option("--world-size", a.world_size, "ranks of the job")->check(CLI::PositiveNumber);
  app->add_option("--memory-budget", a.budget, "memory per rank, e.g. 16GiB or 512MiB")->required();
  app->add_option("--steps", a.steps, "steps of each verification run (2 are warm-up)")->check(CLI::Range(3, 1000));
  app->add_option("--out", a.out_dir, "where verification runs go (default results/advice)");
}

}  // namespace

Command add_advise_command(CLI::App& app) {
  auto a = std::make_shared<AdviseArgs>();
  auto* cmd = app.add_subcommand("advise", "the best layout for a model under a memory budget, ranked");
  cmd->footer(
      "Searches strategy, checkpointing, precision, offload, micro-batch and bucket/wrap.\n"
      "example: dtlab advise --config scenarios/configs/sharding.yaml --world-size 2 --memory-budget 96MiB");
  add_job_flags(cmd, *a);
  cmd->add_option("--profile", a->profile_path, "machine profile (default: results/calibration/profile.json)");
  cmd->add_option("--nodes", a->nodes, "nodes of the job (the ranks split evenly)")->check(CLI::PositiveNumber);
  cmd->add_option("--inter-link", a->inter_link, "inter-node link rate (e.g. 1gbit)");
  cmd->add_option("--intra-link", a->intra_link, "intra-node link rate (e.g. 8gbit)");
  cmd->add_option("--top", a->top, "rows of the ranked table")->check(CLI::PositiveNumber);
  cmd->add_option("--verify", a->verify, "run the top K candidates under memory.limit = the budget")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--repeats", a->repeats, "runs of each verified candidate; their median counts (default 2)")
      ->check(CLI::Range(1, 10));
  cmd->add_flag("--json", a->json, "print the advice as JSON (every candidate)");
  return {cmd, [a] {
            a->profile_path = advise_profile(a->profile_path, a->json ? stderr : stdout);
            const Config config = job_config(*a, true);
            analysis::Topology topology;
            topology.nodes = a->nodes;
            if (a->nodes > 1) topology.ranks_per_node = a->world_size / a->nodes;
            if (!a->inter_link.empty())
              topology.inter_link_bps = parse_link_rate(a->inter_link, "--inter-link").bits_per_s;
            if (!a->intra_link.empty())
              topology.intra_link_bps = parse_link_rate(a->intra_link, "--intra-link").bits_per_s;
            analysis::AdviseRequest request{
                .base = config,
                .profile = analysis::on_topology(analysis::load_profile(a->profile_path), topology),
                .budget_bytes = parse_budget(a->budget)};
            const analysis::Advice advice = analysis::advise(request);
            if (a->json)
              std::printf("%s\n", analysis::to_json(advice).dump(2).c_str());
            else
              std::printf("%s", analysis::format_advice(advice, a->top).c_str());
            return a->verify > 0 ? run_verify(*a, advice) : 0;
          }};
}

Command add_max_batch_command(CLI::App& app) {
  auto a = std::make_shared<AdviseArgs>();
  auto* cmd = app.add_subcommand("max-batch", "the largest micro-batch (or sequence length) under a budget");
  cmd->footer(
      "--verify runs it (it must fit) and the next size (it must run out of memory).\n"
      "example: dtlab max-batch --config scenarios/configs/ddp.yaml --world-size 2 --memory-budget 96MiB");
  add_job_flags(cmd, *a);
  cmd->add_flag("--seq-len", a->seq_len, "search the sequence length instead of the micro-batch");
  cmd->add_flag("--verify", a->confirm, "run the answer and the next size under memory.limit");
  cmd->add_option("--profile", a->profile_path, "machine profile for the runs' predictions (optional)");
  return {cmd, [a] {
            const Config config = job_config(*a);
            const int64_t budget = parse_budget(a->budget);
            const char* what = a->seq_len ? "sequence length" : "micro-batch";
            const auto fit = analysis::max_batch(config, budget, a->seq_len);
            if (!fit) {
              std::printf("max-batch: nothing fits %s per rank: %s 1 is predicted over the budget\n",
                          analysis::format_bytes(static_cast<double>(budget)).c_str(), what);
              return 1;
            }
            std::printf("max-batch: %s %lld fits %s (%lld B) per rank: predicted peak %lld B; ", what,
                        static_cast<long long>(fit->value), analysis::format_bytes(static_cast<double>(budget)).c_str(),
                        static_cast<long long>(budget), static_cast<long long>(fit->peak_bytes));
            if (fit->next_peak_bytes > 0)
              std::printf("%lld does not: predicted peak %lld B\n", static_cast<long long>(fit->next_value),
                          static_cast<long long>(fit->next_peak_bytes));
            else
              std::printf("the search stopped at %lld\n", static_cast<long long>(fit->next_value - 1));
            if (!a->confirm) return 0;
            const VerifyJob job = verify_job(*a, budget);
            const fs::path out(a->out_dir);
            bool confirmed = true;
            std::vector<std::pair<std::string, Measured>> runs;
            std::vector<int64_t> sizes = {fit->value};
            if (fit->next_peak_bytes > 0) sizes.push_back(fit->next_value);  // else: the search limit, not a boundary
            for (const int64_t value : sizes) {
              const std::string name = std::string(a->seq_len ? "seq_len_" : "micro_batch_") + std::to_string(value);
              const Measured m = run_job(job, analysis::batch_overrides(config, value, a->seq_len), out / name);
              const bool expect_fit = value == fit->value;
              const bool as_expected = expect_fit ? m.status == "completed" : m.status == "oom";
              confirmed = confirmed && as_expected;
              std::printf("  %s %lld: %s (%s %.0f B)%s\n", what, static_cast<long long>(value), m.status.c_str(),
                          m.status == "oom" ? "in use + refused" : "measured peak", m.peak_bytes,
                          as_expected  ? ""
                          : expect_fit ? " — predicted to fit"
                                       : " — predicted out of memory");
              runs.emplace_back(name, m);
            }
            write_scenario(out, "The largest " + std::string(what) + " under the budget, confirmed",
                           "dtlab max-batch: the predicted boundary run on both sides under memory.limit.", {}, runs,
                           a->world_size);
            std::printf("max-batch: %s\n", confirmed ? "confirmed: fits at the answer, out of memory at the next size"
                                                     : "NOT confirmed: the runs disagree with the prediction");
            return confirmed ? 0 : 1;
          }};
}

}  // namespace dtlab::cli
