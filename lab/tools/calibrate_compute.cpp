// calibrate_compute.cpp: the compute side of `dtlab calibrate` — GEMMs on the model's shapes in every dtype, the
// single-process training step at the config's micro-batch and at 1 (the fixed part of a micro-step and the rate of the
// growing part), the memory-bound rest of the step, AdamW and a copy; see calibrate.hpp (calibrate_compute).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include "analysis/cost/compute_model.hpp"
#include "analysis/cost/profile.hpp"
#include "analysis/cost/step_model.hpp"
#include "lab/config.hpp"
#include "lab/data.hpp"
#include "lab/device.hpp"
#include "lab/dist/mesh_comms.hpp"
#include "lab/dtype_torch.hpp"
#include "lab/model.hpp"
#include "lab/model_shape.hpp"
#include "lab/stats.hpp"
#include "lab/tools/calibrate.hpp"
#include "lab/train/optimizer.hpp"
#include "lab/world.hpp"
#include "strategies/catalog.hpp"
#include "strategies/cost_plan.hpp"

namespace dtlab {
namespace {
using nlohmann::json;
using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

// Repeats and time budgets. Every figure is a median over repeats after one untimed warm-up, so a burst of
// load from another process moves it less than a mean would.
struct Budget {
  int min_repeats;
  double seconds;      // keep repeating until both min_repeats and this much time are reached ...
  double max_seconds;  // ... but stop after this long (at least one timed repeat)
};
Budget gemm_budget(bool quick) { return quick ? Budget{2, 0.0, 2.0} : Budget{5, 0.5, 10.0}; }
Budget small_budget(bool quick) { return quick ? Budget{3, 0.0, 1.0} : Budget{10, 1.0, 10.0}; }
int train_warmup_steps(bool quick) { return quick ? 1 : 2; }
// Timed training steps of configurations timed in turn: up to max_timed rounds (one step of each), but no more once at
// least min_timed rounds have taken enough_seconds per configuration. A CPU without native bf16 (AVX2 only) takes about
// 7 s per bf16 step of `small` (13 s with three companions), where six steps would cost most of a minute per
// measurement; an fp32 step there takes 0.6-1.3 s, so fp32 keeps its six.
struct TrainStepCount {
  int min_timed, max_timed;
  double enough_seconds;
};
TrainStepCount train_timed_steps(bool quick) { return quick ? TrainStepCount{2, 2, 0.0} : TrainStepCount{3, 6, 8.0}; }

// Times fn() after one warm-up call; returns every repeat in milliseconds. On a GPU each repeat starts and ends
// with a device synchronize: the time is the device's work, not the time to queue it.
template <typename Fn>
std::vector<double> repeat_ms(const Budget& budget, const TrainDevice& device, Fn&& fn) {
  fn();
  std::vector<double> ms;
  const auto start = Clock::now();
  while (ms.empty() || (static_cast<int>(ms.size()) < budget.min_repeats || seconds_since(start) < budget.seconds)) {
    synchronize(device);
    const auto t0 = Clock::now();
    fn();
    synchronize(device);
    ms.push_back(1e3 * seconds_since(t0));
    if (seconds_since(start) >= budget.max_seconds) break;
  }
  return ms;
}

// The machine profile's key (float32 | bfloat16 | float16) for a dtype in either spelling.
std::string profile_dtype(const std::string& dtype) { return std::string(torch_name(dtype_named(dtype, "calibrate"))); }

struct Gemm {
  const char* name;
  int64_t k, n;   // activation [M, k] x weight^T [k, n]
  double weight;  // how many times the model runs it per forward (n_layers for block weights, 1 for the head)
};

// Every linear of the model: a block's seven (times n_layers) and the head.
std::vector<Gemm> model_gemms(const ModelConfig& m) {
  const int64_t d = m.d_model, hd = d / m.n_heads;
  const double L = static_cast<double>(m.n_layers);
  return {{"wq", d, m.n_heads * hd, L},   {"wk", d, m.n_kv_heads * hd, L},  {"wv", d, m.n_kv_heads * hd, L},
          {"wo", m.n_heads * hd, d, L},   {"w_gate", d, m.ffn_hidden, L},   {"w_up", d, m.ffn_hidden, L},
          {"w_down", m.ffn_hidden, d, L}, {"lm_head", d, m.vocab_size, 1.0}};
}

// The model-weighted GEMM rate in `dtype`: per shape the forward product and both backward products
// (grad input, grad weight) as a training step runs them; rate = Σ weight·flops / Σ weight·median time.
double measure_matmul_tflops(const ModelConfig& m, int64_t tokens, const std::string& dtype, bool quick,
                             const TrainDevice& device, json& details) {
  const at::ScalarType t = scalar_type_named(dtype, "calibrate");
  const auto opts = at::TensorOptions().dtype(t).device(device.device);
  double flops = 0, seconds = 0;
  json shapes = json::array();
  for (const Gemm& g : model_gemms(m)) {
    const at::Tensor a = at::randn({tokens, g.k}, opts);
    const at::Tensor w = at::randn({g.n, g.k}, opts);
    const at::Tensor grad_out = at::randn({tokens, g.n}, opts);
    const std::vector<double> ms = repeat_ms(gemm_budget(quick), device, [&] {
      at::Tensor y = at::linear(a, w);              // forward:     [M,k] x [k,n]
      at::Tensor grad_in = at::mm(grad_out, w);     // grad input:  [M,n] x [n,k]
      at::Tensor grad_w = at::mm(grad_out.t(), a);  // grad weight: [n,M] x [M,k]
      (void)y, (void)grad_in, (void)grad_w;
    });
    const double shape_flops = 3.0 * 2.0 * static_cast<double>(tokens * g.k * g.n);
    const double median_ms = median_or_zero(ms);
    flops += g.weight * shape_flops;
    seconds += g.weight * median_ms / 1e3;
    shapes.push_back({{"name", g.name},
                      {"m", tokens},
                      {"k", g.k},
                      {"n", g.n},
                      {"weight", g.weight},
                      {"median_ms", median_ms},
                      {"tflops", shape_flops / (median_ms / 1e3) / 1e12},
                      {"repeats_ms", ms}});
  }
  const double tflops = flops / seconds / 1e12;
  details[dtype] = {{"tflops", tflops}, {"shapes", shapes}};
  return tflops;
}

// The lab's AdamW over one flat fp32 tensor of `n` elements: median step time in ms.
double measure_adamw_ms(const TrainConfig& train, int64_t n, bool quick, const TrainDevice& device,
                        std::vector<double>& repeats) {
  const auto on_device = at::TensorOptions().device(device.device);
  const at::Tensor param = at::randn({n}, on_device);
  const std::vector<at::Tensor> grads = {at::randn({n}, on_device)};
  auto optimizer = make_optimizer(train, {param}, {true});
  repeats = repeat_ms(small_budget(quick), device, [&] { optimizer->step(grads, 1e-4); });
  return median_or_zero(repeats);
}

// One configuration of the single strategy, ready to train on one micro-batch as the trainer runs it on `device` (the
// model made on the host, then moved; batches copied through pinned memory; each timed part ends with a device
// synchronize).
class StepRunner {
 public:
  StepRunner(const Config& run, const StrategyFactory& make_strategy, const TrainDevice& device)
      : device_(device),
        strategy_(make_strategy(std::string(kReferenceStrategy))),
        model_(std::make_shared<GPT>(run.model, run.train.seed)),
        source_(make_token_source(run.data, run.model.vocab_size)),
        sampler_(*source_, run.model.seq_len, run.train.global_batch, run.train.micro_batch, 1, 0, 1, run.data.seed) {
    if (device_.cuda()) model_->to(device_.device);
    MeshComms comms(device_mesh(run), world_);
    strategy_->wrap(model_, run, comms);
    loss_weight_ = 1.0 / static_cast<double>(sampler_.global_target_count(0));
  }

