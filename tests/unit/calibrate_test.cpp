// calibrate_test.cpp: `dtlab calibrate --quick` end to end — it runs comm-bench as a child, measures GEMMs, a
// training step and AdamW, and writes a profile that analysis/cost/profile.hpp's loader accepts with positive
// rates. Also the thread rule and the refusals. The end-to-end cases calibrate on the tiny model (~10 s each): on the
// default `small` a quick calibration takes 2-5 min on an AVX2-only machine, where bf16 and fp16 GEMMs run at 3
// GFLOP/s, and what they check (the profile's keys, rates, side files and the overlap fit's arithmetic) does not
// depend on the model's size.
#include "lab/tools/calibrate.hpp"
#include "lab/tools/calibrate_overlap.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "analysis/cost/compute_model.hpp"
#include "analysis/cost/profile.hpp"
#include "analysis/cost/step_model.hpp"
#include "lab/config.hpp"
#include "strategies/catalog.hpp"
#include "strategies/cost_plan.hpp"
#include "tests/analysis/test_util.hpp"

namespace dtlab {
namespace {
namespace fs = std::filesystem;

using analysis::testing::read_text;
using analysis::testing::TempDir;

// Runs a shell command; returns its exit status and leaves its output in `log`.
int run(const std::string& command, const fs::path& log) {
  const int status = std::system((command + " > " + log.string() + " 2>&1").c_str());
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

const std::string kDtlab = DTLAB_BINARY_DIR "/bin/dtlab";

TEST(Calibrate, QuickWritesALoadableMeasuredProfile) {
  TempDir tmp;
  const fs::path profile_path = tmp.path() / "calibration" / "profile.json";
  const fs::path log = tmp.path() / "log.txt";
  ASSERT_EQ(run(kDtlab + " calibrate --quick --ranks 2 --out " + profile_path.string() + " model.preset=tiny", log), 0)
      << read_text(log);

  const analysis::MachineProfile p = analysis::load_profile(profile_path.string());
  EXPECT_EQ(p.kind, "measured");
  EXPECT_NE(p.source.find("dtlab calibrate on "), std::string::npos) << p.source;
  EXPECT_NE(p.source.find("--quick"), std::string::npos) << "the command is recorded: " << p.source;
  for (const char* dtype : {"float32", "bfloat16", "float16"}) {
    ASSERT_TRUE(p.compute.matmul_tflops.count(dtype)) << dtype;
    EXPECT_GT(p.compute.matmul_tflops.at(dtype), 0.0) << dtype;
  }
  EXPECT_GT(p.compute.train_efficiency, 0.0);
  EXPECT_GT(p.compute.memory_GBps, 0.0);
  for (const char* dtype : {"bfloat16", "float16"}) {
    ASSERT_TRUE(p.compute.train_efficiency_by_dtype.count(dtype)) << "an fp32 config also measures a step in " << dtype;
    EXPECT_GT(p.compute.train_efficiency_by_dtype.at(dtype), 0.0) << dtype;
  }
  EXPECT_DOUBLE_EQ(p.compute.train_efficiency_by_dtype.at("float32"), p.compute.train_efficiency);
  // Each dtype's step at the config's width and at half of it.
  for (const char* dtype : {"float32", "bfloat16", "float16"}) {
    ASSERT_TRUE(p.compute.train_efficiency_by_width.count(dtype)) << dtype;
    ASSERT_EQ(p.compute.train_efficiency_by_width.at(dtype).size(), 2u) << dtype;
    const auto& widths = p.compute.train_efficiency_by_width.at(dtype);
    EXPECT_EQ(widths.rbegin()->first, 2 * widths.begin()->first) << dtype;
    EXPECT_DOUBLE_EQ(widths.rbegin()->second, p.compute.train_efficiency_by_dtype.at(dtype)) << dtype;
    EXPECT_GT(widths.begin()->second, 0.0) << dtype;
  }
  const int cores = std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
  EXPECT_EQ(p.compute.threads, std::max(1, cores / 2)) << "a rank of a 2-rank job uses cores / 2 threads";
  EXPECT_EQ(p.compute.cores, cores);
  ASSERT_TRUE(p.host_device_GBps.has_value());
  EXPECT_GT(*p.host_device_GBps, 0.0);
  EXPECT_EQ(p.comm.ranks_per_node, 1024) << "every local rank of a CPU host is intra-node";
  EXPECT_EQ(p.comm.measured_world_size, 2);
  EXPECT_EQ(p.comm.intra_node.backend, "gloo");
  ASSERT_TRUE(p.comm.intra_node.ops.count("all_reduce/backend"));
  const analysis::CollectiveCost& ar = p.comm.intra_node.ops.at("all_reduce/backend");
  EXPECT_GT(ar.alpha_us + ar.beta_us_per_byte, 0.0);

  // the side files: the raw benchmark and every measurement behind the profile
  EXPECT_TRUE(fs::exists(profile_path.parent_path() / "comm_bench.json"));
  const auto record = nlohmann::json::parse(read_text(profile_path.parent_path() / "calibration.json"));
  EXPECT_EQ(record.at("ranks"), 2);
  EXPECT_GT(record.at("compute").at("train_step").at("by_dtype").at("float32").at("fwd_bwd_ms").size(), 0u);
  EXPECT_GT(record.at("compute").at("elementwise").at("ms").get<double>(), 0.0);
  EXPECT_NE(read_text(log).find("train_efficiency"), std::string::npos) << "prints a summary";

  // Step 6: overlap_hidden fitted to pairs of training runs, the strategy that overlaps the most against the one
  // that overlaps the least. With each pair's figure (before the clamp to [-1, 1]) the step model's difference
  // between the two runs, each predicted from its recorded command, is the pair's measured difference. (A loaded
  // machine can put the pair's difference below the model's all-hidden one: a figure above 1.)
  const nlohmann::json& fit = record.at("overlap_fit");
  ASSERT_TRUE(p.comm.intra_node.overlap_hidden.has_value());
  const double hidden = *p.comm.intra_node.overlap_hidden, unclamped = fit.at("overlap_hidden_unclamped");
  EXPECT_DOUBLE_EQ(hidden, fit.at("overlap_hidden").get<double>());
  EXPECT_DOUBLE_EQ(hidden, std::clamp(unclamped, -1.0, 1.0));
  const auto config_of = [](const nlohmann::json& run) {  // the run's overrides, from `... --config F k=v ... --out D`
    std::istringstream words(run.at("command").get<std::string>());
    std::vector<std::string> overrides;
    bool in_overrides = false;
    for (std::string w; words >> w;) {
      if (w == "--out") break;
      if (in_overrides) overrides.push_back(w);
      if (w == "--config") words >> w, in_overrides = true;
    }
    EXPECT_FALSE(overrides.empty()) << run.dump();
    return load_config_text("", overrides, 2);
  };
  const Config overlapping = config_of(fit.at("overlapping")), reference = config_of(fit.at("reference"));
  EXPECT_EQ(overlapping.parallel.strategy, fit.at("overlapping").at("strategy").get<std::string>());
  EXPECT_EQ(reference.parallel.strategy, fit.at("reference").at("strategy").get<std::string>());
  EXPECT_GT(fit.at("overlapping").at("overlapped_ms").get<double>(),
            fit.at("reference").at("overlapped_ms").get<double>());
  ASSERT_EQ(fit.at("pairs").size(), 1u) << "--quick runs one pair";
  EXPECT_DOUBLE_EQ(unclamped, fit.at("pairs")[0].at("overlap_hidden_unclamped").get<double>()) << "its median";
  for (const nlohmann::json& pair : fit.at("pairs")) {
    const double figure = pair.at("overlap_hidden_unclamped");
    analysis::MachineProfile as_fitted = p;
    as_fitted.comm.intra_node.overlap_hidden = figure;
    const auto predicted_ms = [&](const Config& c) {
      const analysis::StepPrediction s = analysis::predict_step(c, cost_plan(c, 0), as_fitted);
      return s.compute_ms + s.exposed_comm_ms;
    };
    const double measured = pair.at("overlapping_ms").get<double>() - pair.at("reference_ms").get<double>();
    for (const char* run : {"overlapping", "reference"}) {  // the parts recorded beside each sum are its parts
      const nlohmann::json& phases = pair.at(std::string(run) + "_phases_ms");
      EXPECT_NEAR(phases.at("forward").get<double>() + phases.at("backward").get<double>() +
                      phases.at("comm_wait").get<double>(),
                  pair.at(std::string(run) + "_ms").get<double>(), 1e-9)
          << run;
    }
    const double predicted = predicted_ms(overlapping) - predicted_ms(reference);
    if (figure <= 1.0) {
      EXPECT_NEAR(predicted, measured, 1e-6 * predicted_ms(overlapping)) << pair.dump();
    } else {  // above 1 the model hides all of the overlapped time and no more: the pair differed by less even so
      EXPECT_LT(measured, predicted) << pair.dump();
    }
  }

  // The compute model goes through the points it was fitted to: the step at micro-batch 4 always (its efficiency
  // may pass 1: the matmul benchmark's rate is the unit, not a ceiling), and at micro-batch 1 when the fixed part
  // came out inside its bounds.
  for (const auto& dtypes :
       {std::pair{"float32", "fp32"}, std::pair{"bfloat16", "bf16"}, std::pair{"float16", "fp16"}}) {
    const std::string dtype = dtypes.first, config_dtype = dtypes.second;
    ASSERT_TRUE(p.compute.gemm_overhead_us.count(dtype)) << dtype;
    EXPECT_GE(p.compute.gemm_overhead_us.at(dtype), 0.0) << dtype;
    const nlohmann::json& measured = record.at("compute").at("train_step").at("by_dtype").at(dtype);
    const auto median_of = [](std::vector<double> v) {
      std::sort(v.begin(), v.end());
      return v.size() % 2 ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]);
    };
    const auto predicted_ms = [&](int micro_batch) {
      const std::vector<std::string> overrides = {
          "model.preset=tiny", std::string("precision.param_dtype=").append(config_dtype),
          std::string("train.micro_batch=").append(std::to_string(micro_batch)),
          std::string("train.global_batch=").append(std::to_string(2 * micro_batch))};
      const Config c = load_config_text("", overrides, 2);
      const analysis::ComputeTime t = analysis::compute_time(c, p);
      return t.forward_ms + t.backward_ms;
    };
    const double efficiency = p.compute.train_efficiency_by_dtype.at(dtype);
    EXPECT_DOUBLE_EQ(measured.at("efficiency").get<double>(), efficiency) << dtype;
    const double at_four = median_of(measured.at("fwd_bwd_ms").get<std::vector<double>>());
    EXPECT_NEAR(predicted_ms(4), at_four, 1e-6 * at_four) << dtype << ": efficiency " << efficiency;
    const double at_one = median_of(measured.at("micro_batch_1").at("fwd_bwd_ms").get<std::vector<double>>());
    const double fixed_ms = measured.at("overhead_ms_per_micro_step").get<double>();
    EXPECT_LE(fixed_ms, 0.9 * std::min(at_one, at_four) + 1e-9) << dtype << ": the tokens always cost something";
    if (fixed_ms > 0 && fixed_ms < 0.9 * std::min(at_one, at_four)) {
      EXPECT_NEAR(predicted_ms(1), at_one, 1e-6 * at_one)
          << dtype << ": efficiency " << efficiency << ", fixed " << fixed_ms << " ms, micro-batch 4 " << at_four;
    }
  }
}

// A bf16 config times its own training step (a bf16 calibration once skipped it and measured a 0 ms step, which the
// profile loader refused: the first GPU calibration, which runs in bf16, found it).
TEST(Calibrate, ABf16ConfigTimesItsTrainingStep) {
  TempDir tmp;
  const fs::path profile_path = tmp.path() / "profile.json";
  const fs::path log = tmp.path() / "log.txt";
  ASSERT_EQ(run(kDtlab + " calibrate --quick --ranks 2 --out " + profile_path.string() +
                    " model.preset=tiny precision.param_dtype=bf16",
                log),
            0)
      << read_text(log);
  const analysis::MachineProfile p = analysis::load_profile(profile_path.string());
  ASSERT_TRUE(p.compute.train_efficiency_by_dtype.count("bfloat16")) << read_text(log);
  EXPECT_GT(p.compute.train_efficiency_by_dtype.at("bfloat16"), 0.0);
  EXPECT_DOUBLE_EQ(p.compute.train_efficiency_by_dtype.at("bfloat16"), p.compute.train_efficiency);
  EXPECT_EQ(p.compute.train_efficiency_by_dtype.count("float32"), 0u) << "a bf16 config measures its own dtype";
  std::ifstream in(tmp.path() / "calibration.json");
  const nlohmann::json record = nlohmann::json::parse(in);
  EXPECT_GT(record["compute"]["train_step"]["by_dtype"]["bfloat16"]["fwd_bwd_ms"].size(), 0u);
}

// --dtypes fp32 times fp32 only (make benchmark's cluster calibration: the cluster studies train in fp32); a bf16 run
// predicted from that profile falls back to fp32's rate and says so.
TEST(Calibrate, DtypesLimitWhatIsTimed) {
  TempDir tmp;
  const fs::path profile_path = tmp.path() / "profile.json";
  const fs::path log = tmp.path() / "log.txt";
  ASSERT_EQ(
      run(kDtlab + " calibrate --quick --ranks 2 --dtypes fp32 --out " + profile_path.string() + " model.preset=tiny",
          log),
      0)
      << read_text(log);
  const analysis::MachineProfile p = analysis::load_profile(profile_path.string());
  EXPECT_EQ(p.compute.matmul_tflops.size(), 1u) << read_text(log);
  EXPECT_EQ(p.compute.matmul_tflops.count("float32"), 1u);
  EXPECT_EQ(p.compute.train_efficiency_by_dtype.count("bfloat16"), 0u);
  Config bf16;  // the tiny shape
  bf16.precision.param_dtype = "bf16";
  std::vector<std::string> notes;
  EXPECT_GT(analysis::achieved_tflops(bf16, p, &notes), 0.0);
  const bool said = std::any_of(notes.begin(), notes.end(), [](const std::string& n) {
    return n.find("used its float32 rate") != std::string::npos;
  });
  EXPECT_TRUE(said) << "the fallback is stated in the prediction's notes";
}

TEST(Calibrate, DtypesNeedFp32AndTheConfigsOwn) {
  EXPECT_EQ(calibration_dtypes({}, "fp32").size(), 3u) << "all three by default";
  EXPECT_EQ(calibration_dtypes({"bf16", "fp32"}, "bf16"), (std::vector<Dtype>{Dtype::fp32, Dtype::bf16}));
  EXPECT_THROW(calibration_dtypes({"bf16"}, "bf16"), ConfigError) << "no fp32 to fall back to";
  EXPECT_THROW(calibration_dtypes({"fp32"}, "bf16"), ConfigError) << "the config's own dtype left out";
  try {
    calibration_dtypes({"fp32", "int8"}, "fp32");
    FAIL() << "int8 accepted";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("--dtypes 'int8'"), std::string::npos) << e.what();
  }
}

