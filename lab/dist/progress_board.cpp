// progress_board.cpp: the heartbeat thread and the diagnosis of a failed collective (see progress_board.hpp).
#include "lab/dist/progress_board.hpp"

#include <map>
#include <vector>

#include <torch/csrc/distributed/c10d/Store.hpp>

namespace dtlab {
namespace {

std::string key_of(int rank) { return "dtlab/progress/" + std::to_string(rank); }

struct Beat {
  long long count = -1;  // -1: nothing published
  std::string status;
};

// Every rank's last beat; throws when the store cannot be reached.
std::vector<Beat> read_board(c10d::Store& store, int world_size) {
  std::vector<std::string> keys;
  for (int r = 0; r < world_size; ++r) keys.push_back(key_of(r));
  std::vector<Beat> out(static_cast<size_t>(world_size));
  for (int r = 0; r < world_size; ++r) {
    if (!store.check({keys[static_cast<size_t>(r)]})) continue;
    const auto bytes = store.get(keys[static_cast<size_t>(r)]);
    const std::string text(bytes.begin(), bytes.end());
    const auto space = text.find(' ');
    out[static_cast<size_t>(r)] = {std::atoll(text.substr(0, space).c_str()),
                                   space == std::string::npos ? "" : text.substr(space + 1)};
  }
  return out;
}

}  // namespace

ProgressBoard::ProgressBoard(StoreFactory make_store, std::string store_address, int rank, int world_size,
                             std::function<std::string()> status)
    : make_store_(std::move(make_store)),
      store_address_(std::move(store_address)),
      rank_(rank),
      world_size_(world_size),
      status_(std::move(status)) {
  thread_ = std::thread([this] { run(); });
}

ProgressBoard::~ProgressBoard() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  wake_.notify_all();
  thread_.join();
}

void ProgressBoard::run() {
  try {
    auto store = make_store_(std::chrono::seconds(5));
    long long beat = 0;
    std::string published;
    auto last = std::chrono::steady_clock::now() - kBeat;
    std::unique_lock<std::mutex> lock(mutex_);
    while (!stop_) {
      lock.unlock();
      // A beat every kBeat, and at once when the status changes (polled 10 times a beat), so the board says
      // where a rank was even when it stalls right after a change.
      const std::string status = status_();
      const auto now = std::chrono::steady_clock::now();
      if (status != published || now - last >= kBeat) {
        const std::string value = std::to_string(++beat) + " " + status;
        store->set(key_of(rank_), std::vector<uint8_t>(value.begin(), value.end()));
        published = status;
        last = now;
      }
      lock.lock();
      wake_.wait_for(lock, kBeat / 10, [this] { return stop_; });
    }
  } catch (const std::exception&) {
    // The store went away (rank 0 exited, or the job is ending): the board falls silent, training decides.
  }
}

std::string ProgressBoard::diagnose() const {
  try {
    auto store = make_store_(std::chrono::seconds(3));
    const std::vector<Beat> first = read_board(*store, world_size_);
    std::this_thread::sleep_for(kBeat * 3);
    const std::vector<Beat> second = read_board(*store, world_size_);
    std::string stopped, others;
    for (int r = 0; r < world_size_; ++r) {
      if (r == rank_) continue;
      const Beat& now = second[static_cast<size_t>(r)];
      const std::string where = now.status.empty() ? "it never reported" : "it was at " + now.status;
      if (now.count == first[static_cast<size_t>(r)].count)
        stopped += (stopped.empty() ? "" : "; ") + std::string("rank ") + std::to_string(r) +
                   " stopped reporting (dead or stalled); " + where;
      else
        others +=
            (others.empty() ? "" : "; ") + std::string("rank ") + std::to_string(r) + " is alive at " + now.status;
    }
    if (!stopped.empty()) return stopped;
    return others.empty() ? "" : "every other rank is alive: " + others;
  } catch (const std::exception&) {
    return "the rendezvous store at " + store_address_ +
           " cannot be reached: rank 0, which hosts it, has exited or stalled";
  }
}

}  // namespace dtlab
