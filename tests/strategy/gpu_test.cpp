// gpu_test.cpp: the GPU training path (train.device=cuda) over real processes — `dtlab train` on one GPU against the
// CPU reference, every strategy at world 2 with both ranks sharing the GPU over Gloo against the single-GPU run,
// tensor and pipeline parallelism the same way (and over NCCL with two GPUs), NCCL at world 1 (and at world 2 when
// two GPUs are visible), CUPTI kernel events in the trace, and bf16 on the device. Every case skips with its reason in
// the cpu configuration and on a machine without a CUDA device.
//
// Every parity case compares both the loss and the pre-clip gradient norm of every step (tests/strategy/
// parity_check.hpp, shared with the CPU proof in parity_check_test.cpp). Tolerances: GPU kernels (cuBLAS GEMMs,
// fused attention) sum in other orders than the CPU's, so the GPU run is held to the CPU reference within
// kCpuTolerance relative per step over 8 AdamW steps; the strategies on the GPU are held to the single-GPU run within
// kStrategyTolerance (the same kernels; only the collectives' summation order differs). TF32 stays off (LibTorch's
// default), so fp32 GEMMs are fp32. bf16 runs are held to their reference by the derived bf16 rule
// (testing::bf16_tolerance). One case trains under SGD without clipping, where a wrong gradient scale also moves
// the parameters.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <ostream>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "lab/device.hpp"
#include "lab/instrument/trace.hpp"
#include "strategies/catalog.hpp"
#include "tests/strategy/job.hpp"
#include "tests/strategy/parity_check.hpp"

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

using testing::TrainRun;

// `dtlab train` of tiny (8 steps), under `dtlab launch -n world` when world > 0.
TrainRun train(const std::string& label, int world, const std::vector<std::string>& overrides) {
  return testing::train_tiny("gpu_" + label, world, overrides);
}

const testing::ParityTolerance kCpu =
    testing::relative_tolerance(kCpuTolerance, "cuBLAS and fused attention vs the CPU's kernels, fp32, TF32 off");
const testing::ParityTolerance kStrategy =
    testing::relative_tolerance(kStrategyTolerance, "the same kernels, another collective summation order");

std::string device_of(const TrainRun& run) { return run.result.at("context").value("device", ""); }

const TrainRun& single_gpu_reference() {
  static const TrainRun run = train("single_gpu", 0, {"parallel.strategy=single", "train.device=cuda"});
  return run;
}

const TrainRun& single_gpu_bf16_reference() {
  static const TrainRun run =
      train("single_gpu_bf16", 0, {"parallel.strategy=single", "train.device=cuda", "precision.param_dtype=bf16"});
  return run;
}

TEST(GpuTraining, ASingleGpuRunMatchesTheCpuReference) {
  SKIP_WITHOUT_GPU();
  const TrainRun cpu = train("single_cpu", 0, {"parallel.strategy=single", "train.device=cpu"});
  const TrainRun& gpu = single_gpu_reference();
  EXPECT_EQ(device_of(cpu), "cpu");
  EXPECT_EQ(device_of(gpu).rfind("cuda:0 (", 0), 0u) << device_of(gpu);
  testing::expect_parity(cpu, gpu, kCpu, "single GPU vs CPU");
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
  testing::expect_parity(single_gpu_reference(), autod,
                         testing::relative_tolerance(0.0, "the same device, the same kernels"), "auto vs cuda");
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
  testing::expect_parity(single_gpu_reference(), run, kStrategy, strategy + " at world 2 on one GPU");
}

std::vector<std::string> distributed_strategies() {
  std::vector<std::string> ids;
  for (const StrategySpec* spec : strategy_specs())
    if (spec->id != kReferenceStrategy) ids.push_back(std::string(spec->id));
  return ids;
}

INSTANTIATE_TEST_SUITE_P(EveryStrategy, GpuStrategies, ::testing::ValuesIn(distributed_strategies()),
                         [](const auto& info) { return info.param; });