// A pair's figure: the runs' measured difference against the model's (base difference plus the overlapped time not
// hidden). The overlapping run's base is 10 ms under the reference's, and it overlaps 30 ms more.
TEST(Calibrate, AnOverlapPairSolvesForTheShareHidden) {
  const OverlapRunPlan overlapping{.strategy = "fsdp_full_shard", .overrides = {}, .base_ms = 500, .overlapped_ms = 31};
  const OverlapRunPlan reference{.strategy = "ddp", .overrides = {}, .base_ms = 510, .overlapped_ms = 1};
  EXPECT_DOUBLE_EQ(overlap_hidden_of_pair(overlapping, reference, 500, 510), 1.0) << "10 ms faster: all hidden";
  EXPECT_DOUBLE_EQ(overlap_hidden_of_pair(overlapping, reference, 530, 510), 0.0) << "20 ms slower: none hidden";
  EXPECT_DOUBLE_EQ(overlap_hidden_of_pair(overlapping, reference, 545, 510), -0.5) << "15 ms more than none hidden";
  EXPECT_DOUBLE_EQ(overlap_hidden_of_pair(overlapping, reference, 1030, 1010), 0.0) << "a drift both runs share";
  EXPECT_THROW(overlap_hidden_of_pair(overlapping, overlapping, 530, 510), std::invalid_argument);
}

