// gloo_spike.cpp: the day-1 spike, kept as a test. One process of a 2-rank job: TCPStore on
// 127.0.0.1 (rank 0 hosts it), ProcessGroupGloo, all-reduce of a tensor, check of the sum.
// Usage: gloo_spike RANK WORLD PORT   (tests/spike/spike_test.cpp starts two of these)
#include <ATen/ATen.h>
#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include <cstdio>
#include <cstdlib>

#include "lab/comm/gloo_backend.hpp"

int main(int argc, char** argv) {
  if (argc != 4) {
    std::fprintf(stderr, "usage: gloo_spike RANK WORLD PORT\n");
    return 2;
  }
  const int rank = std::atoi(argv[1]);
  const int world = std::atoi(argv[2]);
  c10d::TCPStoreOptions store_options;
  store_options.port = static_cast<std::uint16_t>(std::atoi(argv[3]));
  store_options.isServer = rank == 0;
  store_options.numWorkers = world;
  store_options.timeout = std::chrono::seconds(30);
  auto store = c10::make_intrusive<c10d::TCPStore>("127.0.0.1", store_options);
  auto backend = dtlab::comm::make_gloo_backend(store, rank, world, std::chrono::seconds(30), "127.0.0.1");

  std::vector<at::Tensor> tensors{at::full({1000}, static_cast<float>(rank + 1))};
  backend->allreduce(tensors)->wait();
  const float expected = world * (world + 1) / 2.0f;
  const bool ok = tensors[0].eq(expected).all().item<bool>();
  std::printf("rank %d: allreduce sum = %.1f (expected %.1f) %s\n", rank, tensors[0][0].item<float>(), expected,
              ok ? "OK" : "WRONG");
  return ok ? 0 : 1;
}
