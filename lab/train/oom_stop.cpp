// oom_stop.cpp: the out-of-memory agreement of a job's ranks (see oom_stop.hpp).
#include "lab/train/oom_stop.hpp"

#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>

namespace dtlab {
namespace {

constexpr const char* kClaims = "dtlab/oom/claims";
constexpr const char* kRefusal = "dtlab/oom";
constexpr const char* kWritten = "dtlab/oom/written";
constexpr std::chrono::milliseconds kPoll{50};

std::string memory_key(int rank) { return "dtlab/oom/memory/" + std::to_string(rank); }

[[noreturn]] void end_process() {
  std::fflush(nullptr);
  std::_Exit(kOutOfMemoryExitCode);  // the main thread may be blocked in a collective that will never complete
}

// The value of `key` once set, polling until `deadline`; nullopt when it was not set in time or the board went away.
std::optional<std::string> await(JobBoard& board, const std::string& key,
                                 std::chrono::steady_clock::time_point deadline) {
  try {
    while (true) {
      if (auto value = board.get(key)) return value;
      if (std::chrono::steady_clock::now() >= deadline) return std::nullopt;
      std::this_thread::sleep_for(kPoll);
    }
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

}  // namespace

OomAgreement::OomAgreement(JobBoard* board, int rank, int world_size, std::function<nlohmann::json()> memory_now)
    : board_(board), rank_(rank), world_size_(world_size), memory_now_(std::move(memory_now)) {}

void OomAgreement::listen() {
  if (board_ == nullptr) return;
  board_->watch(kRefusal, [this](const std::string& posted) {
    if (stopping_.exchange(true)) return;  // this rank's main thread is already on it
    stop_as_peer(posted, nullptr);
  });
}

std::vector<nlohmann::json> OomAgreement::claim(const nlohmann::json& refusal) {
  if (board_ == nullptr) return {memory_now_()};
  if (stopping_.exchange(true))  // the board's thread heard another rank first and will end the process
    while (true) std::this_thread::sleep_for(std::chrono::hours(1));
  if (board_->add(kClaims, 1) != 1) {
    // Another rank was refused first: it reports; wait for its refusal so the message can name it.
    const auto posted = await(*board_, kRefusal, std::chrono::steady_clock::now() + kCollectWait);
    stop_as_peer(posted.value_or("{}"), refusal);
  }
  board_->set(kRefusal, refusal.dump());
  board_->set(memory_key(rank_), memory_now_().dump());
  std::vector<nlohmann::json> memory;
  const auto deadline = std::chrono::steady_clock::now() + kCollectWait;
  for (int r = 0; r < world_size_; ++r) {
    const auto posted = await(*board_, memory_key(r), deadline);
    memory.push_back(posted ? nlohmann::json::parse(*posted)
                            : nlohmann::json{{"rank", r},
                                             {"missing", "did not post its memory within " +
                                                             std::to_string(kCollectWait.count()) + " s"}});
  }
  return memory;
}

void OomAgreement::written() {
  if (board_ != nullptr) board_->set(kWritten, "1");
}

void OomAgreement::stop_as_peer(const std::string& posted, const nlohmann::json& own_refusal) {
  const nlohmann::json refusal = nlohmann::json::parse(posted, nullptr, /*allow_exceptions=*/false);
  const std::string why = "rank " + std::to_string(rank_) + ": stopping: " +
                          (refusal.is_object() && refusal.contains("message")
                               ? refusal["message"].get<std::string>()
                               : std::string("another rank ran out of memory under memory.limit"));
  std::fprintf(stderr, "%s\n", why.c_str());
  try {
    nlohmann::json memory = memory_now_();
    if (!own_refusal.is_null()) memory["refused"] = own_refusal;
    board_->set(memory_key(rank_), memory.dump());
  } catch (const std::exception&) {
    // The board went away: the reporter is gone too; end like the others.
  }
  await(*board_, kWritten, std::chrono::steady_clock::now() + kWrittenWait);
  end_process();
}

}  // namespace dtlab
