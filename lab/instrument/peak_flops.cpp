// peak_flops.cpp: GEMM probe and spec-sheet peaks (see peak_flops.hpp).
#include "lab/instrument/peak_flops.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <stdexcept>
#include <thread>
#include <vector>

#include <ATen/Parallel.h>

#include "lab/config.hpp"
#include "lab/device.hpp"
#include "lab/dtype_torch.hpp"
#include "lab/world.hpp"

namespace dtlab {

double measure_gemm_tflops(int64_t m, int64_t k, int64_t n, at::ScalarType dtype, double seconds) {
  if (m <= 0 || k <= 0 || n <= 0) throw std::invalid_argument("measure_gemm_tflops: m, k, n must be positive");
  at::NoGradGuard no_grad;
  const at::Tensor a = at::randn({m, k}).to(dtype), b = at::randn({k, n}).to(dtype);
  at::Tensor c = at::matmul(a, b);  // warm-up: kernel selection, first-touch of the output
  int64_t reps = 0;
  const auto start = std::chrono::steady_clock::now();
  double elapsed = 0;
  do {
    at::matmul_out(c, a, b);
    ++reps;
    elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  } while (elapsed < seconds || reps < 2);
  return 2.0 * static_cast<double>(m) * static_cast<double>(k) * static_cast<double>(n) * static_cast<double>(reps) /
         elapsed / 1e12;
}

CorePeak measure_core_peak_tflops(at::ScalarType dtype, double seconds) {
  const int threads = at::get_num_threads();
  at::set_num_threads(1);
  CorePeak peak;
  try {
    int64_t n = 256;
    for (; n < 2048; n *= 2) {  // big enough that one call is ~20 ms: the kernel's steady state, not call overhead
      at::NoGradGuard no_grad;
      const at::Tensor a = at::randn({n, n}).to(dtype), b = at::randn({n, n}).to(dtype);
      at::Tensor c = at::matmul(a, b);
      const auto start = std::chrono::steady_clock::now();
      at::matmul_out(c, a, b);
      if (std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() > 0.02) break;
    }
    // The best single call of those that fit in `seconds`: a peak is the fastest the core goes, not an average
    // over moments when something else ran on it.
    at::NoGradGuard no_grad;
    const at::Tensor a = at::randn({n, n}).to(dtype), b = at::randn({n, n}).to(dtype);
    at::Tensor c = at::matmul(a, b);
    double best_s = 1e30, total_s = 0;
    for (int calls = 0; total_s < seconds || calls < 3; ++calls) {
      const auto start = std::chrono::steady_clock::now();
      at::matmul_out(c, a, b);
      const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      best_s = std::min(best_s, s);
      total_s += s;
    }
    peak = {2.0 * static_cast<double>(n) * static_cast<double>(n) * static_cast<double>(n) / best_s / 1e12, n};
  } catch (...) {
    at::set_num_threads(threads);
    throw;
  }
  at::set_num_threads(threads);
  return peak;
}

std::optional<double> spec_sheet_peak_tflops(const std::string& device_name, const std::string& dtype) {
  struct Peak {
    const char* name_part;
    double bf16, fp32_tf32;
  };
  // NVIDIA data sheets, dense tensor-core figures (the sparse figures are twice these). fp16 = bf16.
  static const std::vector<Peak> kPeaks = {
      {"H200", 989.5, 494.7},                                                           // H200 SXM
      {"H100 PCIe", 756.0, 378.0}, {"H100 NVL", 835.0, 417.5}, {"H100", 989.5, 494.7},  // SXM last: the catch-all
      {"A100", 312.0, 156.0},      {"L40S", 362.05, 181.0},    {"B200", 2250.0, 1100.0},
  };
  for (const Peak& p : kPeaks) {
    if (device_name.find(p.name_part) == std::string::npos) continue;
    const std::optional<Dtype> d = parse_dtype(dtype);
    if (!d) return std::nullopt;
    return is_reduced_precision(*d) ? p.bf16 : p.fp32_tf32;
  }
  return std::nullopt;
}

JobPeak job_peak_tflops(const Config& config, World& world, int threads, int cuda_device) {
  const Dtype compute = dtype_named(config.precision.param_dtype, "precision.param_dtype");
  const std::string dtype(torch_name(compute));
  if (cuda_device >= 0) {
    const std::string name = cuda_device_name(cuda_device);
    const int nodes = std::max(1, world.world_size() / std::max(1, world.local_world_size()));
    const int gpus = std::min(world.local_world_size(), std::max(1, cuda_device_count())) * nodes;
    const std::optional<double> peak = spec_sheet_peak_tflops(name, dtype);
    char source[200];
    std::snprintf(source, sizeof source, "%s dense %s spec-sheet peak%s x %d GPU(s) in use", name.c_str(),
                  dtype.c_str(), peak ? "" : " (unknown device: no MFU)", gpus);
    return {peak.value_or(0.0) * gpus, source};
  }
  const at::ScalarType st = scalar_type(compute);
  CorePeak mine;
  if (world.local_rank() == 0) mine = measure_core_peak_tflops(st, 0.1);
  const double per_core = world.all_reduce_max(mine.tflops);
  const double n = world.all_reduce_max(static_cast<double>(mine.n));
  const int hardware = std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
  // Machines in the job: an emulated cluster's nodes share one machine's cores (host_ranks = world size).
  const int machines = std::max(1, world.world_size() / std::max(1, world.host_ranks()));
  const int cores = std::min(hardware, threads * world.host_ranks()) * machines;
  char source[200];
  std::snprintf(source, sizeof source, "%.0fx%.0f %s GEMM on one core: %.4g TFLOP/s x %d cores in use", n, n,
                dtype.c_str(), per_core, cores);
  return {per_core * cores, source};
}

}  // namespace dtlab
