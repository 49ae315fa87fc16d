// calibrate.hpp: `dtlab calibrate` — measure this machine and write the machine profile the cost models use.
//
//   dtlab calibrate --out results/calibration/profile.json             # ~2-3 min on 2 cores
//   dtlab calibrate --out /tmp/p.json --ranks 2 --quick                # seconds: fewer sizes and repeats
//   dtlab calibrate --out p.json --config scenarios/configs/sharding.yaml train.micro_batch=2
//
// What it measures, in this order, and what each figure becomes in the profile (analysis/cost/profile.hpp):
//   1. GEMMs on the model's real shapes (every linear of a block, forward and both backward products, and the
//      head), per dtype float32 | bfloat16 | float16, weighted as the model weights them (n_layers blocks + one
//      head) -> compute.matmul_tflops.<dtype>
//   2. a short training step of the same shape with the single strategy (warm-up steps excluded), at the config's
//      micro-batch B and at micro-batch 1 (and at half the width, below), one step of each in turn so that all see
//      the same machine: the line t(T) = fixed + T·k through the two forward + backward medians
//      -> compute.gemm_overhead_us (fixed / linear layers), and the model FLOP rate of the part that grows with
//      the tokens (6N + 12·L·h·s per token) over the matmul rate of the config's dtype
//      -> compute.train_efficiency; for an fp32 config the same in bf16 and fp16 -> compute.train_efficiency_by_dtype;
//      each dtype's step again at half the width (d_model, ffn_hidden) -> compute.train_efficiency_by_width
//   3. the rest of that step (gradient norm, scaling, AdamW): the step model's elementwise_bytes() of it over its
//      measured time -> compute.memory_GBps, so the predicted optimizer time reproduces the measured one (the
//      lab's AdamW alone on a flat tensor is measured too, as a record in calibration.json)
//   Steps 1-3 run with ranks - 1 companion processes (`dtlab calibrate --compute-only`) doing the same work at
//   the same time: the ranks of a job share cores, caches and memory bandwidth, and the studies measure that.
//   4. a host-to-host copy of the model's fp32 parameters -> host_device_GBps (what offload costs on CPU)
//   5. `<this exe> comm-bench --ranks N -b 1K -e 256M -f 4 ... --json <dir>/comm_bench.json` as a child process,
//      then fit_comm_model (analysis/cost/fit.hpp) -> comm.intra_node (α, β, γ per op and algorithm, and
//      overlap_hidden from comm-bench's overlap line).
//      With --nodes M (ranks K per node, --inter-link R): comm-bench on the emulated cluster, `--group node` ->
//      comm.intra_node (comm_bench.json; a 2-rank loopback run when K = 1) and `--group cross` (1 KiB-64 MiB: the
//      slow link) -> comm.inter_node (comm_bench_inter.json), both levels fitted alike:
//        dtlab calibrate --out p.json --nodes 2 --ranks 2 --inter-link 1gbit
//   6. on a CPU host (one node): pairs of short training runs (`dtlab launch -n N dtlab train`, 12 steps; 3 pairs,
//      1 of 4 steps with --quick), run in turn: the strategy of this build that the step model says overlaps the
//      most communication with compute at the config (FULL_SHARD at `small`), and the one that overlaps the least
//      (DDP, the whole model in one bucket) -> comm.intra_node.overlap_hidden, replacing comm-bench's line. Per
//      pair: 1 - ((M_o - M_r) - (B_o - B_r)) / (O_o - O_r), where M is a run's forward+backward+comm_wait medians,
//      B the step model's compute and exposed communication without the overlapped calls, and O what the schedule
//      overlaps; the median over the pairs, clamped to [-1, 1]. The pair's difference cancels a compute rate that
//      drifted since steps 1-3. Below 0, an overlapped collective costs the step more than its own time (Gloo's
//      threads take cores, caches and memory bandwidth from the forward and backward). The runs and their figures
//      are in calibration.json (overlap_fit); their directories are removed (lab/tools/calibrate_overlap.hpp).
// On a GPU (train.device=cuda, or auto in a cuda build that sees one): steps 1-3 on the GPU (each timed part ends
// with a device synchronize), step 4 copies pinned host memory to the GPU (and records the GPU's own copy rate), and
// step 5 runs comm-bench on GPU buffers with the backend training would pick (NCCL with a GPU per rank, else Gloo
// staged through pinned host memory). The profile then names the GPU and holds per-GPU rates (no threads or cores):
//   dtlab calibrate --out gpu.json --ranks 2 --config tests/strategy/tiny_ddp.yaml model.preset=125m
//       train.device=cuda precision.param_dtype=bf16 train.micro_batch=8 train.global_batch=16   (one line)
// Threads: compute is measured with the thread count a rank of an N-rank job uses (train.threads, else
// cores / N, as configure_threads does), recorded as compute.threads; the profile holds for that count.
// Shapes: the config's model and per-rank micro-batch (default: `small`, micro_batch 4 — the sharding study).
// Files: the profile at --out, and next to it comm_bench.json (the raw benchmark) and calibration.json (every
// measurement behind the profile: per-shape GEMM times, step times, repeats).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "lab/config.hpp"
#include "lab/dtype.hpp"
#include "lab/train/strategy.hpp"

