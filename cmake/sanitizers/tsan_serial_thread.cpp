// tsan_serial_thread.cpp: ThreadSanitizer probe of lab/comm/serial_thread.hpp (cmake/sanitizers/tsan_probe.sh).
// Three threads post tasks that append to a vector only the worker touches and fulfil a promise each; the posters
// wait for every promise, read the vector, then destroy the SerialThread with one task still posted. 50 rounds.
// A race in the queue, the stop flag or the join is reported by TSan and fails the probe (exit 66).
#include <cstdio>
#include <future>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "lab/comm/serial_thread.hpp"

int main() {
  constexpr int kRounds = 50, kPosters = 3, kTasksEach = 20;
  long ran = 0;
  for (int round = 0; round < kRounds; ++round) {
    std::vector<long> seen;  // written by the worker only; read once every promise is fulfilled
    std::vector<std::future<void>> done;
    std::mutex done_mutex;
    dtlab::SerialThread serial;
    std::vector<std::thread> posters;
    for (int p = 0; p < kPosters; ++p)
      posters.emplace_back([&, p] {
        for (int i = 0; i < kTasksEach; ++i) {
          auto promise = std::make_shared<std::promise<void>>();
          {
            const std::lock_guard<std::mutex> lock(done_mutex);
            done.push_back(promise->get_future());
          }
          serial.post([&seen, promise, p, i] {
            seen.push_back(p * 100L + i);
            promise->set_value();
          });
        }
      });
    for (std::thread& t : posters) t.join();
    for (std::future<void>& f : done) f.wait();
    ran += static_cast<long>(seen.size());
    serial.post([] {});  // still queued at destruction: dropped or run, never raced
  }
  std::printf("tsan_serial_thread: %ld tasks ran in order of posting per thread\n", ran);
  return ran == long{kRounds} * kPosters * kTasksEach ? 0 : 1;
}
