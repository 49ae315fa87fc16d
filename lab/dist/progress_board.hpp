// progress_board.hpp: every rank's heartbeat in the rendezvous store, and the diagnosis of a failed collective.
//
// A background thread publishes "dtlab/progress/<rank>" = "<beat> <status>" twice a second over its own store
// connection (status: the step and the last collective this rank issued). When a collective fails or times out,
// diagnose() reads the board twice, a little more than two beats apart: a rank whose beat did not move has died
// or stalled, and is named with where it was. If the store itself cannot be reached, rank 0 (its host) is named.
//   "rank 1 stopped reporting (dead or stalled); it was at step 3, last collective #57 all_reduce 'ddp.bucket.0'"
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

#include <c10/util/intrusive_ptr.h>

namespace c10d {
class Store;
}  // namespace c10d

namespace dtlab {

class ProgressBoard {
 public:
  // A new client connection to the job's store whose operations give up after `timeout`.
  using StoreFactory = std::function<c10::intrusive_ptr<c10d::Store>(std::chrono::milliseconds timeout)>;

  // `status` is called on the heartbeat thread: it must be thread-safe. `store_address` names the store in errors.
  ProgressBoard(StoreFactory make_store, std::string store_address, int rank, int world_size,
                std::function<std::string()> status);
  ~ProgressBoard();  // stops the heartbeat
  ProgressBoard(const ProgressBoard&) = delete;
  ProgressBoard& operator=(const ProgressBoard&) = delete;

  // What the other ranks were doing, naming those that stopped reporting; takes about 1.5 s. Never throws.
  std::string diagnose() const;

  static constexpr std::chrono::milliseconds kBeat{500};

 private:
  void run();

  StoreFactory make_store_;
  std::string store_address_;
  int rank_, world_size_;
  std::function<std::string()> status_;
  std::mutex mutex_;
  std::condition_variable wake_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace dtlab
