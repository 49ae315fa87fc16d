// train_checkpoint.hpp: saving a run's training state to checkpoints and resuming from them (checkpoint.* keys;
// the format is lab/checkpoint/store.hpp; docs/checkpointing.md). Not to be confused with activation checkpointing
// (lab/train/checkpoint.hpp), which recomputes activations and saves nothing.
//
// What a checkpoint holds: the strategy's state pieces (master parameters and optimizer state, in whatever shards
// this strategy keeps; Strategy::state_pieces), its scalars (optimizer steps, loss scaler), the trainer's positions
// (steps done: the data sampler and the LR schedule are functions of the step), every rank's CPU generator state and
// the config. Loading matches tensors by name and element range (of N-D chunks: a tensor-parallel slice), so a
// checkpoint loads into another strategy, world size or model-parallel layout (resharding) as long as the model and
// optimizer are the same.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>

#include <nlohmann/json.hpp>

#include "lab/config.hpp"
#include "lab/train/state_pieces.hpp"
#include "lab/train/strategy.hpp"
#include "lab/world.hpp"

namespace dtlab {

// What one save cost this rank, for the step line and result.json "checkpoints".
struct SaveRecord {
  int64_t step = 0;
  std::string path;            // the step directory (complete once the save is finished)
  int64_t bytes_here = 0;      // training-state bytes this rank wrote (its RNG row and the file header excluded)
  int64_t total_bytes = 0;     // rank 0: training-state bytes of the whole checkpoint, every rank's file
  double blocking_ms = 0;      // time the training loop was held (snapshot and, when blocking, the write)
  double write_ms = 0;         // time writing this rank's file took (on the background thread when async)
  int64_t snapshot_bytes = 0;  // async: the copy of the state held until written
  // Tensor memory the save held beyond the training state, counted by the allocator (the async snapshot, or the
  // contiguous copies a blocking save makes of strided pieces): the allocator's bytes once every piece is ready to
  // write, less its bytes before the save. 0 when the counting allocator is not installed.
  int64_t extra_bytes = 0;
};

class CheckpointSaver {
 public:
  // REQUIRES: config.checkpoint.dir is set. Removes saves a crash interrupted (rank 0, before any save can start).
  // `layout` places this rank's model-parallel slices in the whole tensors (lab/train/state_pieces.hpp).
  CheckpointSaver(const Config& config, World& world, std::string strategy_id, StateLayout layout = {});
  ~CheckpointSaver();  // joins a background write (does not commit across ranks: call finish())
  CheckpointSaver(const CheckpointSaver&) = delete;
  CheckpointSaver& operator=(const CheckpointSaver&) = delete;

  // Whether to save after step `step` (1-based) of `total`: every checkpoint.every steps, and after the last.
  bool due(int64_t step, int64_t total) const;
  // Saves the state after `step` optimizer steps; `positions` are the trainer's scalars. Blocking: returns when the
  // checkpoint is complete for every rank. Async: copies the pieces, writes them on a background thread and returns;
  // rank 0's thread commits once every rank's file is in place. Collective (a previous async save is finished first).
  void save(int64_t step, Strategy& strategy, const std::map<std::string, double>& positions);
  // Waits for an async save and agrees with every rank that it is complete. Collective; call before the run ends.
  void finish();
  const std::vector<SaveRecord>& records() const { return records_; }

 private:
  void write_rank_file(int64_t step, const std::string& partial, std::vector<StatePiece> pieces,
                       const std::map<std::string, double>& scalars, SaveRecord& record);
  // Rank 0: metadata.json once every rank's file is there, the rename, keep. Returns the state bytes of all files.
  int64_t commit_when_complete(int64_t step, const std::string& partial, bool wait_for_files);

  Config config_;
  World& world_;
  std::string strategy_id_;
  StateLayout layout_;
  std::thread background_;
  std::string background_error_;
  std::vector<SaveRecord> records_;
};

struct ResumePoint {
  int64_t step = 0;        // optimizer steps the checkpoint holds
  std::string path;        // its step directory
  std::string saved_by;    // "fsdp_full_shard at world 2"
  double load_ms = 0;      // reading, checking and placing this rank's pieces, and restoring
  int64_t bytes_read = 0;  // bytes of stored pieces this rank read
};

// checkpoint.resume: auto = the latest complete checkpoint under checkpoint.dir (none there: start at step 0),
// never = start at step 0 (refused when checkpoint.dir already holds checkpoints: they would be overwritten), or a
// path. Loads it into `strategy` (wrapped), its slices placed by `layout`. Collective. Throws
// checkpoint::CheckpointError naming the file and the problem (missing rank file, checksum, truncation, another
// model shape or optimizer).
std::optional<ResumePoint> resume_if_asked(const Config& config, Strategy& strategy, World& world,
                                           const StateLayout& layout = {});

// Loads the checkpoint at `path` (a step directory, or a directory of them: the latest) into `strategy`. Collective:
// the ranks agree on success before restoring, so when one rank fails to read (a damaged piece only it reads) every
// rank stops at once, the others naming the rank that failed, instead of waiting in a collective until the timeout.
ResumePoint load_checkpoint(const std::string& path, const Config& config, Strategy& strategy, World& world,
                            const StateLayout& layout = {});

nlohmann::json to_json(const SaveRecord& record);

// Which attempt of the job this is: DTLAB_RESTART_COUNT from `dtlab launch --max-restarts` (0 when unset).
int restart_count();

}  // namespace dtlab