// The mesh's model-parallel dimensions on a device: tensor parallel (alone and with sequence parallel) and a 1F1B
// pipeline of two stages (tiny's global batch of 8 in micro-batches of 4: m = P = 2). Two ranks sharing one GPU talk
// over Gloo (auto); with a GPU per rank the tp and pp groups are NCCL communicators (auto). Held to the single-GPU run
// like the strategies: the split matmuls and the stages change only summation order.
struct GpuMeshCase {
  std::string label;
  std::vector<std::string> overrides;
};

// Readable parameters in test logs (instead of gtest's byte dump).
void PrintTo(const GpuMeshCase& c, std::ostream* os) { *os << c.label; }

class GpuMesh : public ::testing::TestWithParam<GpuMeshCase> {};

TEST_P(GpuMesh, TwoRanksOverGlooOnOneGpuAndOverNcclOnTwoMatchTheSingleGpuRun) {
  SKIP_WITHOUT_GPU();
  const GpuMeshCase& c = GetParam();
  std::vector<std::string> overrides = {"parallel.strategy=ddp", "train.device=cuda", "parallel.backend=auto"};
  overrides.insert(overrides.end(), c.overrides.begin(), c.overrides.end());
  // One visible GPU for both ranks, whatever the machine has.
  const TrainRun shared = testing::train_tiny("gpu_mesh_shared_" + c.label, 2, overrides, {"CUDA_VISIBLE_DEVICES=0"});
  EXPECT_EQ(shared.result.at("config").at("parallel").at("backend"), "gloo");
  testing::expect_parity(single_gpu_reference(), shared, kStrategy, c.label + " at world 2 on one GPU");
  if (cuda_device_count() < 2) GTEST_SKIP() << "a GPU per rank (NCCL for the tp and pp groups) needs two GPUs";
  const TrainRun own = train("mesh_nccl_" + c.label, 2, overrides);
  EXPECT_EQ(own.result.at("config").at("parallel").at("backend"), "nccl");
  testing::expect_parity(single_gpu_reference(), own, kStrategy, c.label + " over NCCL, a GPU per rank");
}

INSTANTIATE_TEST_SUITE_P(ModelParallel, GpuMesh,
                         ::testing::Values(GpuMeshCase{"tp2", {"parallel.tp=2"}},
                                           GpuMeshCase{"tp2_sp", {"parallel.tp=2", "parallel.sequence_parallel=true"}},
                                           GpuMeshCase{"pp2_1f1b", {"parallel.pp=2", "parallel.pp_schedule=1f1b"}}),
                         [](const auto& info) { return info.param.label; });

// Offload: masters, their gradients and optimizer state in pinned host buffers, held to the single-GPU run. bf16
// masters: the stochastic rounding kernel on the device (no offload), held by the bf16 rule to the single-GPU bf16
// run with fp32 masters (as the CPU parity suite holds its SR cases to a reference with fp32 masters).
TEST(GpuTraining, FullShardWithOffloadAndBf16MastersTrains) {
  SKIP_WITHOUT_GPU();
  const TrainRun offload =
      train("w2_offload", 2, {"parallel.strategy=fsdp_full_shard", "train.device=cuda", "parallel.offload=true"});
  testing::expect_parity(single_gpu_reference(), offload, kStrategy, "full_shard with offload on a GPU");
  const TrainRun masters =
      train("w2_bf16_masters", 2,
            {"parallel.strategy=fsdp_full_shard", "train.device=cuda", "precision.param_dtype=bf16",
             "precision.master_dtype=bf16", "precision.stochastic_rounding=true"});
  testing::expect_parity(single_gpu_bf16_reference(), masters, testing::bf16_tolerance(single_gpu_bf16_reference()),
                         "full_shard with bf16 masters (stochastic rounding) on a GPU");
  ASSERT_FALSE(masters.steps.loss.empty());
  EXPECT_LT(masters.steps.loss.back(), masters.steps.loss.front()) << "bf16 masters on the GPU did not train";
}