namespace dtlab {

// Creates a strategy by id. The tools link the runtime and the cost models, not the strategies' runtime
// (dtlab_strategies): the CLI passes strategies/registry.hpp's make_strategy.
using StrategyFactory = std::function<std::unique_ptr<Strategy>(const std::string& id)>;

struct CalibrateOptions {
  std::string out_path;     // the machine profile to write (parent directories are created)
  int ranks = 2;            // ranks of the jobs calibrated for: comm-bench's world and the per-rank thread count
  bool quick = false;       // fewer message sizes and repeats (tests); the figures are noisier
  std::string config_path;  // shapes and micro-batch to calibrate on; "" = small, micro_batch 4
  std::vector<std::string> overrides;  // section.key=value on top of it
  std::string command;                 // the command line, recorded in the profile's source
  StrategyFactory make_strategy;  // REQUIRES: set; the reference strategy (kReferenceStrategy) times the training step
  bool compute_only = false;      // a companion process: run the compute measurements only (load beside the real one)
  int local_rank = 0;             // a companion's index: its GPU is cuda:(local_rank % GPUs) on a GPU machine
  // The dtypes whose GEMMs and training steps are timed (config names: fp32, bf16, fp16); empty = all three. Must hold
  // fp32 (the rate a missing dtype falls back to) and the config's param_dtype. A profile without a dtype predicts its
  // runs at fp32's rates and says so in each prediction's notes.
  std::vector<std::string> dtypes;
  // An emulated cluster (dtlab launch --nodes): nodes > 1 makes `ranks` the ranks per node, runs comm-bench on the
  // cluster with --group node (-> intra_node; a loopback pair when ranks is 1) and --group cross (-> inter_node at
  // inter_link), and records ranks_per_node, ranks_per_link (= ranks: one link per node) and the link rates.
  int nodes = 1;
  std::string inter_link, intra_link;  // "1gbit"; "" = unshaped
};

// The compute side of a calibration (steps 1-4 above).
struct ComputeCalibration {
  std::string device = "cpu";  // where it was measured: "cpu" or "cuda:0 (NVIDIA H200)" (train.device)
  int threads = 1;
  int cores = 1;
  int64_t tokens = 0;                           // rows of every GEMM: micro_batch * seq_len
  std::map<std::string, double> matmul_tflops;  // by dtype name: float32 | bfloat16 | float16
  std::string train_dtype;                      // matmul dtype of the training step (config param_dtype)
  double fwd_bwd_ms = 0;                        // median forward + backward of one micro-batch
  double step_ms = 0;                           // median whole step: + gradient norm and optimizer
  double model_tflops = 0;                      // model FLOPs of fwd + bwd / fwd_bwd_ms
  double train_efficiency = 0;  // the rate of the token-growing part / matmul_tflops[train_dtype] (may pass 1)
  std::map<std::string, double> train_efficiency_by_dtype;  // the config's dtype; bf16 and fp16 too for an fp32 one
  // The same dtypes by model width: the config's d_model and half of it (steps at micro-batch B, the fixed part out)
  std::map<std::string, std::map<int64_t, double>> train_efficiency_by_width;
  std::map<std::string, double> gemm_overhead_us;  // same dtypes: fixed µs per linear layer per micro-step
  double elementwise_ms = 0;                       // step_ms - fwd_bwd_ms: gradient norm, scaling, optimizer
  double elementwise_bytes = 0;  // analysis/cost/step_model.hpp elementwise_bytes() of that single-process step
  int64_t adamw_params = 0;
  double adamw_ms = 0;
  double adamw_bytes_per_param = 0;  // analysis/cost/step_model.hpp optimizer_bytes_per_element: the model's count
  double memory_GBps = 0;            // elementwise_bytes / elementwise_ms (the AdamW microbenchmark is a record)
  double copy_GBps = 0;         // host to host on a CPU; pinned host to device on a GPU (what offload's copies cost)
  double device_copy_GBps = 0;  // a GPU's device-to-device copy, bytes read + written (0 on a CPU)
  nlohmann::json details;       // every repeat and per-shape figure (calibration.json "compute")
};

// Threads a rank of an `ranks`-rank job on this machine uses: train.threads, else cores / ranks (at least 1).
int calibration_threads(const Config& config, int ranks);

// Steps 1-4 in this process, at `threads` intra-op threads, on train.device (local_rank picks the GPU of a
// companion: cuda:(local_rank % GPUs)). REQUIRES: config.model.trainable, or a GPU.
// `dtypes`: as CalibrateOptions::dtypes (checked by calibration_dtypes).
ComputeCalibration calibrate_compute(const Config& config, int threads, bool quick,
                                     const StrategyFactory& make_strategy, const std::vector<Dtype>& dtypes,
                                     int local_rank = 0);

// The dtypes a calibration times: `names` (config or torch names) in kDtypes order, all three when empty. Throws
// ConfigError naming --dtypes and the rule for an unknown name, or a list without fp32 or without `param_dtype`.
std::vector<Dtype> calibration_dtypes(const std::vector<std::string>& names, const std::string& param_dtype);

// Step 5's child process; returns the document comm-bench wrote to json_path. Throws std::runtime_error
// naming the command and its exit status when it fails.
// `cluster_args` are added to comm-bench's (--nodes, --inter-link, --group ...); with them the largest size is 64 MiB.
// `device_args` too (--device cuda: the buffers on the ranks' GPUs).
nlohmann::json run_comm_bench_child(int ranks, bool quick, const std::string& json_path,
                                    const std::vector<std::string>& cluster_args = {},
                                    const std::vector<std::string>& device_args = {});

// The whole command: measures, fits, writes the profile (validated by analysis/cost/profile.hpp's loader) and
// the side files, prints a summary. Returns the exit status.
int run_calibrate(const CalibrateOptions& options);

}  // namespace dtlab
