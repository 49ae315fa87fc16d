// parity_check.cpp: the step-by-step comparison of two training runs and the `dtlab train` runner (parity_check.hpp).
#include "tests/strategy/parity_check.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include "tests/strategy/job.hpp"

namespace dtlab::testing {
namespace {

namespace fs = std::filesystem;
const std::string kBin = std::string(DTLAB_BINARY_DIR) + "/bin/";
const std::string kConfig = std::string(DTLAB_SOURCE_DIR) + "/tests/strategy/tiny_ddp.yaml";

StepSeries read_steps(const nlohmann::json& result) {
  StepSeries series;
  if (!result.is_object() || !result.contains("steps")) return series;
  for (const auto& step : result.at("steps")) {
    series.loss.push_back(step.value("loss", std::nan("")));
    series.grad_norm.push_back(step.value("grad_norm", std::nan("")));
  }
  return series;
}

// One figure of one step: "loss 5.5412 vs 5.5409 |d| 3.1e-04 <= 2.6e-01 ok". NaN never passes.
bool check(std::string& line, const char* name, double got, double want, double bound) {
  const double diff = std::abs(got - want);
  const bool ok = diff <= bound;  // false for NaN
  char text[160];
  std::snprintf(text, sizeof text, " | %s %.7g vs %.7g |d| %.2e <= %.2e %s", name, got, want, diff, bound,
                ok ? "ok" : "MISMATCH");
  line += text;
  return ok;
}

}  // namespace

TrainRun train_tiny(const std::string& label, int world, const std::vector<std::string>& overrides,
                    const std::vector<std::string>& environment) {
  const fs::path out = fs::temp_directory_path() / ("dtlab_parity_" + label);
  fs::remove_all(out);
  std::vector<std::string> args;
  if (world > 0) args = {kBin + "dtlab", "launch", "-n", std::to_string(world)};
  for (const std::string& a :
       {kBin + "dtlab", std::string("train"), std::string("--config"), kConfig, std::string("--out"), out.string()})
    args.push_back(a);
  for (const char* a : {"train.steps=8", "train.threads=2", "instrument.warmup_steps=0"}) args.emplace_back(a);
  args.insert(args.end(), overrides.begin(), overrides.end());
  const JobResult job = run_job(args, 300, environment);
  TrainRun run;
  run.output = job.output;
  run.exit_code = job.exit_code;
  EXPECT_EQ(job.exit_code, 0) << label << ":\n" << job.output;
  std::ifstream in(out / "result.json");
  if (!in.good()) {
    ADD_FAILURE() << label << ": no result.json in " << out << "\n" << job.output;
    return run;
  }
  run.result = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (run.result.is_discarded()) ADD_FAILURE() << label << ": " << out << "/result.json is not JSON";
  run.steps = read_steps(run.result);
  return run;
}

std::vector<std::string> sgd_without_clipping_bf16() {
  return {"train.optimizer=sgd", "train.grad_clip=0", "train.lr=0.1", "precision.param_dtype=bf16"};
}

double ParityTolerance::bound(double rtol, double reference, size_t step) const {
  return rtol * std::abs(reference) * (grows_with_step ? std::sqrt(static_cast<double>(step)) : 1.0);
}

ParityTolerance relative_tolerance(double rtol, const std::string& why) {
  ParityTolerance t;
  t.rule = "relative " + std::to_string(rtol) + " per step on loss and grad norm (" + why + ")";
  t.loss_rtol = t.norm_rtol = rtol;
  return t;
}

ParityTolerance bf16_tolerance(int64_t n_layers, int64_t tokens_per_step) {
  const double sites = 2.0 * (10.0 * static_cast<double>(n_layers) + 3.0);
  const double rtol = kBf16Confidence * std::sqrt(sites) * kBf16UnitRoundoff /
                      std::sqrt(static_cast<double>(std::max<int64_t>(1, tokens_per_step)));
  ParityTolerance t;
  char rule[240];
  std::snprintf(rule, sizeof rule,
                "bf16: |d| <= %g * sqrt(%g roundings) * 2^-8 / sqrt(%lld tokens) * sqrt(step) * |reference| = %.3g * "
                "sqrt(step) relative (tests/strategy/parity_check.hpp)",
                kBf16Confidence, sites, static_cast<long long>(tokens_per_step), rtol);
  t.rule = rule;
  t.loss_rtol = t.norm_rtol = rtol;
  t.grows_with_step = true;
  return t;
}

ParityTolerance bf16_tolerance(const TrainRun& reference) {
  const nlohmann::json& config =
      reference.result.is_object() ? reference.result.value("config", nlohmann::json()) : nlohmann::json();
  if (!config.is_object()) {
    ADD_FAILURE() << "bf16_tolerance: the reference has no result.json config to read its shape from";
    return bf16_tolerance(1, 1);  // tight enough to fail: the caller's comparison then fails too
  }
  const nlohmann::json model = config.value("model", nlohmann::json::object());
  const nlohmann::json train = config.value("train", nlohmann::json::object());
  return bf16_tolerance(model.value("n_layers", int64_t{0}),
                        model.value("seq_len", int64_t{0}) * train.value("global_batch", int64_t{0}));
}

ParityVerdict compare_steps(const StepSeries& reference, const StepSeries& run, const ParityTolerance& tolerance) {
  ParityVerdict verdict;
  verdict.report = "tolerance: " + tolerance.rule + "\n";
  const size_t steps = reference.loss.size();
  if (steps == 0 || run.loss.size() != steps || reference.grad_norm.size() != steps || run.grad_norm.size() != steps) {
    verdict.report += "step counts differ or are zero: reference " + std::to_string(steps) + ", run " +
                      std::to_string(run.loss.size()) + "\n";
    return verdict;
  }
  verdict.same = true;
  for (size_t i = 0; i < steps; ++i) {
    const size_t step = i + 1;
    std::string line = "step " + std::to_string(step);
    const bool loss_ok = check(line, "loss", run.loss[i], reference.loss[i],
                               tolerance.bound(tolerance.loss_rtol, reference.loss[i], step));
    const bool norm_ok = check(line, "grad norm", run.grad_norm[i], reference.grad_norm[i],
                               tolerance.bound(tolerance.norm_rtol, reference.grad_norm[i], step));
    verdict.same = verdict.same && loss_ok && norm_ok;
    verdict.report += line + "\n";
  }
  return verdict;
}

void expect_parity(const TrainRun& reference, const TrainRun& run, const ParityTolerance& tolerance,
                   const std::string& what) {
  const ParityVerdict verdict = compare_steps(reference.steps, run.steps, tolerance);
  EXPECT_TRUE(verdict.same) << what << " differs from its reference:\n" << verdict.report;
}

}  // namespace dtlab::testing
