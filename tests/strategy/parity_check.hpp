// parity_check.hpp: one rule for "two training runs agree": every step's loss AND pre-clip gradient norm, each
// within a stated tolerance of the reference's, and the `dtlab train` runner that produces such runs (result.json).
// The GPU parity cases (gpu_test.cpp) and their CPU proof (parity_check_test.cpp) share it, so the bf16 rule the GPU
// cases apply is the one shown on every machine to accept a correct bf16 run and to reject a run whose gradients were
// summed over the ranks instead of averaged (DTLAB_INJECT_MUTATION=drop_world_factor).
//
// Why the gradient norm: AdamW's update is nearly scale-invariant per element and clipping rescales large norms, so a
// wrong gradient scale can leave the losses within any tolerance; the pre-clip norm shows it at the first step (a
// missing 1/world multiplies it by the world size).
//
// The bf16 tolerance is derived, not fitted (docs/testing.md, "Tolerances and why"). u = 2^-8 is bf16's unit
// roundoff (8 significant bits). Two runs that do the same arithmetic in bf16 but round in different places (a
// half-batch weight gradient per rank vs the whole batch's, a reduce-scatter vs a local sum, another GEMM blocking,
// bf16 against fp32) differ, per token, by at most the roundings on that token's path: `sites` = 2 (forward and
// backward) x (10 per transformer block x n_layers + 3: embedding, final norm, head), each at most u relative and
// independent, so they add like a random walk: sqrt(sites) u. The loss is the mean over the step's T tokens
// (global_batch x seq_len) and every weight gradient a sum over them: independent per-token differences shrink by
// sqrt(T). The parameters then carry each step's difference into the next, independently, so the bound grows with
// sqrt(step). With a confidence factor of 3 (3 sigma), per step s (1-based), for q = loss and q = gradient norm:
//     |q_run(s) - q_ref(s)| <= 3 * sqrt(sites) * u / sqrt(T) * sqrt(s) * |q_ref(s)|
// For tiny (2 blocks, 8 x 64 tokens): 3 * sqrt(46) * 2^-8 / sqrt(512) = 3.5e-3 at step 1, 9.9e-3 at step 8. A
// missing 1/world at world 2 doubles the norm: 100% at step 1, 285 times the bound.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace dtlab::testing {

// A run's figures per step, from result.json's "steps": the mean loss and the gradient norm before clipping.
struct StepSeries {
  std::vector<double> loss, grad_norm;
};

struct TrainRun {
  nlohmann::json result;  // null when the run left no result.json
  StepSeries steps;
  std::string output;
  int exit_code = -1;
};

// `dtlab train` of tests/strategy/tiny_ddp.yaml for 8 steps into a fresh temporary directory named after `label`,
// under `dtlab launch -n world` when world > 0 (world 0: one process, no launcher). `environment` adds variables
// (e.g. DTLAB_INJECT_MUTATION=...). Adds a test failure naming the label when the run fails or writes no result.
TrainRun train_tiny(const std::string& label, int world, const std::vector<std::string>& overrides,
                    const std::vector<std::string>& environment = {});

// The overrides of the bf16 case under SGD without clipping that gpu_test.cpp runs on a GPU and parity_check_test.cpp
// on the CPU (add parallel.strategy and train.device): bf16 compute with fp32 masters, SGD (momentum 0.9) at a rate
// at which tiny visibly trains in 8 steps, no clipping, so a wrong gradient scale moves the parameters too.
std::vector<std::string> sgd_without_clipping_bf16();

// |run - reference| <= rtol * |reference| * (sqrt(step) when grows_with_step), per step, for loss and gradient norm.
struct ParityTolerance {
  std::string rule;  // printed with every verdict: which tolerance, and why
  double loss_rtol = 0;
  double norm_rtol = 0;
  bool grows_with_step = false;
  double bound(double rtol, double reference, size_t step) const;  // step is 1-based
};

// A fixed relative tolerance (fp32 runs: other kernels or another summation order change the last bits only).
ParityTolerance relative_tolerance(double rtol, const std::string& why);

// The derived bf16 tolerance (the rule above) for a model of n_layers blocks trained on tokens_per_step tokens a step:
// two runs computing in bf16 that round in different places, or a bf16 run against the same run in fp32.
inline constexpr double kBf16UnitRoundoff = 1.0 / 256.0;  // 2^-8
inline constexpr double kBf16Confidence = 3;              // 3 sigma of a sum of independent roundings
ParityTolerance bf16_tolerance(int64_t n_layers, int64_t tokens_per_step);
// The same, with the shape read from a run's result.json (config.model.n_layers, model.seq_len, train.global_batch).
ParityTolerance bf16_tolerance(const TrainRun& reference);

// Compares two runs step by step. `report` holds one line per step (both values, the difference, the bound, ok or
// MISMATCH), whatever the verdict, so a failure shows the whole trajectory.
struct ParityVerdict {
  bool same = false;
  std::string report;
};
ParityVerdict compare_steps(const StepSeries& reference, const StepSeries& run, const ParityTolerance& tolerance);

// A gtest failure (non-fatal) naming `what` with the report when the runs differ beyond the tolerance.
void expect_parity(const TrainRun& reference, const TrainRun& run, const ParityTolerance& tolerance,
                   const std::string& what);

}  // namespace dtlab::testing
