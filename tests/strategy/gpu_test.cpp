// gpu_test.cpp: the GPU training path (train.device=cuda) over real processes — `dtlab train` on one GPU against the
// CPU reference, every strategy at world 2 with both ranks sharing the GPU over Gloo against the single-GPU run,
// NCCL at world 1 (and at world 2 when two GPUs are visible), CUPTI kernel events in the trace, and bf16 on the
// device. Every case skips with its reason in the cpu configuration and on a machine without a CUDA device.
//
// Tolerances. GPU kernels (cuBLAS GEMMs, fused attention) sum in other orders than the CPU's, so the GPU run is held
// to the CPU reference within kCpuTolerance relative per step over 8 AdamW steps; the strategies on the GPU are
// held to the single-GPU run within kStrategyTolerance (the same kernels; only the collectives' summation order
// differs). TF32 stays off (LibTorch's default), so fp32 GEMMs are fp32.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "lab/instrument/trace.hpp"
#include "lab/train/device.hpp"
#include "strategies/catalog.hpp"
#include "tests/strategy/job.hpp"

namespace dtlab {
namespace {

namespace fs = std::filesystem;
const std::string kBin = std::string(DTLAB_BINARY_DIR) + "/bin/";
const std::string kConfig = std::string(DTLAB_SOURCE_DIR) + "/tests/strategy/tiny_ddp.yaml";
constexpr double kCpuTolerance = 2e-3;
constexpr double kStrategyTolerance = 1e-3;

// Why GPU cases cannot run here, or "" when they can.
std::string no_gpu_reason() {
#ifndef DTLAB_WITH_CUDA
  return "cpu build: the GPU path runs in the cuda configuration (make test-cuda) on a machine with a GPU";
#else
  if (cuda_device_count() == 0) return "no CUDA device visible: GPU training cases need one";
  return "";
#endif
}

#define SKIP_WITHOUT_GPU()                                                          \
  do {                                                                              \
    if (const std::string why = no_gpu_reason(); !why.empty()) GTEST_SKIP() << why; \
  } while (0)

struct TrainRun {
  nlohmann::json result;
  std::vector<double> losses;
  std::string output;
};

// `dtlab train` on tiny (8 steps), under `dtlab launch -n world` when world > 0.
TrainRun train(const std::string& label, int world, std::vector<std::string> overrides) {
  const fs::path out = fs::temp_directory_path() / ("dtlab_gpu_" + label);
  fs::remove_all(out);
  std::vector<std::string> args;
  if (world > 0) args = {kBin + "dtlab", "launch", "-n", std::to_string(world)};
  for (const std::string& a :
       {kBin + "dtlab", std::string("train"), std::string("--config"), kConfig, std::string("--out"), out.string()})
    args.push_back(a);
  for (const char* a : {"train.steps=8", "train.threads=2", "instrument.warmup_steps=0"}) args.emplace_back(a);
  args.insert(args.end(), overrides.begin(), overrides.end());
  const auto job = testing::run_job(args, 300);
  TrainRun run;
  run.output = job.output;
  EXPECT_EQ(job.exit_code, 0) << label << ":\n" << job.output;
  std::ifstream in(out / "result.json");
  if (!in.good()) {
    ADD_FAILURE() << label << ": no result.json in " << out << "\n" << job.output;
    return run;
  }
  run.result = nlohmann::json::parse(in);
  for (const auto& step : run.result.at("steps")) run.losses.push_back(step.at("loss").get<double>());
  return run;
}

void expect_same_losses(const TrainRun& reference, const TrainRun& run, double tolerance, const std::string& what) {
  ASSERT_EQ(run.losses.size(), reference.losses.size()) << what;
  ASSERT_FALSE(run.losses.empty()) << what;
  for (size_t i = 0; i < run.losses.size(); ++i)
    EXPECT_NEAR(run.losses[i], reference.losses[i], tolerance * std::max(1.0, std::abs(reference.losses[i])))
        << what << ": step " << i + 1;
}

std::string device_of(const TrainRun& run) { return run.result.at("context").value("device", ""); }

const TrainRun& single_gpu_reference() {
  static const TrainRun run = train("single_gpu", 0, {"parallel.strategy=single", "train.device=cuda"});
  return run;
}

TEST(GpuTraining, ASingleGpuRunMatchesTheCpuReference) {
  SKIP_WITHOUT_GPU();
  const TrainRun cpu = train("single_cpu", 0, {"parallel.strategy=single", "train.device=cpu"});
  const TrainRun& gpu = single_gpu_reference();
  EXPECT_EQ(device_of(cpu), "cpu");
  EXPECT_EQ(device_of(gpu).rfind("cuda:0 (", 0), 0u) << device_of(gpu);
  expect_same_losses(cpu, gpu, kCpuTolerance, "single GPU vs CPU");
  // The device's memory comes from the caching allocator, and MFU from the device's spec-sheet peak.
  EXPECT_TRUE(gpu.result.at("memory").contains("cuda")) << gpu.result.at("memory").dump();
  EXPECT_NE(gpu.result.at("summary").value("mfu_peak_source", "").find("spec-sheet"), std::string::npos);
  // Device memory by category (lab/device_memory.hpp): the parameters (and RoPE's small tables, made with them) and
  // the optimizer state are what the strategy says it holds; activations peaked above zero; the categories together
  // hold no more than the allocator's allocated bytes (its blocks are rounded up).
  const nlohmann::json& memory = gpu.result.at("memory");
  ASSERT_TRUE(memory.at("cuda").contains("measured")) << memory.dump();
  const nlohmann::json& measured = memory.at("cuda").at("measured");
  const auto near = [&](const char* category, const char* state) {
    const auto held = measured.at(category).at("current_bytes").get<int64_t>();
    const auto says = memory.at(state).get<int64_t>();
    EXPECT_GE(held, says) << category << ": " << memory.dump();
    EXPECT_LE(held, says + says / 50 + (64 << 10)) << category << ": " << memory.dump();
  };
  near("params", "params_bytes");
  near("optimizer", "optimizer_bytes");
  EXPECT_GT(measured.at("activations").at("peak_bytes").get<int64_t>(), 0) << memory.dump();
  int64_t held = 0;
  for (const auto& [category, counts] : measured.items()) held += counts.at("current_bytes").get<int64_t>();
  EXPECT_LE(held, memory.at("cuda").at("allocated_bytes").get<int64_t>()) << memory.dump();
}

TEST(GpuTraining, AutoPicksTheGpuAndCpuStaysAvailable) {
  SKIP_WITHOUT_GPU();
  const TrainRun autod = train("auto", 0, {"parallel.strategy=single"});  // train.device defaults to auto
  EXPECT_EQ(device_of(autod).rfind("cuda:", 0), 0u) << device_of(autod);
  expect_same_losses(single_gpu_reference(), autod, 0.0, "auto vs cuda");  // the same device, the same kernels
}

class GpuStrategies : public ::testing::TestWithParam<std::string> {};

TEST_P(GpuStrategies, TwoRanksSharingOneGpuOverGlooMatchTheSingleGpuRun) {
  SKIP_WITHOUT_GPU();
  const std::string& strategy = GetParam();
  std::vector<std::string> overrides = {"parallel.strategy=" + strategy, "train.device=cuda", "parallel.backend=auto"};
  const TrainRun run = train("w2_" + strategy, 2, overrides);
  // auto on one GPU with two ranks: Gloo (NCCL refuses two ranks on one device), recorded as chosen.
  EXPECT_EQ(run.result.at("config").at("parallel").at("backend"), "gloo");
  EXPECT_EQ(device_of(run).rfind("cuda:0", 0), 0u) << device_of(run);
  expect_same_losses(single_gpu_reference(), run, kStrategyTolerance, strategy + " at world 2 on one GPU");
}

std::vector<std::string> distributed_strategies() {
  std::vector<std::string> ids;
  for (const StrategySpec* spec : strategy_specs())
    if (spec->id != kReferenceStrategy) ids.push_back(std::string(spec->id));
  return ids;
}

INSTANTIATE_TEST_SUITE_P(EveryStrategy, GpuStrategies, ::testing::ValuesIn(distributed_strategies()),
                         [](const auto& info) { return info.param; });

TEST(GpuTraining, FullShardWithOffloadAndBf16MastersTrains) {
  SKIP_WITHOUT_GPU();
  // Offload: masters, their gradients and optimizer state in pinned host buffers; bf16 masters: the stochastic
  // rounding kernel on the device (no offload). Both must train (finite, falling losses) on the GPU.
  for (const auto& extra : std::vector<std::vector<std::string>>{
           {"parallel.offload=true"},
           {"precision.param_dtype=bf16", "precision.master_dtype=bf16", "precision.stochastic_rounding=true"}}) {
    std::vector<std::string> overrides = {"parallel.strategy=fsdp_full_shard", "train.device=cuda"};
    overrides.insert(overrides.end(), extra.begin(), extra.end());
    const TrainRun run = train("w2_modifier_" + std::to_string(extra.size()), 2, overrides);
    ASSERT_FALSE(run.losses.empty()) << extra.front();
    for (double loss : run.losses) EXPECT_TRUE(std::isfinite(loss)) << extra.front();
    EXPECT_LT(run.losses.back(), run.losses.front()) << extra.front();
    if (extra.size() == 1) expect_same_losses(single_gpu_reference(), run, kStrategyTolerance, "offload on a GPU");
  }
}

// Offloaded shards on a GPU: each reduced gradient comes back to its pinned host shard on a copy stream, added one
// unit later (strategies/sharded/schedule.hpp). At world 1 (no collective: the copy stream alone) FULL_SHARD runs
// 2 micro-steps (added every micro-step); SHARD_GRAD_OP at world 2 runs 2 micro-steps and copies on the last. Both
// must give the single-GPU run's losses: a gradient added late, twice or never would not.
TEST(GpuTraining, OffloadedGradientsComeBackOnTheCopyStream) {
  SKIP_WITHOUT_GPU();
  const TrainRun one =
      train("offload_w1", 1, {"parallel.strategy=fsdp_full_shard", "train.device=cuda", "parallel.offload=true"});
  expect_same_losses(single_gpu_reference(), one, kStrategyTolerance, "full_shard with offload at world 1");
  const TrainRun sgo = train(
      "offload_sgo_w2", 2,
      {"parallel.strategy=fsdp_shard_grad_op", "train.device=cuda", "parallel.offload=true", "train.micro_batch=2"});
  expect_same_losses(single_gpu_reference(), sgo, kStrategyTolerance, "shard_grad_op with offload, 2 micro-steps");
}

TEST(GpuTraining, NcclCarriesAWorldOfOneAndOfTwoWhenThereAreTwoGpus) {
  SKIP_WITHOUT_GPU();
  const TrainRun one = train("nccl_w1", 1, {"parallel.strategy=ddp", "train.device=cuda", "parallel.backend=nccl"});
  EXPECT_EQ(one.result.at("config").at("parallel").at("backend"), "nccl");
  expect_same_losses(single_gpu_reference(), one, kStrategyTolerance, "ddp over NCCL at world 1");
  if (cuda_device_count() < 2) GTEST_SKIP() << "world 2 over NCCL needs two GPUs; this machine has one";
  const TrainRun two = train("nccl_w2", 2, {"parallel.strategy=fsdp_full_shard", "train.device=cuda"});
  EXPECT_EQ(two.result.at("config").at("parallel").at("backend"), "nccl");  // auto: a GPU per rank
  expect_same_losses(single_gpu_reference(), two, kStrategyTolerance, "full_shard over NCCL at world 2");
}

TEST(GpuTraining, CuptiKernelEventsAreInTheRanksTrace) {
  SKIP_WITHOUT_GPU();
  const TrainRun run = train(
      "cupti", 0, {"parallel.strategy=single", "train.device=cuda", "instrument.trace=true", "instrument.cupti=on"});
  const fs::path out = fs::temp_directory_path() / "dtlab_gpu_cupti";
  const nlohmann::json trace = read_trace((out / "rank0" / "trace.json.gz").string());
  int kernels = 0;
  for (const auto& e : trace.at("traceEvents"))
    if (e.value("cat", "") == "kernel") ++kernels;
  EXPECT_GT(kernels, 0) << "no CUPTI kernel events in the trace";
  EXPECT_EQ(run.result.at("summary").value("phase_clock", ""), "cuda_events");
}

TEST(GpuTraining, Bf16TrainsNativelyOnTheDevice) {
  SKIP_WITHOUT_GPU();
  const TrainRun run =
      train("bf16", 0, {"parallel.strategy=single", "train.device=cuda", "precision.param_dtype=bf16"});
  ASSERT_FALSE(run.losses.empty());
  expect_same_losses(single_gpu_reference(), run, 0.05, "bf16 compute vs fp32 on the GPU");
  // The tolerance is wide enough that a model that never moved could sit inside it: it must also learn.
  EXPECT_LT(run.losses.back(), run.losses.front() - 0.05) << "bf16 on the GPU did not train";
  EXPECT_NE(run.result.at("context").value("attention", ""), "") << "which SDPA kernel ran is recorded";
}

// NVTX ranges reach an NVTX tool: tests/strategy/nvtx_recorder.cpp, loaded the way Nsight Systems loads its own, logs
// every pushed range. NVTX needs no GPU, so this runs wherever the cuda configuration is built (a CPU DDP job here).
TEST(Nvtx, PhasesAndCollectivesAreRangesAnNvtxToolSees) {
#ifndef DTLAB_NVTX_RECORDER
  GTEST_SKIP() << "cpu build: NVTX ranges are compiled in the cuda configuration only";
#else
  const fs::path log = fs::temp_directory_path() / "dtlab_nvtx_ranges.txt";
  fs::remove(log);
  const fs::path out = fs::temp_directory_path() / "dtlab_gpu_nvtx";
  const auto job =
      testing::run_job({kBin + "dtlab", "launch", "-n", "2", kBin + "dtlab", "train", "--config", kConfig, "--out",
                        out.string(), "train.steps=2", "train.device=cpu", "train.threads=1"},
                       120, {"NVTX_INJECTION64_PATH=" DTLAB_NVTX_RECORDER, "DTLAB_NVTX_LOG=" + log.string()});
  ASSERT_EQ(job.exit_code, 0) << job.output;
  std::ifstream in(log);
  ASSERT_TRUE(in.good()) << "the NVTX tool was never loaded: no " << log;
  std::set<std::string> names;
  for (std::string line; std::getline(in, line);) names.insert(line.substr(0, line.find(' ')));
  for (const char* expected : {"forward-compute", "backward-compute", "optimizer-step", "grads-all-reduce"})
    EXPECT_EQ(names.count(expected), 1u) << expected
                                         << " was never pushed; pushed: " << ::testing::PrintToString(names);
  // With instrument.nvtx=false nothing is pushed.
  fs::remove(log);
  const auto quiet =
      testing::run_job({kBin + "dtlab", "train", "--config", kConfig, "--out", out.string(), "parallel.strategy=single",
                        "train.steps=2", "train.device=cpu", "instrument.nvtx=false"},
                       120, {"NVTX_INJECTION64_PATH=" DTLAB_NVTX_RECORDER, "DTLAB_NVTX_LOG=" + log.string()});
  ASSERT_EQ(quiet.exit_code, 0) << quiet.output;
  EXPECT_FALSE(fs::exists(log) && fs::file_size(log) > 0) << "instrument.nvtx=false still pushed ranges";
#endif
}

TEST(GpuTraining, CudaInACpuBuildOrWithoutADeviceIsAClearError) {
  if (no_gpu_reason().empty()) GTEST_SKIP() << "this machine has a GPU: the refusal is for machines without one";
  const fs::path out = fs::temp_directory_path() / "dtlab_gpu_refused";
  const auto job = testing::run_job(
      {kBin + "dtlab", "train", "--config", kConfig, "--out", out.string(), "train.device=cuda", "train.steps=2"}, 60);
  EXPECT_NE(job.exit_code, 0);
  EXPECT_NE(job.output.find("train.device=cuda"), std::string::npos) << job.output;
}

}  // namespace
}  // namespace dtlab
