// kernels_test.cpp: the stochastic-rounding bf16 cast — unbiased on average, nearest rounding equal to
// LibTorch's cast, special values kept, deterministic in the seed; the CUDA version agrees bit for bit
// (skipped without a GPU).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

#include <ATen/ATen.h>

#include "kernels/stochastic_round.hpp"
#include "lab/instrument/gpu.hpp"

#ifdef DTLAB_WITH_CUDA
#include <cuda_runtime.h>
#endif

namespace dtlab::kernels {
namespace {

TEST(StochasticRound, MeanOfManyRoundingsIsTheInput) {
  // Values strictly between bf16 neighbours: 1 + k/4 of an ulp (bf16 ulp at 1.0 is 2^-7).
  const float ulp = std::ldexp(1.0f, -7);
  for (const float frac : {0.1f, 0.25f, 0.5f, 0.75f, 0.9f}) {
    const float x = 1.0f + frac * ulp;
    const size_t n = 200000;
    std::vector<float> in(n, x);
    std::vector<uint16_t> out(n);
    stochastic_round_to_bf16_cpu(in.data(), out.data(), n, 12345);
    double sum = 0;
    size_t ups = 0;
    for (uint16_t b : out) {
      const float v = bf16_bits_to_float(b);
      ASSERT_TRUE(v == 1.0f || v == 1.0f + ulp) << v;  // only the two neighbours
      sum += v;
      ups += v > 1.0f;
    }
    const double mean = sum / static_cast<double>(n);
    // The count of round-ups is Binomial(n, frac): allow 5 standard deviations.
    const double sd = std::sqrt(static_cast<double>(n) * frac * (1 - frac));
    EXPECT_NEAR(static_cast<double>(ups), frac * static_cast<double>(n), 5 * sd) << "frac " << frac;
    EXPECT_NEAR(mean, static_cast<double>(x), 5 * sd / static_cast<double>(n) * ulp + 1e-9);
  }
}

TEST(StochasticRound, SmallUpdatesSurviveOnAverage) {
  // Adding 1e-4 to 1.0 a thousand times in bf16 with nearest rounding never moves; stochastic moves ~0.1.
  const size_t lanes = 4096;
  std::vector<float> w(lanes, 1.0f);
  std::vector<uint16_t> bits(lanes);
  for (int step = 0; step < 1000; ++step) {
    for (auto& v : w) v += 1e-4f;
    stochastic_round_to_bf16_cpu(w.data(), bits.data(), lanes, 1000 + static_cast<uint64_t>(step));
    for (size_t i = 0; i < lanes; ++i) w[i] = bf16_bits_to_float(bits[i]);
  }
  double mean = 0;
  for (float v : w) mean += v;
  mean /= lanes;
  EXPECT_NEAR(mean, 1.1, 0.01);
}

TEST(StochasticRound, NearestRoundingMatchesLibTorchsCast) {
  at::Tensor x = at::randn({10000}) * 1000;
  at::Tensor ref = x.to(at::kBFloat16);
  std::vector<uint16_t> out(10000);
  round_nearest_to_bf16_cpu(x.data_ptr<float>(), out.data(), out.size());
  const auto* want = reinterpret_cast<const uint16_t*>(ref.data_ptr());
  for (size_t i = 0; i < out.size(); ++i) ASSERT_EQ(out[i], want[i]) << "element " << i;
}

TEST(StochasticRound, SpecialValuesAndDeterminism) {
  const float in[] = {NAN, INFINITY, -INFINITY, 0.0f, -0.0f, 3.0f};
  uint16_t a[6], b[6], c[6];
  stochastic_round_to_bf16_cpu(in, a, 6, 7);
  stochastic_round_to_bf16_cpu(in, b, 6, 7);
  EXPECT_EQ(std::memcmp(a, b, sizeof a), 0);
  EXPECT_TRUE(std::isnan(bf16_bits_to_float(a[0])));
  EXPECT_EQ(bf16_bits_to_float(a[1]), INFINITY);
  EXPECT_EQ(bf16_bits_to_float(a[2]), -INFINITY);
  EXPECT_EQ(a[3], 0x0000);                    // +0.0 stays +0.0
  EXPECT_EQ(a[4], 0x8000);                    // -0.0 keeps its sign bit (a comparison with 0.0f could not tell)
  EXPECT_EQ(bf16_bits_to_float(a[5]), 3.0f);  // exactly representable values never move
  // a different seed changes some roundings of inexact values
  std::vector<float> many(1000, 1.0f + std::ldexp(1.0f, -9));
  std::vector<uint16_t> s1(1000), s2(1000);
  stochastic_round_to_bf16_cpu(many.data(), s1.data(), 1000, 1);
  stochastic_round_to_bf16_cpu(many.data(), s2.data(), 1000, 2);
  EXPECT_NE(s1, s2);
  (void)c;
}

TEST(StochasticRound, CudaMatchesCpuBitForBit) {
#ifndef DTLAB_WITH_CUDA
  GTEST_SKIP() << "cpu build: the CUDA kernel is compiled only in the cuda configuration";
#else
  const GpuStatus status = gpu_status();
  if (status.device_count == 0) GTEST_SKIP() << status.summary;
  const size_t n = 1 << 20;
  at::Tensor x = at::randn({static_cast<int64_t>(n)});
  std::vector<uint16_t> cpu(n), gpu(n);
  stochastic_round_to_bf16_cpu(x.data_ptr<float>(), cpu.data(), n, 99);
  float* d_in = nullptr;
  uint16_t* d_out = nullptr;
  ASSERT_EQ(cudaMalloc(&d_in, n * sizeof(float)), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&d_out, n * sizeof(uint16_t)), cudaSuccess);
  cudaMemcpy(d_in, x.data_ptr<float>(), n * sizeof(float), cudaMemcpyHostToDevice);
  stochastic_round_to_bf16_cuda(d_in, d_out, n, 99, nullptr);
  cudaMemcpy(gpu.data(), d_out, n * sizeof(uint16_t), cudaMemcpyDeviceToHost);
  cudaFree(d_in);
  cudaFree(d_out);
  EXPECT_EQ(cpu, gpu);
#endif
}

}  // namespace
}  // namespace dtlab::kernels
