// peak_flops.hpp: the peak an MFU figure is measured against.
//
// CPU: the matrix-multiply rate this process achieves right now on the model's largest GEMM shape, at its
// own thread count (a short probe: one warm-up, then repeats for about `seconds`). GPU: the spec-sheet dense
// peak looked up by device name (torchtitan does the same), when the device is known.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include <ATen/ATen.h>

namespace dtlab {

struct Config;
class World;

// TFLOP/s of [m x k] @ [k x n] in `dtype` on the CPU. REQUIRES: m, k, n > 0.
double measure_gemm_tflops(int64_t m, int64_t k, int64_t n, at::ScalarType dtype, double seconds);

// One CPU core's best matrix-multiply rate in `dtype`: a square GEMM on one thread, grown (256 .. 2048) until one
// call takes about 20 ms, then the fastest of its calls in about `seconds`. The intra-op thread count is restored
// afterwards. This is the per-core peak MFU is measured against: a training step's smaller GEMMs and elementwise work
// run slower.
struct CorePeak {
  double tflops = 0;
  int64_t n = 0;  // the square size timed
};
CorePeak measure_core_peak_tflops(at::ScalarType dtype, double seconds);

// The MFU denominator of a training job: the peak of the cores it occupies, i.e. one core's best GEMM rate in the
// compute dtype (measured by local rank 0 of each node while the node's other ranks wait, so the probe has its core
// alone) times the cores in use (threads per rank x ranks on the machine, at most its cores, times the machines; the
// nodes of an emulated cluster are one machine: World::host_ranks). A
// training step's GEMMs are smaller than the probe's and share the cores with elementwise work, so MFU cannot exceed
// 100%. Collective: every rank calls it. `source` says how it was measured (result.json summary.mfu_peak_source).
struct JobPeak {
  double tflops = 0;
  std::string source;
};
// On a GPU (cuda_device >= 0): the spec-sheet dense peak of that device in the compute dtype times the GPUs the
// job's ranks occupy (ranks sharing one GPU share its peak); tflops 0 when the device is not in the table.
JobPeak job_peak_tflops(const Config& config, World& world, int threads, int cuda_device = -1);

// Dense (no sparsity) peak TFLOP/s from NVIDIA's data sheets for a device name as CUDA reports it
// ("NVIDIA H100 80GB HBM3", ...) and a dtype ("bfloat16" | "float16" | "float32"; float32 = TF32 tensor
// cores); nullopt for unknown devices.
std::optional<double> spec_sheet_peak_tflops(const std::string& device_name, const std::string& dtype);

}  // namespace dtlab
