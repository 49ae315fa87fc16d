// store_board.cpp: the job's board on the rendezvous store (see store_board.hpp).
#include "lab/dist/store_board.hpp"

#include <stdexcept>
#include <vector>

#include <torch/csrc/distributed/c10d/Store.hpp>

namespace dtlab {
namespace {

constexpr std::chrono::seconds kStoreTimeout{10};

std::vector<uint8_t> bytes_of(const std::string& text) { return {text.begin(), text.end()}; }

}  // namespace

StoreBoard::StoreBoard(StoreFactory make_store) : make_store_(std::move(make_store)) {}

StoreBoard::~StoreBoard() {
  {
    std::lock_guard<std::mutex> lock(watch_mutex_);
    stop_ = true;
  }
  wake_.notify_all();
  if (watcher_.joinable()) watcher_.join();
}

c10d::Store& StoreBoard::store() {
  if (!store_) store_ = make_store_(kStoreTimeout);
  return *store_;
}

void StoreBoard::set(const std::string& key, const std::string& value) {
  std::lock_guard<std::mutex> lock(mutex_);
  store().set(key, bytes_of(value));
}

std::optional<std::string> StoreBoard::get(const std::string& key) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!store().check({key})) return std::nullopt;
  const std::vector<uint8_t> value = store().get(key);
  return std::string(value.begin(), value.end());
}

int64_t StoreBoard::add(const std::string& key, int64_t delta) {
  std::lock_guard<std::mutex> lock(mutex_);
  return store().add(key, delta);
}

void StoreBoard::watch(const std::string& key, std::function<void(const std::string& value)> handler) {
  if (watcher_.joinable()) throw std::logic_error("StoreBoard::watch: one watch per board, and one is running");
  watcher_ = std::thread([this, key, handler = std::move(handler)] { run_watch(key, handler); });
}

void StoreBoard::run_watch(std::string key, std::function<void(const std::string&)> handler) {
  try {
    auto store = make_store_(kStoreTimeout);
    std::unique_lock<std::mutex> lock(watch_mutex_);
    while (!stop_) {
      lock.unlock();
      if (store->check({key})) {
        const std::vector<uint8_t> value = store->get(key);
        handler(std::string(value.begin(), value.end()));
        return;
      }
      lock.lock();
      wake_.wait_for(lock, kPoll, [this] { return stop_; });
    }
  } catch (const std::exception&) {
    // The store went away (rank 0 exited, or the job is ending): nothing more will be posted.
  }
}

}  // namespace dtlab
