// results.cpp: result.json and steps.jsonl writers, and the run context.
#include "lab/results.hpp"

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <stdexcept>
#include <utility>

#include <torch/version.h>

#include "lab/atomic_file.hpp"
#include "lab/cpu_features.hpp"
#include "lab/launch/cluster.hpp"
#include "lab/results_schema.hpp"
#include "strategies/catalog.hpp"

#ifndef DTLAB_VERSION
#define DTLAB_VERSION "0.0.0"
#endif
#ifndef DTLAB_SOURCE_ROOT
#define DTLAB_SOURCE_ROOT "."
#endif

namespace dtlab {

std::string utc_timestamp() {
  const std::time_t now = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  std::tm tm{};
  gmtime_r(&now, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

std::string dtlab_version() { return DTLAB_VERSION; }

std::string git_sha() {
  static const std::string sha = [] {
    const std::string cmd = "git -C '" + std::string(DTLAB_SOURCE_ROOT) + "' rev-parse --short=12 HEAD 2>/dev/null";
    std::FILE* pipe = popen(cmd.c_str(), "r");
    if (!pipe) return std::string("unknown");
    std::array<char, 64> buf{};
    std::string out;
    if (std::fgets(buf.data(), buf.size(), pipe)) out = buf.data();
    pclose(pipe);
    while (!out.empty() && (out.back() == '\n' || out.back() == '\r')) out.pop_back();
    return out.empty() ? std::string("unknown") : out;
  }();
  return sha;
}

namespace {

// One link of the topology as {text, bits per second} (0 = unshaped); a launcher that does not say leaves it unknown.
std::pair<nlohmann::json, nlohmann::json> link_facts(const char* variable, bool dtlab_launcher) {
  const std::optional<double> bps = dtlab_launcher ? launched_link_bps(std::getenv(variable)) : std::nullopt;
  return {describe_launched_link(bps), bps ? nlohmann::json(*bps) : nlohmann::json(nullptr)};
}

}  // namespace

nlohmann::json run_context(int world_size, int ranks_per_node, const std::string& launcher, const std::string& strategy,
                           const std::string& command, int threads) {
  char host[256] = {0};
  gethostname(host, sizeof host - 1);
  ranks_per_node = std::max(1, std::min(ranks_per_node, world_size));
  const int nodes = (world_size + ranks_per_node - 1) / ranks_per_node;
  const bool dtlab_launcher = launcher == "dtlab";
  nlohmann::json context = {{schema::kDtlabVersion, dtlab_version()},
                            {schema::kGitSha, git_sha()},
                            {schema::kTorchVersion, TORCH_VERSION},
                            {schema::kHost, host},
                            {schema::kWorldSize, world_size},
                            {schema::kNodes, nodes},
                            {schema::kRanksPerNode, ranks_per_node},
                            {schema::kLauncher, launcher},
                            {schema::kStrategy, strategy},
                            {schema::kStartedAt, utc_timestamp()},
                            {schema::kThreads, threads},
                            {schema::kCommand, command},
                            {schema::kCpu, to_json(cpu_features())}};
  // Between nodes only; inside a node, one machine's loopback is unshaped unless the launcher shaped it.
  using LinkFacts = std::pair<nlohmann::json, nlohmann::json>;
  const LinkFacts inter = nodes > 1 ? link_facts("DTLAB_INTER_LINK", dtlab_launcher) : LinkFacts{nullptr, nullptr};
  const LinkFacts intra = nodes > 1 ? link_facts("DTLAB_INTRA_LINK", dtlab_launcher) : LinkFacts{"unshaped", 0.0};
  if (const StrategySpec* spec = find_strategy_spec(strategy)) {
    context[schema::kStrategyDoc] = std::string(spec->doc);
    context[schema::kChooseWhen] = std::string(spec->choose_when);
  }
  context[schema::kBaseline] = std::string(kComparisonBaseline);
  context[schema::kInterLink] = inter.first;
  context[schema::kInterLinkBps] = inter.second;
  context[schema::kIntraLink] = intra.first;
  context[schema::kIntraLinkBps] = intra.second;
  return context;
}

ResultsWriter::ResultsWriter(const std::string& out_dir, int rank) : out_dir_(out_dir), rank_(rank) {
  std::filesystem::create_directories(rank_dir());
  const std::string steps_path = rank_dir() + "/steps.jsonl";
  steps_.open(steps_path, std::ios::trunc);
  if (!steps_) throw std::runtime_error("results: cannot write " + steps_path);
}

std::string ResultsWriter::rank_dir() const { return out_dir_ + "/rank" + std::to_string(rank_); }

void ResultsWriter::append_step(const nlohmann::json& step) {
  steps_ << step.dump() << '\n';
  steps_.flush();
}

void ResultsWriter::write_result(const nlohmann::json& result) const {
  write_file_atomic(out_dir_ + "/result.json", result.dump(2) + "\n");
}

}  // namespace dtlab