// SGD without clipping: a wrong gradient scale moves the parameters too, not only the norm. FULL_SHARD at world 2 on
// one GPU in bf16 (DDP computes in fp32 only) against the single-GPU bf16 run, by the bf16 rule: the case that
// parity_check_test.cpp runs on the CPU, where it passes and where the same rule rejects it with the world factor
// dropped.
TEST(GpuTraining, SgdWithoutClippingInBf16MatchesTheSingleGpuRun) {
  SKIP_WITHOUT_GPU();
  std::vector<std::string> single = testing::sgd_without_clipping_bf16();
  single.insert(single.end(), {"parallel.strategy=single", "train.device=cuda"});
  std::vector<std::string> sharded = testing::sgd_without_clipping_bf16();
  sharded.insert(sharded.end(), {"parallel.strategy=fsdp_full_shard", "train.device=cuda", "parallel.backend=gloo"});
  const TrainRun reference = train("sgd_bf16_single", 0, single);
  testing::expect_parity(reference, train("sgd_bf16_full_shard_w2", 2, sharded), testing::bf16_tolerance(reference),
                         "full_shard at world 2, bf16, SGD without clipping, on one GPU");
}

// Offloaded shards on a GPU: each reduced gradient comes back to its pinned host shard on a copy stream, added one
// unit later (strategies/sharded/schedule.hpp). At world 1 (no collective: the copy stream alone) FULL_SHARD runs
// 2 micro-steps (added every micro-step); SHARD_GRAD_OP at world 2 runs 2 micro-steps and copies on the last. Both
// must give the single-GPU run's losses: a gradient added late, twice or never would not.
TEST(GpuTraining, OffloadedGradientsComeBackOnTheCopyStream) {
  SKIP_WITHOUT_GPU();
  const TrainRun one =
      train("offload_w1", 1, {"parallel.strategy=fsdp_full_shard", "train.device=cuda", "parallel.offload=true"});
  testing::expect_parity(single_gpu_reference(), one, kStrategy, "full_shard with offload at world 1");
  const TrainRun sgo = train(
      "offload_sgo_w2", 2,
      {"parallel.strategy=fsdp_shard_grad_op", "train.device=cuda", "parallel.offload=true", "train.micro_batch=2"});
  testing::expect_parity(single_gpu_reference(), sgo, kStrategy, "shard_grad_op with offload, 2 micro-steps");
}

TEST(GpuTraining, NcclCarriesAWorldOfOneAndOfTwoWhenThereAreTwoGpus) {
  SKIP_WITHOUT_GPU();
  const TrainRun one = train("nccl_w1", 1, {"parallel.strategy=ddp", "train.device=cuda", "parallel.backend=nccl"});
  EXPECT_EQ(one.result.at("config").at("parallel").at("backend"), "nccl");
  testing::expect_parity(single_gpu_reference(), one, kStrategy, "ddp over NCCL at world 1");
  if (cuda_device_count() < 2) GTEST_SKIP() << "world 2 over NCCL needs two GPUs; this machine has one";
  const TrainRun two = train("nccl_w2", 2, {"parallel.strategy=fsdp_full_shard", "train.device=cuda"});
  EXPECT_EQ(two.result.at("config").at("parallel").at("backend"), "nccl");  // auto: a GPU per rank
  testing::expect_parity(single_gpu_reference(), two, kStrategy, "full_shard over NCCL at world 2");
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

// bf16 compute against the same run in fp32, by the bf16 rule (a bf16 run differs from its fp32 twin by its own
// roundings); it must also learn.
TEST(GpuTraining, Bf16TrainsNativelyOnTheDevice) {
  SKIP_WITHOUT_GPU();
  const TrainRun& run = single_gpu_bf16_reference();
  testing::expect_parity(single_gpu_reference(), run, testing::bf16_tolerance(run), "bf16 compute vs fp32 on the GPU");
  ASSERT_FALSE(run.steps.loss.empty());
  EXPECT_LT(run.steps.loss.back(), run.steps.loss.front() - 0.05) << "bf16 on the GPU did not train";
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
