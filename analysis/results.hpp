// results.hpp: load what `dtlab train` and the scenario runner wrote (torch-free).
//
// Usage:
//   using namespace dtlab::analysis;
//   RunResult run = load_run("results/baseline/single");          // result.json + rank*/steps.jsonl
//   Scenario sc = load_scenario("results/baseline");               // scenario.json + its run dirs
//   std::vector<Scenario> all = discover({"results"});             // every scenario below results/
//
// Inputs to discover() may be scenario dirs (contain scenario.json), run dirs (contain result.json) or
// any parent dir (searched recursively; a scenario dir's own subtree is not searched again). Run dirs
// that belong to no scenario are gathered, in input order, into one ad-hoc scenario named "runs".
//
// Errors: every failure throws AnalysisError whose message names the file and, for schema problems,
// the key path, e.g. `results/x/result.json: missing required key "summary.tokens_per_s"`.
// Unknown keys are ignored (later schema additions such as comm, prediction, per-rank memory).
#pragma once

#include <cstdint>
#include <filesystem>
#include <initializer_list>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace dtlab::analysis {

class AnalysisError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// One training step as recorded in result.json "steps" or one line of rank<r>/steps.jsonl.
// step, loss and step_ms are required; lr, grad_norm and tokens_per_s are NaN when absent.
struct StepRecord {
  std::int64_t step = 0;
  double loss = 0;
  double lr = 0;
  double grad_norm = 0;
  double step_ms = 0;
  double tokens_per_s = 0;
  double comm_wait_ms = 0;        // optional; NaN when not recorded
  double comm_wait_least_ms = 0;  // optional (result.json, measured steps of several ranks): the least wait of any
                                  // rank this step; NaN when not recorded
  double loss_scale = 0;          // optional (dynamic loss scaling: the step's scale); NaN when not recorded
  bool skipped = false;           // dynamic loss scaling: non-finite gradients, the update was skipped
};

struct RunResult {
  std::string name;  // display name: scenario.json's runs[i].name, else the run dir's basename
  std::string dir;   // the run dir as found (path string, not canonicalised)

  // context (required unless marked optional)
  std::string dtlab_version;
  std::string git_sha;
  std::string torch_version;
  std::string host;
  int world_size = 1;
  std::string launcher;    // none | dtlab | torchrun | srun | mpirun
  std::string started_at;  // ISO 8601 UTC
  int threads = 0;         // optional; 0 when not recorded
  std::string strategy;    // context.strategy, else config.parallel.strategy, else "unknown"
  std::string command;     // optional; empty when not recorded
  // optional: the strategy's catalogue lines and the strategy the report compares with (lab/results_schema.hpp)
  std::string strategy_doc, choose_when, baseline;
  // optional topology (older results: one node, links not recorded)
  int nodes = 1;
  int ranks_per_node = 0;                // 0 when not recorded
  std::string inter_link, intra_link;    // "1 Gbit/s" | "unshaped" | "unknown"; "" when not recorded or one node
  std::optional<double> inter_link_bps;  // the set inter-node rate; nullopt = one node, unknown; 0 = unshaped
  // optional context.cpu (lab/cpu_features.hpp, from cpuid); nullopt in results written before it
  struct Cpu {
    std::string model;
    int cores = 0;
    bool avx2 = false, avx512f = false, avx512_bf16 = false, amx_bf16 = false;
    std::string kernels_capped_by;  // "ONEDNN_MAX_CPU_ISA=AVX2" when the run kept oneDNN below bf16; "" otherwise
    bool native_bf16() const { return (avx512_bf16 || amx_bf16) && kernels_capped_by.empty(); }
  };
  std::optional<Cpu> cpu;

  nlohmann::json config;  // the resolved config exactly as stored

  // model
  std::int64_t params = 0;
  double flops_per_token = 0;
  std::string preset;  // model.preset, else config.model.preset, else ""

  std::vector<StepRecord> steps;                      // result.json "steps" (rank 0)
  std::map<int, std::vector<StepRecord>> rank_steps;  // rank -> rank<r>/steps.jsonl, when present