  // Trains one step; returns its forward+backward and whole-step times in ms.
  std::pair<double, double> step() {
    Batch batch = sampler_.batch(step_++, 0);
    synchronize(device_);
    const auto t0 = Clock::now();
    batch.inputs = to_device(batch.inputs, device_);
    batch.targets = to_device(batch.targets, device_);
    strategy_->zero_grad();
    strategy_->forward_backward(batch, loss_weight_, true);
    strategy_->finish_gradients();
    synchronize(device_);
    const double fwd_bwd = 1e3 * seconds_since(t0);
    strategy_->scale_gradients(1.0 / (std::sqrt(strategy_->grad_sum_of_squares()) + 1.0));  // as clipping does
    strategy_->optimizer_step(1e-4);
    synchronize(device_);
    return {fwd_bwd, 1e3 * seconds_since(t0)};
  }

 private:
  TrainDevice device_;
  SingleProcessWorld world_;
  std::unique_ptr<Strategy> strategy_;
  std::shared_ptr<GPT> model_;
  std::unique_ptr<TokenSource> source_;
  Sampler sampler_;
  double loss_weight_ = 0;
  int64_t step_ = 0;
};

// Median forward+backward and whole-step times (ms) and their repeats.
struct TrainStepTimes {
  double fwd_bwd_ms = 0, step_ms = 0;
  std::vector<double> fwd_bwd_repeats, step_repeats;
};

// Median forward+backward and whole-step times of the single strategy on one micro-batch of each of `runs`, their
// steps taken in turn (one of each per round, after the warm-up steps of each). The fixed part of a micro-step is a
// difference between two of these medians: timed in turn, both see the same machine. Timed one block after the
// other, the fixed part came out between 57 and 412 µs per linear layer in three sessions' calibrations; timed
// in turn, 0 (docs/performance.md, fifteenth session).
std::vector<TrainStepTimes> measure_train_steps_in_turn(const std::vector<Config>& runs, bool quick,
                                                        const StrategyFactory& make_strategy,
                                                        const TrainDevice& device) {
  std::vector<std::unique_ptr<StepRunner>> runners;
  for (const Config& run : runs) runners.push_back(std::make_unique<StepRunner>(run, make_strategy, device));
  for (int step = 0; step < train_warmup_steps(quick); ++step)
    for (auto& runner : runners) runner->step();
  std::vector<TrainStepTimes> times(runs.size());
  const TrainStepCount timed = train_timed_steps(quick);
  double timed_seconds = 0;
  for (int round = 1; round <= timed.max_timed; ++round) {
    for (size_t i = 0; i < runners.size(); ++i) {
      const auto [fwd_bwd, whole] = runners[i]->step();
      times[i].fwd_bwd_repeats.push_back(fwd_bwd);
      times[i].step_repeats.push_back(whole);
      timed_seconds += whole / 1e3;
    }
    if (round >= timed.min_timed && timed_seconds >= timed.enough_seconds * static_cast<double>(runs.size())) break;
  }
  for (TrainStepTimes& t : times) {
    t.fwd_bwd_ms = median_or_zero(t.fwd_bwd_repeats);
    t.step_ms = median_or_zero(t.step_repeats);
  }
  return times;
}

}  // namespace

int calibration_threads(const Config& config, int ranks) {
  // The rule of configure_threads (lab/train/trainer.cpp) for a job of `ranks` local ranks.
  if (config.train.threads > 0) return static_cast<int>(config.train.threads);
  const int cores = std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
  return std::max(1, cores / std::max(1, ranks));
}

std::vector<Dtype> calibration_dtypes(const std::vector<std::string>& names, const std::string& param_dtype) {
  if (names.empty()) return {kDtypes.begin(), kDtypes.end()};
  std::vector<Dtype> chosen;
  for (const std::string& name : names) {
    try {
      chosen.push_back(dtype_named(name, "--dtypes"));
    } catch (const std::invalid_argument& e) {
      throw ConfigError(e.what());
    }
  }
  std::vector<Dtype> ordered;
  for (const Dtype d : kDtypes)
    if (std::find(chosen.begin(), chosen.end(), d) != chosen.end()) ordered.push_back(d);
  const auto has = [&](Dtype d) { return std::find(ordered.begin(), ordered.end(), d) != ordered.end(); };
  if (!has(Dtype::fp32))
    throw ConfigError("--dtypes must include fp32: a dtype a profile lacks is predicted at fp32's rates");
  if (!has(dtype_named(param_dtype, "precision.param_dtype")))
    throw ConfigError("--dtypes must include precision.param_dtype=" + param_dtype +
                      ": the training step is timed in the config's dtype");
  return ordered;
}

ComputeCalibration calibrate_compute(const Config& config, int threads, bool quick,
                                     const StrategyFactory& make_strategy, const std::vector<Dtype>& dtypes,
                                     int local_rank) {
  const TrainDevice device = resolve_train_device(config.train.device, local_rank);
  if (!config.model.trainable && !device.cuda()) {
    throw ConfigError("calibrate: model.preset=" + config.model.preset +
                      " is a prediction-only shape on a CPU; calibrate on a shape this machine trains (e.g. small), "
                      "or with train.device=cuda on a GPU");
  }
  at::set_num_threads(threads);
  ComputeCalibration c;
  c.device = device.name;
  c.threads = threads;
  c.cores = std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
  c.tokens = config.train.micro_batch * config.model.seq_len;
  c.train_dtype = profile_dtype(config.precision.param_dtype);
  json gemm_details = json::object();

  // 1. GEMMs on the model's shapes
  for (const Dtype dtype : dtypes) {
    const std::string name(torch_name(dtype));
    c.matmul_tflops[name] = measure_matmul_tflops(config.model, c.tokens, name, quick, device, gemm_details);
  }

  // 2. a training step of one micro-batch (the per-rank work of a data-parallel step), single strategy, in the
  // config's dtype and, for an fp32 config, in the other dtypes calibrated (bf16 and fp16 by default) (a CPU's
  // half-precision GEMM rate is not its half-precision step rate: without its own step, an fp16 run was predicted 72%
  // slow at fp32's efficiency).
  Config single = config;
  single.world_size = 1;
  single.parallel.strategy = kReferenceStrategy;
  single.parallel.offload = false;
  single.train.global_batch = single.train.micro_batch;
  single.train.accumulation = 1;
  const ModelCounts counts = model_counts(single.model);
  const double step_flops = counts.flops_per_token * static_cast<double>(c.tokens);
  json train_details = json::object();
  // Each dtype's step runs at the config's micro-batch B and at micro-batch 1: t(T) = overhead + T·k through both
  // points gives the part of a micro-step that does not grow with its tokens (the profile's gemm_overhead_us, per
  // linear layer) and the rate of the part that does (train_efficiency), so the compute model is exact at both.
  const int64_t batch = single.train.micro_batch;
  const double linear_layers = analysis::linear_layers(single.model);
  std::vector<std::string> step_dtypes = {config.precision.param_dtype};
  if (config.precision.param_dtype == "fp32")
    for (const Dtype d : dtypes)
      if (d != Dtype::fp32) step_dtypes.emplace_back(config_name(d));
  for (const std::string& dtype : step_dtypes) {
    Config run = single;
    run.precision.param_dtype = dtype;
    // The config's micro-batch, then micro-batch 1 (when the config's is larger), then half the width (d_model and
    // ffn_hidden halved; the layers, heads and tokens kept: a narrow model's GEMMs run below a wide one's, and the
    // studies train both) when the model accepts that shape (heads divide the width, an even head size for RoPE).
    std::vector<Config> runs = {run};
    if (batch > 1) {
      Config one = run;
      one.train.micro_batch = one.train.global_batch = 1;
      runs.push_back(one);
    }
    Config narrow = run;
    narrow.model.d_model /= 2;
    narrow.model.ffn_hidden = std::max<int64_t>(1, narrow.model.ffn_hidden / 2);
    bool narrow_valid = true;
    try {
      validate(narrow);
    } catch (const ConfigError&) {
      narrow_valid = false;
    }
    if (narrow_valid) runs.push_back(narrow);
    const std::vector<TrainStepTimes> measured = measure_train_steps_in_turn(runs, quick, make_strategy, device);
    const TrainStepTimes& times = measured.front();
    const std::string name = profile_dtype(dtype);
    double overhead_ms = 0;
    json one_row = nullptr;
    if (batch > 1) {
      const TrainStepTimes& small = measured[1];
      overhead_ms = std::max(
          0.0, (static_cast<double>(batch) * small.fwd_bwd_ms - times.fwd_bwd_ms) / static_cast<double>(batch - 1));
      // The tokens always cost something, at both sizes (a noisy pair could put micro-batch 1 above B's time).
      overhead_ms = std::min(overhead_ms, 0.9 * std::min(small.fwd_bwd_ms, times.fwd_bwd_ms));
      c.gemm_overhead_us[name] = overhead_ms * 1e3 / linear_layers;
      one_row = {{"micro_batch", 1}, {"fwd_bwd_ms", small.fwd_bwd_repeats}};
    }
    const double model_tflops = step_flops / (times.fwd_bwd_ms / 1e3) / 1e12;
    const double growing_tflops = step_flops / ((times.fwd_bwd_ms - overhead_ms) / 1e3) / 1e12;
    const double efficiency = growing_tflops / c.matmul_tflops.at(name);
    // Held at the profile's bound: past it the GEMMs did not time the step's kernels (calibrate.cpp notes it).
    c.train_efficiency_by_dtype[name] = std::min(analysis::kMaxTrainEfficiency, efficiency);
    train_details[name] = {{"fwd_bwd_ms", times.fwd_bwd_repeats},
                           {"step_ms", times.step_repeats},
                           {"model_tflops", model_tflops},
                           {"micro_batch_1", one_row},
                           {"overhead_ms_per_micro_step", overhead_ms},
                           {"efficiency", efficiency},
                           {"timed_in_turn", runs.size()}};
    // The narrow model's fixed part is the one just measured (the same linear layers at the same micro-batch sizes).
    c.train_efficiency_by_width[name][run.model.d_model] = c.train_efficiency_by_dtype[name];
    if (narrow_valid) {
      const TrainStepTimes& narrow_times = measured.back();
      const double narrow_flops = model_counts(narrow.model).flops_per_token * static_cast<double>(c.tokens);
      const double narrow_growing_ms = std::max(1e-3, narrow_times.fwd_bwd_ms - overhead_ms);
      const double narrow_efficiency = narrow_flops / (narrow_growing_ms / 1e3) / 1e12 / c.matmul_tflops.at(name);
      c.train_efficiency_by_width[name][narrow.model.d_model] =
          std::min(analysis::kMaxTrainEfficiency, narrow_efficiency);
      train_details[name]["half_width"] = {{"d_model", narrow.model.d_model},
                                           {"ffn_hidden", narrow.model.ffn_hidden},
                                           {"fwd_bwd_ms", narrow_times.fwd_bwd_repeats},
                                           {"efficiency", narrow_efficiency}};
    }
    if (dtype != config.precision.param_dtype) continue;
    c.fwd_bwd_ms = times.fwd_bwd_ms;
    c.step_ms = times.step_ms;
    c.model_tflops = model_tflops;
    c.train_efficiency = c.train_efficiency_by_dtype[name];
  }

  // 3. The memory-bound rest of the step (gradient norm, scaling, AdamW): the step model's byte count of this very
  // step over its measured time, so the model reproduces it. The op-by-op AdamW microbenchmark is kept as a record.
  c.elementwise_ms = c.step_ms - c.fwd_bwd_ms;
  c.elementwise_bytes = analysis::elementwise_bytes(single, cost_plan(single, 0));
  c.memory_GBps = c.elementwise_bytes / (std::max(1e-3, c.elementwise_ms) / 1e3) / 1e9;
  c.adamw_params = counts.params;
  std::vector<double> adamw_repeats;
  c.adamw_ms = measure_adamw_ms(single.train, c.adamw_params, quick, device, adamw_repeats);
  c.adamw_bytes_per_param = static_cast<double>(analysis::optimizer_bytes_per_element(single.train));
  // The copy offload pays: host to host on a CPU; on a GPU, pinned host memory to the device (offload's masters
  // live in pinned host memory), and the device's own copy rate as a record.
  const double param_bytes = 4.0 * static_cast<double>(c.adamw_params);
  const at::Tensor from = device.cuda() ? at::randn({c.adamw_params}).pin_memory() : at::randn({c.adamw_params});
  at::Tensor to = at::empty({c.adamw_params}, at::TensorOptions().device(device.device));
  const std::vector<double> copy_ms =
      repeat_ms(small_budget(quick), device, [&] { to.copy_(from, /*non_blocking=*/device.cuda()); });
  c.copy_GBps = param_bytes / (median_or_zero(copy_ms) / 1e3) / 1e9;
  json device_copy = nullptr;
  if (device.cuda()) {
    at::Tensor again = at::empty_like(to);
    const std::vector<double> ms = repeat_ms(small_budget(quick), device, [&] { again.copy_(to); });
    c.device_copy_GBps = 2.0 * param_bytes / (median_or_zero(ms) / 1e3) / 1e9;  // read + write, as nccl-tests
    device_copy = {{"bytes", param_bytes}, {"repeats_ms", ms}, {"GBps_read_and_write", c.device_copy_GBps}};
  }

  c.details = {{"device", c.device},
               {"threads", c.threads},
               {"cores", c.cores},
               {"gemm_rows", c.tokens},
               {"gemm", gemm_details},
               {"train_step",
                {{"preset", single.model.preset},
                 {"micro_batch", single.train.micro_batch},
                 {"seq_len", single.model.seq_len},
                 {"dtype", c.train_dtype},
                 {"flops_per_token", counts.flops_per_token},
                 {"warmup_steps", train_warmup_steps(quick)},
                 {"by_dtype", train_details}}},
               {"elementwise", {{"ms", c.elementwise_ms}, {"bytes", c.elementwise_bytes}, {"GBps", c.memory_GBps}}},
               {"adamw",
                {{"params", c.adamw_params},
                 {"bytes_per_param", c.adamw_bytes_per_param},
                 {"repeats_ms", adamw_repeats},
                 {"GBps", c.adamw_bytes_per_param * static_cast<double>(c.adamw_params) / (c.adamw_ms / 1e3) / 1e9}}},
               {"copy",
                {{"bytes", 4 * c.adamw_params},
                 {"from", device.cuda() ? "pinned host memory to the device" : "host to host"},
                 {"repeats_ms", copy_ms},
                 {"GBps", c.copy_GBps}}},
               {"device_copy", device_copy}};
  return c;
}

}  // namespace dtlab
