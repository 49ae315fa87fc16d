// oom_stop.hpp: every rank stops when one runs out of memory under memory.limit, and the job records it once.
//
// The rank whose allocation was refused cannot finish its step, so the others would wait in their next collective
// until the timeout. Instead the ranks agree through the job's board (the rendezvous store, lab/world.hpp), which
// needs no collective:
//   1. the refused rank claims the report ("dtlab/oom/claims": the first claim wins; a second refused rank is a
//      peer like the others) and posts its refusal under "dtlab/oom";
//   2. every other rank hears it within a poll (on the board's thread: its main thread may be blocked in a
//      collective), posts its memory at that moment under "dtlab/oom/memory/<rank>", says why on stderr and waits;
//   3. the reporting rank collects every rank's memory (kCollectWait at most: a rank that never answers is named),
//      writes result.json with status oom, and posts "dtlab/oom/written";
//   4. the others end their process with kOutOfMemoryExitCode once it is written (kWrittenWait at most), and the
//      reporter's train() throws OutOfMemoryStop.
// In a single-process world there is nobody to agree with: the refusal and this rank's memory are the record.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <optional>
#include <vector>

#include <nlohmann/json.hpp>

#include "lab/results_schema.hpp"
#include "lab/train/trainer.hpp"
#include "lab/world.hpp"

namespace dtlab {

using schema::kOutOfMemoryExitCode;  // every rank's exit status after the stop (lab/results_schema.hpp)

// Thrown by train() on the reporting rank once result.json records the stop; the message names the rank, the
// category that asked, the bytes requested and the cap.
struct OutOfMemoryStop : TrainingError {
  using TrainingError::TrainingError;
};

class OomAgreement {
 public:
  static constexpr std::chrono::seconds kCollectWait{30};
  static constexpr std::chrono::seconds kWrittenWait{60};

  // `board` may be null (one process). `memory_now` gives this rank's memory report; it is called on the board's
  // thread too, so it must be thread-safe.
  OomAgreement(JobBoard* board, int rank, int world_size, std::function<nlohmann::json()> memory_now);

  // From now on a peer's refusal stops this rank (steps 2 and 4 above).
  void listen();

  // On the rank whose allocation was refused, after the exception (steps 1 and 3). Returns every rank's memory
  // report, in rank order, when this rank reports; when another rank claimed first it acts as a peer and ends the
  // process. `refusal` must hold "rank".
  std::vector<nlohmann::json> claim(const nlohmann::json& refusal);

  // After result.json is written: lets the other ranks go.
  void written();

 private:
  // Steps 2 and 4 on this rank: post its memory (with its own refusal, if any), wait for the record, exit.
  [[noreturn]] void stop_as_peer(const std::string& posted, const nlohmann::json& own_refusal);

  JobBoard* board_;
  int rank_, world_size_;
  std::function<nlohmann::json()> memory_now_;
  std::atomic<bool> stopping_{false};  // one path per process: the board's thread or the main thread
};

}  // namespace dtlab
