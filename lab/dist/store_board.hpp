// store_board.hpp: the job's board (lab/world.hpp JobBoard) on the rendezvous store, over connections of its own:
// one for the calling threads (behind a mutex) and one for the watch thread, so neither waits on the trainer's or
// the heartbeat's use of the store.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

#include <c10/util/intrusive_ptr.h>

#include "lab/world.hpp"

namespace c10d {
class Store;
}  // namespace c10d

namespace dtlab {

class StoreBoard final : public JobBoard {
 public:
  // A new client connection to the job's store whose operations give up after `timeout`.
  using StoreFactory = std::function<c10::intrusive_ptr<c10d::Store>(std::chrono::milliseconds timeout)>;

  explicit StoreBoard(StoreFactory make_store);
  ~StoreBoard() override;  // stops the watch
  StoreBoard(const StoreBoard&) = delete;
  StoreBoard& operator=(const StoreBoard&) = delete;

  void set(const std::string& key, const std::string& value) override;
  std::optional<std::string> get(const std::string& key) override;
  int64_t add(const std::string& key, int64_t delta) override;
  void watch(const std::string& key, std::function<void(const std::string& value)> handler) override;

  static constexpr std::chrono::milliseconds kPoll{50};

 private:
  c10d::Store& store();  // REQUIRES: mutex_ held
  void run_watch(std::string key, std::function<void(const std::string&)> handler);

  StoreFactory make_store_;
  std::mutex mutex_;
  c10::intrusive_ptr<c10d::Store> store_;  // made on first use
  std::mutex watch_mutex_;
  std::condition_variable wake_;
  bool stop_ = false;
  std::thread watcher_;
};

}  // namespace dtlab