  // summary
  double tokens_per_s = 0;
  double step_ms_median = 0;
  double step_ms_min = 0;
  double step_ms_max = 0;
  double final_loss = 0;
  double tflops = 0;
  double wall_s = 0;
  std::int64_t measured_steps = 0;
  std::optional<double> mfu_pct;
  std::optional<double> gemm_tflops;
  std::optional<double> comm_wait_ms_median;  // exposed communication wait per step (distributed runs)
  // per step the least wait of any rank (the last to reach the collectives), median over the steps; world > 1
  std::optional<double> comm_wait_least_ms_median;

  // memory of rank 0 by category (bytes); absent in results without a "memory" section
  struct Memory {
    double params = 0, grads = 0, optimizer = 0, buffers = 0;
    std::optional<double> activations, tensor_peak, hwm;
  };
  std::optional<Memory> memory;
  // bytes rank 0 sent into collectives per step (nccl-tests convention), summed over ops; by op
  std::optional<double> comm_bytes_per_step;
  std::map<std::string, double> comm_bytes_per_step_by_op;

  nlohmann::json raw;  // the whole result.json, for sections that read keys added later

  // status oom (lab/results_schema.hpp): the run stopped out of memory under memory.limit; it has no summary
  // (the fields above stay 0) and the scenario keeps it apart, in Scenario::oom_runs.
  struct OutOfMemory {
    int rank = 0;
    std::int64_t step = 0;  // 0 = in setup
    std::string category;   // what asked: params | grads | optimizer | buffers | comm | activations | other
    double requested_bytes = 0, in_use_bytes = 0, limit_bytes = 0;
    std::string message;
  };
  std::optional<OutOfMemory> oom;

  // config.precision.param_dtype, or "fp32" when the config does not say.
  std::string param_dtype() const;
  // config.instrument.warmup_steps, or 0 when the config does not say.
  int warmup_steps() const;
  // steps when result.json has them, else rank 0's steps.jsonl, else empty.
  const std::vector<StepRecord>& chart_steps() const;
};

struct Scenario {
  std::string name;  // scenario.json "scenario" (an id: lowercase, underscores)
  std::string title;
  std::string description;
  std::string question, look_for;  // optional: the study's question and what to look for in its charts
  std::string dir;
  std::vector<std::string> notes;
  std::vector<RunResult> runs;      // runs that completed
  std::vector<RunResult> oom_runs;  // runs that stopped out of memory (RunResult::oom), in scenario.json order
};

// The number at `path` in `j` (e.g. {"prediction", "step_ms"}); nullopt when a key is missing or not a number.
std::optional<double> json_number_at(const nlohmann::json& j, std::initializer_list<const char*> path);

// The completed fp32 run of `scenario` whose config is `r`'s but for the precision section (same world and nodes): what
// a bf16 or fp16 run's losses are compared with, step by step. nullptr when there is none.
const RunResult* fp32_twin(const Scenario& scenario, const RunResult& r);
// The fp32 run a reduced-precision run's step time is compared with: fp32_twin when there is one, else the fp32 run
// that also differs in train.steps. A step's work does not depend on how many steps follow it (only the learning
// rate does), so a slow bf16 run can train fewer steps and still be timed against its fp32 twin.
const RunResult* fp32_time_twin(const Scenario& scenario, const RunResult& r);

// The largest tensor peak over the ranks (memory.ranks[].tensor_peak_bytes), or rank 0's when the others are not
// recorded; 0 without a memory section.
double largest_rank_peak(const RunResult& r);
// The same for the device-side peak (memory.ranks[].device_side_peak_bytes: the counted bytes outside
// parallel.offload's host buffers, what memory.limit caps); each rank's tensor peak where a result does not record it.
double largest_rank_device_side_peak(const RunResult& r);

// Parses one result.json document. `source` names the file in error messages.
RunResult parse_result(const nlohmann::json& doc, const std::string& source);

// Parses a steps.jsonl stream (one JSON object per line; blank lines skipped).
std::vector<StepRecord> parse_steps_jsonl(std::istream& in, const std::string& source);

// Loads run_dir/result.json and every run_dir/rank<r>/steps.jsonl. name defaults to the dir's basename.
RunResult load_run(const std::filesystem::path& run_dir, const std::string& name = "");

// Loads dir/scenario.json and every run it lists (runs[i].dir is relative to the scenario dir).
Scenario load_scenario(const std::filesystem::path& dir);

// See the header comment. Throws AnalysisError if an input does not exist or nothing is found.
std::vector<Scenario> discover(const std::vector<std::string>& inputs);

}  // namespace dtlab::analysis
