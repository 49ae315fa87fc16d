// memory_test.cpp: the counting CPU allocator (lab/memory.hpp) — allocation and free move the counters
// by the tensor's bytes, peak reset, exact balance under concurrent allocation, the raw interface
// oneDNN uses, the cap, host memory apart from the device side — plus /proc RSS/HWM and the result.json "memory"
// object. The allocator is installed process-wide (idempotent) and stays installed for the other unit tests, which is
// the point: it must be invisible to them.
#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <ATen/ATen.h>
#include <c10/core/CPUAllocator.h>

#include "lab/memory.hpp"

namespace dtlab {
namespace {

constexpr int64_t kMiB = 1024 * 1024;

class CountingAllocator : public ::testing::Test {
 protected:
  void SetUp() override {
    install_counting_allocator();
    install_counting_allocator();  // idempotent
    ASSERT_TRUE(counting_allocator_installed());
  }
};

TEST_F(CountingAllocator, A64MiBTensorRaisesCurrentAndPeakAndFreeingLowersCurrent) {
  const MemoryCounters before = cpu_tensor_memory();
  at::Tensor t = at::empty({64 * kMiB / 4}, at::kFloat);
  const MemoryCounters during = cpu_tensor_memory();
  EXPECT_GE(during.current_bytes - before.current_bytes, 64 * kMiB);
  EXPECT_GE(during.peak_bytes, before.current_bytes + 64 * kMiB);
  t = at::Tensor();
  const MemoryCounters after = cpu_tensor_memory();
  EXPECT_LE(after.current_bytes, during.current_bytes - 64 * kMiB);
  EXPECT_EQ(after.peak_bytes, during.peak_bytes);  // the peak remembers
}

TEST_F(CountingAllocator, PeakResetsToCurrent) {
  { at::Tensor big = at::zeros({16 * kMiB / 4}, at::kFloat); }
  EXPECT_GE(cpu_tensor_memory().peak_bytes - cpu_tensor_memory().current_bytes, 16 * kMiB);
  reset_peak_cpu_tensor_memory();
  const MemoryCounters now = cpu_tensor_memory();
  EXPECT_EQ(now.peak_bytes, now.current_bytes);
  at::Tensor small = at::empty({1024}, at::kFloat);
  EXPECT_GE(cpu_tensor_memory().peak_bytes, now.current_bytes + 4096);
}

TEST_F(CountingAllocator, ConcurrentAllocationsBalanceExactly) {
  const int64_t start = cpu_tensor_memory().current_bytes;
  reset_peak_cpu_tensor_memory();
  constexpr int kThreads = 8, kRounds = 200, kLive = 8;
  std::vector<std::thread> threads;
  for (int i = 0; i < kThreads; ++i)
    threads.emplace_back([i] {
      for (int r = 0; r < kRounds; ++r) {
        std::vector<at::Tensor> live;
        for (int k = 0; k < kLive; ++k) live.push_back(at::empty({1000 + i * 10 + k}, at::kByte));
      }
    });
  for (auto& t : threads) t.join();
  EXPECT_EQ(cpu_tensor_memory().current_bytes, start);
  EXPECT_GE(cpu_tensor_memory().peak_bytes, start + kLive * 1000);
}

TEST_F(CountingAllocator, TheRawInterfaceCountsAndFrees) {
  c10::Allocator* a = c10::GetCPUAllocator();
  ASSERT_NE(a->raw_deleter(), nullptr);
  const int64_t start = cpu_tensor_memory().current_bytes;
  void* p = a->raw_allocate(12345);
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % 64, 0u);  // as aligned as c10's own allocations
  EXPECT_EQ(cpu_tensor_memory().current_bytes, start + 12345);
  a->raw_deallocate(p);
  EXPECT_EQ(cpu_tensor_memory().current_bytes, start);
  // Zero bytes: no memory, nothing counted, the deleter accepts it.
  c10::DataPtr empty = a->allocate(0);
  EXPECT_EQ(empty.get(), nullptr);
  EXPECT_EQ(cpu_tensor_memory().current_bytes, start);
}

TEST_F(CountingAllocator, TensorsStillComputeCorrectly) {
  at::Tensor a = at::arange(1000, at::kFloat).reshape({10, 100});
  at::Tensor b = a.matmul(a.t()).clone();
  EXPECT_FLOAT_EQ(b[0][0].item<float>(), 328350.0f);  // Σ k² for k < 100
}

// memory.limit: an allocation past the cap is refused the way the CUDA caching allocator refuses one —
// c10::OutOfMemoryError — allocating and counting nothing; the refusal names the category that asked, the bytes,
// the cap and what is in use; below the cap, and with the cap off, allocation goes on as before.
TEST_F(CountingAllocator, AnAllocationPastTheCapIsRefusedAndRecorded) {
  const int64_t start = device_side_tensor_memory().current_bytes;  // what the cap compares with
  set_cpu_tensor_memory_limit(start + 3 * kMiB);
  at::Tensor fits;
  {
    MemoryScope grads(MemoryCategory::grads);
    fits = at::empty({2 * kMiB / 4}, at::kFloat);
  }
  EXPECT_FALSE(refused_allocation().has_value());
  {
    MemoryScope activations(MemoryCategory::activations);
    EXPECT_THROW(at::empty({2 * kMiB / 4}, at::kFloat), c10::OutOfMemoryError);
  }
  EXPECT_EQ(device_side_tensor_memory().current_bytes, start + 2 * kMiB) << "the refused bytes are not counted";
  const std::optional<RefusedAllocation> refused = refused_allocation();
  ASSERT_TRUE(refused.has_value());
  EXPECT_EQ(refused->category, MemoryCategory::activations);
  EXPECT_EQ(refused->requested_bytes, 2 * kMiB);
  EXPECT_EQ(refused->in_use_bytes, start + 2 * kMiB);
  EXPECT_EQ(refused->limit_bytes, start + 3 * kMiB);
  EXPECT_GE(refused->in_use_by_category[static_cast<size_t>(MemoryCategory::grads)], 2 * kMiB);
  const std::string text = describe(*refused);
  EXPECT_NE(text.find("tried to allocate 2.0 MiB for activations"), std::string::npos) << text;
  EXPECT_EQ(to_json(*refused).at("category"), "activations");
  try {
    at::Tensor again = at::empty({2 * kMiB / 4}, at::kFloat);
    ADD_FAILURE() << "not refused";
  } catch (const c10::OutOfMemoryError& e) {
    EXPECT_NE(std::string(e.what()).find("out of memory under memory.limit"), std::string::npos) << e.what();
  }
  EXPECT_EQ(refused_allocation()->category, MemoryCategory::activations) << "the first refusal is kept";
  set_cpu_tensor_memory_limit(0);
  EXPECT_FALSE(refused_allocation().has_value()) << "a new cap starts afresh";
  EXPECT_NO_THROW(at::empty({2 * kMiB / 4}, at::kFloat));
}

// parallel.offload's host buffers: counted in their category and apart as host memory, freed from both, outside the
// device side, and not capped by memory.limit (a GPU's memory does not hold them).
TEST_F(CountingAllocator, HostMemoryIsCountedApartAndOutsideTheCap) {
  const MemoryCounters total0 = cpu_tensor_memory(), device0 = device_side_tensor_memory();
  const int64_t host0 = host_tensor_memory().current_bytes;
  const int64_t optimizer0 = cpu_tensor_memory(MemoryCategory::optimizer).current_bytes;
  const int64_t host_optimizer0 = host_tensor_memory(MemoryCategory::optimizer).current_bytes;
  set_cpu_tensor_memory_limit(device0.current_bytes + 1 * kMiB);
  {
    MemoryScope state(MemoryCategory::optimizer);
    const HostMemoryScope host;
    at::Tensor moments = at::zeros({4 * kMiB / 4}, at::kFloat);  // 4 MiB: past the cap, but host memory
    {
      const HostMemoryScope device_again(false);  // nested: back on the device side, where the cap holds
      EXPECT_THROW(at::empty({2 * kMiB / 4}, at::kFloat), c10::OutOfMemoryError);
    }
    EXPECT_EQ(host_tensor_memory().current_bytes, host0 + 4 * kMiB);
    EXPECT_EQ(host_tensor_memory(MemoryCategory::optimizer).current_bytes, host_optimizer0 + 4 * kMiB);
    EXPECT_EQ(cpu_tensor_memory(MemoryCategory::optimizer).current_bytes, optimizer0 + 4 * kMiB);
    EXPECT_EQ(cpu_tensor_memory().current_bytes, total0.current_bytes + 4 * kMiB);
    EXPECT_EQ(device_side_tensor_memory().current_bytes, device0.current_bytes);
  }
  EXPECT_EQ(host_tensor_memory().current_bytes, host0) << "freed from the host count";
  EXPECT_GE(host_tensor_memory().peak_bytes, host0 + 4 * kMiB);
  EXPECT_EQ(cpu_tensor_memory().current_bytes, total0.current_bytes);
  EXPECT_EQ(refused_allocation()->requested_bytes, 2 * kMiB);
  EXPECT_EQ(refused_allocation()->in_use_bytes, device0.current_bytes) << "the cap counts the device side only";
  set_cpu_tensor_memory_limit(0);
  StateBytes state;
  state.host = 123;
  const nlohmann::json j = memory_report(state, 0);
  EXPECT_EQ(j.at("host_bytes"), 123);
  EXPECT_GE(j.at("host_measured").at("optimizer").at("peak_bytes").get<int64_t>(), 4 * kMiB);
  EXPECT_EQ(j.at("device_side_current_bytes").get<int64_t>(), device0.current_bytes);
}

TEST(ProcessMemory, RssAndHwmArePositive) {
  const ProcessMemory m = process_memory();
  EXPECT_GT(m.rss_bytes, 0);
  EXPECT_GE(m.hwm_bytes, m.rss_bytes);
}

TEST(MemoryReport, HasTheKeysAndAnActivationEstimate) {
  install_counting_allocator();
  const at::Tensor live = at::ones({1 << 18});  // 1 MiB counted, so the peak exceeds the state below
  StateBytes state;
  state.params = 100, state.grads = 100, state.optimizer = 200, state.buffers = 0;
  const nlohmann::json j = memory_report(state, 3);
  EXPECT_EQ(j.at("rank"), 3);
  EXPECT_EQ(j.at("params_bytes"), 100);
  EXPECT_EQ(j.at("grads_bytes"), 100);
  EXPECT_EQ(j.at("optimizer_bytes"), 200);
  EXPECT_EQ(j.at("buffers_bytes"), 0);
  EXPECT_EQ(j.at("activations_bytes").get<int64_t>(), j.at("tensor_peak_bytes").get<int64_t>() - 400);
  EXPECT_GE(j.at("tensor_peak_bytes").get<int64_t>(), j.at("tensor_current_bytes").get<int64_t>());
  EXPECT_GT(j.at("rss_bytes").get<int64_t>(), 0);
  EXPECT_GT(j.at("hwm_bytes").get<int64_t>(), 0);
  EXPECT_FALSE(j.contains("cuda") && !cuda_memory().has_value());
  // State larger than the peak: the estimate floors at 0.
  state.params = int64_t{1} << 50;
  EXPECT_EQ(memory_report(state, 0).at("activations_bytes"), 0);
}

}  // namespace
}  // namespace dtlab