TEST(Calibrate, RefusesOneRankAndPredictionOnlyShapes) {
  TempDir tmp;
  const fs::path log = tmp.path() / "log.txt";
  EXPECT_NE(run(kDtlab + " calibrate --quick --ranks 1 --out " + (tmp.path() / "p.json").string(), log), 0);
  EXPECT_NE(read_text(log).find("--ranks 1 must be >= 2"), std::string::npos) << read_text(log);
  EXPECT_NE(run(kDtlab + " calibrate --quick --out " + (tmp.path() / "p.json").string() + " model.preset=7b", log), 0);
  EXPECT_NE(read_text(log).find("prediction-only"), std::string::npos) << read_text(log);
  EXPECT_NE(run(kDtlab + " calibrate --quick --nodes 2 --ranks 2 --out " + (tmp.path() / "p.json").string(), log), 0);
  EXPECT_NE(read_text(log).find("--nodes 2 needs --inter-link RATE"), std::string::npos) << read_text(log);
  // No GPU on this machine (GPU machines run tests/gpu/gpu_check.sh): the device is refused before any measuring.
  EXPECT_NE(run(kDtlab + " calibrate --quick --out " + (tmp.path() / "p.json").string() + " train.device=cuda", log),
            0);
  EXPECT_NE(read_text(log).find("train.device"), std::string::npos) << read_text(log);
  EXPECT_EQ(read_text(log).find("GEMM on the model's shapes"), std::string::npos) << read_text(log);
  EXPECT_FALSE(fs::exists(tmp.path() / "p.json"));
}

TEST(Calibrate, ThreadsFollowTheTrainerRule) {
  Config c;
  const int cores = std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
  EXPECT_EQ(calibration_threads(c, 1), cores);
  EXPECT_EQ(calibration_threads(c, 2), std::max(1, cores / 2));
  EXPECT_EQ(calibration_threads(c, 64), 1);
  c.train.threads = 3;
  EXPECT_EQ(calibration_threads(c, 2), 3) << "train.threads wins, as in configure_threads";
}

}  // namespace
}  // namespace dtlab
