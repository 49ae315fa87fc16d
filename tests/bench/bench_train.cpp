// bench_train.cpp: GEMM throughput on the model's matmul shapes (the MFU denominator on CPU) and one
// training step of `small`, measured in the same run; prints the ratio
//   model FLOPs rate of training (6N + 12*L*h*s per token) / GEMM rate on the same shapes.
// Target (issue: Foundation): >= 50%. Run: build/bin/bench_train --benchmark_min_time=2
#include <benchmark/benchmark.h>

#include <ATen/Parallel.h>

#include <chrono>
#include <cstdio>
#include <map>
#include <string>
#include <thread>

#include "lab/config.hpp"
#include "lab/data.hpp"
#include "lab/dist/mesh_comms.hpp"
#include "lab/model_shape.hpp"
#include "lab/train/trainer.hpp"
#include "strategies/catalog.hpp"
#include "strategies/registry.hpp"

namespace {

// Best rate (GFLOP/s) per benchmark name, filled as benchmarks run.
std::map<std::string, double>& rates() {
  static std::map<std::string, double> r;
  return r;
}

dtlab::Config small_config() {
  return dtlab::load_config("",
                            {"model.preset=small", "train.global_batch=8", "train.micro_batch=8", "train.steps=1000000",
                             "train.warmup_steps=1"},
                            1);
}

struct Gemm {
  const char* name;
  int64_t k, n;  // activation [M, k] x weight^T [k, n]
};

// The forward matmuls of one `small` block plus the head, with M = micro_batch * seq_len tokens.
std::vector<Gemm> model_gemms(const dtlab::ModelConfig& m) {
  const int64_t d = m.d_model, hd = d / m.n_heads;
  return {{"wq", d, m.n_heads * hd},   {"wk", d, m.n_kv_heads * hd}, {"wv", d, m.n_kv_heads * hd},
          {"wo", m.n_heads * hd, d},   {"w_gate", d, m.ffn_hidden},  {"w_up", d, m.ffn_hidden},
          {"w_down", m.ffn_hidden, d}, {"lm_head", d, m.vocab_size}};
}

// All of a block's GEMMs (and the head) back to back: FLOP-weighted throughput on the model's shapes.
void BM_GemmModelShapes(benchmark::State& state) {
  at::set_num_threads(static_cast<int>(std::thread::hardware_concurrency()));
  const auto c = small_config();
  const int64_t M = c.train.micro_batch * c.model.seq_len;
  std::vector<std::pair<at::Tensor, at::Tensor>> operands;
  double flops = 0;
  for (const auto& g : model_gemms(c.model)) {
    operands.emplace_back(at::randn({M, g.k}), at::randn({g.n, g.k}));
    flops += 2.0 * static_cast<double>(M * g.k * g.n);
  }
  double best = 0;
  for (auto _ : state) {  // NOLINT(clang-analyzer-deadcode.DeadStores): Google Benchmark's loop idiom
    const auto t0 = std::chrono::steady_clock::now();
    for (auto& [a, w] : operands) benchmark::DoNotOptimize(at::linear(a, w));
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    best = std::max(best, flops / s / 1e9);
  }
  state.counters["GFLOPS"] =
      benchmark::Counter(flops, benchmark::Counter::kIsIterationInvariantRate, benchmark::Counter::OneK::kIs1000);
  rates()["gemm"] = best;
}
BENCHMARK(BM_GemmModelShapes)->Unit(benchmark::kMillisecond)->UseRealTime();

// One optimizer step of `small` (global batch 8, no accumulation) with the single strategy.
void BM_TrainStepSmall(benchmark::State& state) {
  const auto c = small_config();
  const auto counts = dtlab::model_counts(c.model);
  const double tokens = static_cast<double>(c.train.global_batch * c.model.seq_len);
  const double flops = counts.flops_per_token * tokens;
  auto strategy = dtlab::make_strategy("single");
  dtlab::SingleProcessWorld world;
  dtlab::configure_threads(c, world);
  auto model = std::make_shared<dtlab::GPT>(c.model, c.train.seed);
  auto source = dtlab::make_token_source(c.data, c.model.vocab_size);
  dtlab::Sampler sampler(*source, c.model.seq_len, c.train.global_batch, c.train.micro_batch, 1, 0, 1, 1);
  dtlab::MeshComms comms(dtlab::device_mesh(c), world);
  strategy->wrap(model, c, comms);
  // One untimed step first: it allocates gradients and optimizer state.
  strategy->zero_grad();
  strategy->forward_backward(sampler.batch(0, 0), 1.0 / tokens, true);
  strategy->finish_gradients();
  strategy->optimizer_step(1e-4);
  int64_t step = 1;
  double best = 0;
  for (auto _ : state) {  // NOLINT(clang-analyzer-deadcode.DeadStores): Google Benchmark's loop idiom
    const auto t0 = std::chrono::steady_clock::now();
    strategy->zero_grad();
    strategy->forward_backward(sampler.batch(step, 0), 1.0 / tokens, true);
    strategy->finish_gradients();
    strategy->optimizer_step(1e-4);
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    best = std::max(best, flops / s / 1e9);
    ++step;
  }
  state.counters["model_GFLOPS"] =
      benchmark::Counter(flops, benchmark::Counter::kIsIterationInvariantRate, benchmark::Counter::OneK::kIs1000);
  state.counters["tokens_per_s"] = benchmark::Counter(tokens, benchmark::Counter::kIsIterationInvariantRate);
  rates()["train"] = best;
}
BENCHMARK(BM_TrainStepSmall)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  if (rates().count("gemm") && rates().count("train")) {
    const double gemm = rates()["gemm"], train = rates()["train"];
    std::printf("\nbest GEMM rate on the model's shapes: %.1f GFLOP/s\n", gemm);
    std::printf("best training rate of small (6N + 12*L*h*s per token): %.1f GFLOP/s\n", train);
    std::printf("training / GEMM = %.1f%% (target >= 50%%)\n", 100.0 * train / gemm);
  }
  return 0;
}
