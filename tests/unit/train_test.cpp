// train_test.cpp: optimizers against hand computation, schedules, clipping, gradient accumulation
// equivalence, determinism, the golden loss file of `tiny`, and the non-finite-loss stop.
#include <gtest/gtest.h>

#include <ATen/Version.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "lab/config.hpp"
#include "lab/train/optimizer.hpp"
#include "lab/train/schedule.hpp"
#include "lab/train/trainer.hpp"
#include "strategies/catalog.hpp"
#include "strategies/registry.hpp"

namespace dtlab {
namespace {

TEST(Optimizer, AdamWOneAndTwoStepsMatchHandComputation) {
  TrainConfig t;
  t.optimizer = "adamw";
  t.beta1 = 0.9;
  t.beta2 = 0.95;
  t.eps = 1e-8;
  t.weight_decay = 0.1;
  at::Tensor p = at::tensor({1.0, -2.0}, at::kDouble);
  at::Tensor q = at::tensor({0.5}, at::kDouble);  // no decay
  auto opt = make_optimizer(t, {p, q}, {true, false});
  const double lr = 0.01;
  // step 1, g = (0.5, -1.0), (2.0)
  opt->step({at::tensor({0.5, -1.0}, at::kDouble), at::tensor({2.0}, at::kDouble)}, lr);
  // by hand: p *= 1 - lr*wd; m = 0.1 g; v = 0.05 g^2; mhat = g; vhat = g^2; p -= lr * g / (|g| + eps)
  const double p0 = 1.0 * (1 - lr * 0.1) - lr * 0.5 / (0.5 + 1e-8);
  const double p1 = -2.0 * (1 - lr * 0.1) - lr * (-1.0) / (1.0 + 1e-8);
  const double q0 = 0.5 - lr * 2.0 / (2.0 + 1e-8);
  EXPECT_NEAR(p[0].item<double>(), p0, 1e-12);
  EXPECT_NEAR(p[1].item<double>(), p1, 1e-12);
  EXPECT_NEAR(q[0].item<double>(), q0, 1e-12);
  // step 2, g = 1.0 for q: m = 0.9*0.2 + 0.1*1 = 0.28; v = 0.95*0.2 + 0.05*1 = 0.24
  opt->step({at::tensor({0.0, 0.0}, at::kDouble), at::tensor({1.0}, at::kDouble)}, lr);
  const double m = 0.28, v = 0.24, bc1 = 1 - 0.81, bc2 = 1 - 0.9025;
  const double q_expected = q0 - (lr / bc1) * m / (std::sqrt(v) / std::sqrt(bc2) + 1e-8);
  EXPECT_NEAR(q[0].item<double>(), q_expected, 1e-12);
  EXPECT_EQ(opt->steps_taken(), 2);
  EXPECT_EQ(opt->state_bytes(), 2 * 3 * 8);
}

TEST(Optimizer, SgdMomentumMatchesHandComputation) {
  TrainConfig t;
  t.optimizer = "sgd";
  t.momentum = 0.9;
  t.weight_decay = 0.5;
  at::Tensor p = at::tensor({1.0}, at::kDouble);
  auto opt = make_optimizer(t, {p}, {true});
  opt->step({at::tensor({2.0}, at::kDouble)}, 0.1);
  // g' = 2 + 0.5*1 = 2.5; buf = 2.5; p = 1 - 0.25 = 0.75
  EXPECT_NEAR(p.item<double>(), 0.75, 1e-12);
  opt->step({at::tensor({1.0}, at::kDouble)}, 0.1);
  // g' = 1 + 0.375 = 1.375; buf = 0.9*2.5 + 1.375 = 3.625; p = 0.75 - 0.3625
  EXPECT_NEAR(p.item<double>(), 0.3875, 1e-12);
}

TEST(Optimizer, UnknownNameIsAnError) {
  TrainConfig t;
  t.optimizer = "lion";
  EXPECT_THROW(make_optimizer(t, {}, {}), std::invalid_argument);
}

TEST(Schedule, WarmupThenEachShape) {
  TrainConfig t;
  t.lr = 1.0;
  t.min_lr = 0.1;
  t.warmup_steps = 4;
  t.steps = 14;
  t.schedule = "constant";
  EXPECT_DOUBLE_EQ(learning_rate(t, 0), 0.25);
  EXPECT_DOUBLE_EQ(learning_rate(t, 3), 1.0);
  EXPECT_DOUBLE_EQ(learning_rate(t, 10), 1.0);
  t.schedule = "linear";
  EXPECT_DOUBLE_EQ(learning_rate(t, 4), 1.0);
  EXPECT_NEAR(learning_rate(t, 9), 0.55, 1e-12);  // halfway through 10 decay steps
  t.schedule = "cosine";
  EXPECT_DOUBLE_EQ(learning_rate(t, 4), 1.0);
  EXPECT_NEAR(learning_rate(t, 9), 0.55, 1e-12);
  EXPECT_GT(learning_rate(t, 13), 0.1);
  t.schedule = "step";
  t.step_every = 3;
  t.step_gamma = 0.5;
  EXPECT_DOUBLE_EQ(learning_rate(t, 6), 1.0);
  EXPECT_DOUBLE_EQ(learning_rate(t, 7), 0.5);
  EXPECT_DOUBLE_EQ(learning_rate(t, 13), 0.125);
}

Config tiny_config(std::vector<std::string> overrides = {}) {
  std::vector<std::string> all = {"model.preset=tiny",   "train.steps=6",        "train.global_batch=8",
                                  "train.micro_batch=8", "train.warmup_steps=1", "train.threads=1"};
  all.insert(all.end(), overrides.begin(), overrides.end());
  return load_config("", all, 1);
}

TrainOutcome run(const Config& c, std::function<void(int64_t, Strategy&)> after = {}) {
  auto strategy = make_strategy(c.parallel.strategy);
  SingleProcessWorld world;
  TrainOptions options;
  options.print_steps = false;
  options.print_config = false;
  options.after_step = std::move(after);
  return train(c, *strategy, world, device_mesh(c), options);
}

std::vector<double> losses(const TrainOutcome& o) {
  std::vector<double> out;
  for (const auto& s : o.steps) out.push_back(s.loss);
  return out;
}

TEST(Trainer, LossFallsAndParametersMove) {
  Config c = tiny_config({"train.steps=15", "train.lr=3e-3"});
  auto strategy = make_strategy("single");
  SingleProcessWorld world;
  TrainOptions options;
  options.print_steps = options.print_config = false;
  GPT initial(c.model, c.train.seed);
  auto outcome = train(c, *strategy, world, device_mesh(c), options);
  ASSERT_EQ(outcome.steps.size(), 15u);
  EXPECT_LT(outcome.steps.back().loss, outcome.steps.front().loss - 0.3);
  EXPECT_NEAR(outcome.steps.front().loss, std::log(256.0), 0.2);  // starts near uniform
  const auto after = strategy->full_state();
  const auto before = initial.parameters();
  ASSERT_EQ(after.size(), before.size());
  for (size_t i = 0; i < after.size(); ++i)
    EXPECT_FALSE(at::equal(after[i].second, *before[i].tensor)) << after[i].first << " did not move";
}

TEST(Trainer, GradientAccumulationFourByTwoEqualsOneByEight) {
  for (const std::string opt : {"sgd", "adamw"}) {
    auto whole = run(tiny_config({"train.micro_batch=8", "train.optimizer=" + opt}));
    auto accumulated = run(tiny_config({"train.micro_batch=2", "train.optimizer=" + opt}));
    ASSERT_EQ(whole.steps.size(), accumulated.steps.size());
    for (size_t i = 0; i < whole.steps.size(); ++i) {
      EXPECT_NEAR(accumulated.steps[i].loss, whole.steps[i].loss, 1e-5 + 1.3e-6 * std::abs(whole.steps[i].loss))
          << opt << " step " << i + 1;
      EXPECT_NEAR(accumulated.steps[i].grad_norm, whole.steps[i].grad_norm, 1e-5 + 1.3e-6 * whole.steps[i].grad_norm);
    }
  }
}

TEST(Trainer, ClippingBoundsTheUpdateButReportsTheRawNorm) {
  // With a tiny clip the reported norm is the pre-clip norm; the loss path must differ from no clipping.
  auto clipped = run(tiny_config({"train.grad_clip=0.01", "train.optimizer=sgd", "train.lr=0.5"}));
  auto free = run(tiny_config({"train.grad_clip=0", "train.optimizer=sgd", "train.lr=0.5"}));
  EXPECT_DOUBLE_EQ(clipped.steps[0].grad_norm, free.steps[0].grad_norm);
  EXPECT_GT(clipped.steps[0].grad_norm, 0.01);
  EXPECT_NE(clipped.steps[2].loss, free.steps[2].loss);
  // a clipped SGD step moves parameters by at most lr * clip (no momentum history at step 1)
  Config c = tiny_config({"train.grad_clip=0.01", "train.optimizer=sgd", "train.lr=0.5", "train.momentum=0",
                          "train.weight_decay=0", "train.steps=1", "train.warmup_steps=0"});
  auto strategy = make_strategy("single");
  SingleProcessWorld world;
  TrainOptions o;
  o.print_steps = o.print_config = false;
  GPT reference(c.model, c.train.seed);
  train(c, *strategy, world, device_mesh(c), o);
  double moved_sq = 0.0;
  auto after = strategy->full_state();
  auto before = reference.parameters();
  for (size_t i = 0; i < after.size(); ++i)
    moved_sq += (after[i].second - *before[i].tensor).pow(2).sum().item<double>();
  EXPECT_LE(std::sqrt(moved_sq), 0.5 * 0.01 * 1.0001);
  EXPECT_GT(std::sqrt(moved_sq), 0.5 * 0.01 * 0.99);
}

TEST(Trainer, TwoRunsWithOneSeedAreBitIdentical) {
  Config c = tiny_config();
  EXPECT_EQ(losses(run(c)), losses(run(c)));
}

// Golden loss file, recorded on one machine and read on others. Machines of this kind differ in their vector units
// (AVX2 only, or AVX-512): ATen, oneDNN and MKL pick other kernels, which sum in another order, so the losses agree
// only to the last few bits (seen: step 7 differs by 6e-8 relative between an AVX-512 and an AVX2 machine). The file
// is therefore compared with rtol 1e-5, about 100x what the kernels explain and far below what a real change does
// (a 10% change of lr moves step 10 by ~2e-3). Bit-identity is asserted only between two runs on the same machine
// (TwoRunsWithOneSeedAreBitIdentical). Regenerate with `make fixtures` after an intended numerical change.
TEST(Trainer, TinyLossesMatchGoldenFile) {
  const std::string path = std::string(DTLAB_SOURCE_DIR) + "/tests/golden/tiny_losses.json";
  Config c = tiny_config({"train.steps=10", "train.optimizer=adamw"});
  const std::vector<double> got = losses(run(c));
  if (std::getenv("DTLAB_UPDATE_GOLDEN")) {
    nlohmann::json j = {{"config", "model.preset=tiny train.steps=10 global_batch=8 micro_batch=8 adamw threads=1"},
                        {"cpu_capability", at::get_cpu_capability()},
                        {"losses", got}};
    std::ofstream(path) << j.dump(2) << "\n";
    GTEST_SKIP() << "golden file rewritten: " << path;
  }
  std::ifstream in(path);
  ASSERT_TRUE(in) << "missing " << path << " (run `make fixtures` to create it)";
  const auto golden = nlohmann::json::parse(in);
  const auto want = golden["losses"].get<std::vector<double>>();
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i)
    EXPECT_NEAR(got[i], want[i], 1e-5 * std::abs(want[i]))
        << "step " << i + 1 << " (golden recorded with " << golden.value("cpu_capability", "?") << ", this run uses "
        << at::get_cpu_capability() << ")";
}

// MFU is a fraction of the peak of the cores a run uses: one core's best GEMM rate times the cores in use. It was
// once a 1-thread rate under a 2-thread run (131-151% printed). On `small` (GEMM-heavy, 55-75% of the probe's rate on
// one core here) it must stay below 100% at 1 and at 2 threads, and the peak must count the cores.
// The probe takes 0.1 s at the start of the run. On these shared machines the cores' speed shifts in phases of a few
// seconds (one job's steps measured 310, 380 and 520 ms in turn): a probe caught in a slow phase before steps in a
// fast one printed 116% once. So a run may be tried up to three times; a peak that miscounts the cores exceeds 100% in
// every try (the 131-151% above).
TEST(Trainer, MfuStaysBelowTheHardwarePeakAtOneAndTwoThreads) {
  const int cores = static_cast<int>(std::thread::hardware_concurrency());
  for (int threads : {1, 2}) {
    if (threads > cores) GTEST_SKIP() << "this machine has " << cores << " core(s)";
    Config c = tiny_config({"model.preset=small", "train.steps=3", "train.micro_batch=8",
                            "train.threads=" + std::to_string(threads), "instrument.warmup_steps=1"});
    std::string tries;  // each try's summary MFU and step MFUs, for the failure message
    TrainOutcome outcome;
    for (int attempt = 1; attempt <= 3; ++attempt) {
      outcome = run(c);
      double highest = outcome.result["summary"]["mfu_pct"].get<double>();
      tries.append("try ").append(std::to_string(attempt)).append(": summary ").append(std::to_string(highest));
      for (const auto& step : outcome.steps) {
        highest = std::max(highest, step.mfu_pct);
        tries.append(", step ").append(std::to_string(step.mfu_pct));
      }
      tries.append("\n");
      if (highest < 100.0) break;
    }
    const auto& summary = outcome.result["summary"];
    const double mfu = summary["mfu_pct"].get<double>();
    EXPECT_GT(mfu, 5.0) << threads << " thread(s)";
    EXPECT_LT(mfu, 100.0) << threads << " thread(s): " << summary["mfu_peak_source"] << "\n" << tries;
    for (const auto& step : outcome.steps) EXPECT_LT(step.mfu_pct, 100.0) << "step " << step.step << "\n" << tries;
    const std::string source = summary["mfu_peak_source"];
    EXPECT_NE(source.find("x " + std::to_string(threads) + " cores in use"), std::string::npos) << source;
  }
}

TEST(Trainer, NonFiniteLossStopsNamingTheStep) {
  Config c = tiny_config({"train.steps=5", "train.grad_clip=0"});
  try {
    run(c, [](int64_t step, Strategy& s) {
      if (step == 2) {  // poison the weights after step 2: step 3's loss is nan
        s.scale_gradients(std::nan(""));
        s.optimizer_step(1.0);
      }
    });
    FAIL() << "expected TrainingError";
  } catch (const TrainingError& e) {
    EXPECT_NE(std::string(e.what()).find("at step 3/5"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("nan"), std::string::npos) << e.what();
  }
}

TEST(Trainer, StepLineHasTheAgreedShape) {
  StepRecord r{12, 3.21044, 3e-4, 1.0, 412.34, 9920.4};
  EXPECT_EQ(format_step_line(r, 100), "step 12/100 | loss 3.2104 | lr 3.0e-04 | 412.3 ms | 9920 tok/s");
}

TEST(Trainer, PredictionOnlyPresetIsRefused) {
  Config c = tiny_config({"model.preset=7b"});
  EXPECT_THROW(run(c), std::invalid_argument);
}

}  // namespace
}  // namespace dtlab
