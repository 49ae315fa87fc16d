// parity_check_test.cpp: the comparison the GPU parity cases use (parity_check.hpp), proved where it can run — on the
// CPU. The GPU's bf16 case under SGD without clipping (gpu_test.cpp), run here with train.device=cpu: a FULL_SHARD
// job at world 2 passes the bf16 rule against the single-process bf16 run, and the same job with its gradients summed
// over the ranks instead of averaged (DTLAB_INJECT_MUTATION=drop_world_factor) fails it — the control that must fail.
// The rule's arithmetic is checked on hand-made series too: what passes, what does not, and that an empty, short or
// NaN series never passes.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "tests/strategy/parity_check.hpp"

namespace dtlab {
namespace {

using testing::StepSeries;
using testing::TrainRun;

std::vector<std::string> with(std::vector<std::string> overrides, const std::vector<std::string>& more) {
  overrides.insert(overrides.end(), more.begin(), more.end());
  return overrides;
}

// The single-process reference, into a directory of the test's own (ctest runs the two cases side by side).
TrainRun single_process_bf16(const std::string& label) {
  return testing::train_tiny(
      label, 0, with(testing::sgd_without_clipping_bf16(), {"parallel.strategy=single", "train.device=cpu"}));
}

TrainRun full_shard_bf16_at_world_2(const std::string& label, const std::vector<std::string>& environment) {
  return testing::train_tiny(
      label, 2, with(testing::sgd_without_clipping_bf16(), {"parallel.strategy=fsdp_full_shard", "train.device=cpu"}),
      environment);
}

TEST(ParityCheck, Bf16FullShardUnderSgdWithoutClippingPassesTheBf16Rule) {
  const TrainRun reference = single_process_bf16("cpu_sgd_bf16_single");
  const TrainRun run = full_shard_bf16_at_world_2("cpu_sgd_bf16_full_shard", {});
  const testing::ParityVerdict verdict =
      testing::compare_steps(reference.steps, run.steps, testing::bf16_tolerance(reference));
  EXPECT_TRUE(verdict.same) << verdict.report << run.output;
  std::printf("%s", verdict.report.c_str());  // the margins, in the test's log
  // The case must train, or a loss tolerance would have nothing to see.
  ASSERT_EQ(reference.steps.loss.size(), 8u);
  EXPECT_LT(reference.steps.loss.back(), reference.steps.loss.front() - 0.1) << verdict.report;
}

TEST(ParityCheck, TheBf16RuleRejectsGradientsSummedInsteadOfAveraged) {
  const TrainRun reference = single_process_bf16("cpu_sgd_bf16_single_for_mutated");
  const TrainRun mutated =
      full_shard_bf16_at_world_2("cpu_sgd_bf16_full_shard_mutated", {"DTLAB_INJECT_MUTATION=drop_world_factor"});
  ASSERT_NE(mutated.output.find("MUTATION drop_world_factor is active"), std::string::npos) << mutated.output;
  const testing::ParityVerdict verdict =
      testing::compare_steps(reference.steps, mutated.steps, testing::bf16_tolerance(reference));
  EXPECT_FALSE(verdict.same) << "the bf16 rule accepted gradients summed over 2 ranks:\n" << verdict.report;
  std::printf("%s", verdict.report.c_str());
  // Where: the norm doubles at step 1, where the loss (the same initial weights) still agrees.
  const size_t at = verdict.report.find("step 1 |");
  ASSERT_NE(at, std::string::npos) << verdict.report;
  const std::string step1 = verdict.report.substr(at, verdict.report.find('\n', at) - at);
  const size_t norm = step1.find("| grad norm");
  ASSERT_NE(norm, std::string::npos) << step1;
  EXPECT_NE(step1.find("MISMATCH", norm), std::string::npos) << "the norm at step 1 passed: " << step1;
  EXPECT_EQ(step1.substr(0, norm).find("MISMATCH"), std::string::npos) << "the loss at step 1 failed: " << step1;
  // The loss alone sees it too, from step 2 on (the first update is twice as large): with the norm ignored, the
  // comparison must still fail.
  testing::ParityTolerance loss_only = testing::bf16_tolerance(reference);
  loss_only.norm_rtol = std::numeric_limits<double>::infinity();
  EXPECT_FALSE(testing::compare_steps(reference.steps, mutated.steps, loss_only).same)
      << "the loss alone did not see gradients summed over 2 ranks:\n"
      << verdict.report;
  ASSERT_FALSE(mutated.steps.grad_norm.empty());
  EXPECT_NEAR(mutated.steps.grad_norm[0] / reference.steps.grad_norm.at(0), 2.0, 0.1) << verdict.report;
}

StepSeries series(std::vector<double> loss, std::vector<double> grad_norm) {
  return {std::move(loss), std::move(grad_norm)};
}

TEST(ParityCheck, TheRulesArithmetic) {
  const testing::ParityTolerance bf16 = testing::bf16_tolerance(2, 8 * 64);
  const double rtol = bf16.norm_rtol;
  const StepSeries reference = series({5.0, 4.0}, {2.0, 1.0});
  // Inside the bound at each step (it grows with sqrt(step)), and just outside it.
  EXPECT_TRUE(
      testing::compare_steps(reference, series({5.0 * (1 + 0.9 * rtol), 4.0}, {2.0, 1.0 * (1 + 1.2 * rtol)}), bf16)
          .same);
  EXPECT_FALSE(testing::compare_steps(reference, series({5.0 * (1 + 1.1 * rtol), 4.0}, {2.0, 1.0}), bf16).same);
  EXPECT_FALSE(testing::compare_steps(reference, series({5.0, 4.0}, {2.0, 1.0 * (1 + 1.5 * rtol)}), bf16).same);
  // A doubled gradient norm, with the losses equal.
  EXPECT_FALSE(testing::compare_steps(reference, series({5.0, 4.0}, {4.0, 2.0}), bf16).same);
  // Nothing to compare, a short run, a NaN: never the same.
  EXPECT_FALSE(testing::compare_steps({}, {}, bf16).same);
  EXPECT_FALSE(testing::compare_steps(reference, series({5.0}, {2.0}), bf16).same);
  EXPECT_FALSE(testing::compare_steps(reference, series({5.0, std::nan("")}, {2.0, 1.0}), bf16).same);
  // Exactness (tolerance 0) accepts only equal figures.
  const testing::ParityTolerance exact = testing::relative_tolerance(0.0, "exact");
  EXPECT_TRUE(testing::compare_steps(reference, reference, exact).same);
  EXPECT_FALSE(testing::compare_steps(reference, series({5.0, 4.0}, {2.0, std::nextafter(1.0, 2.0)}), exact).same);
}

}  // namespace
}  // namespace dtlab
