// store.hpp: the on-disk layout of dtlab training checkpoints, torch-free (docs/checkpointing.md).
//
//   checkpoint.dir/step_00000010/           one complete checkpoint (the state after optimizer step 10)
//       rank00000.safetensors               rank 0's pieces of the training state (safetensors.hpp)
//       rank00001.safetensors
//       metadata.json                       written last: every tensor, its global shape and dtype, the files and
//                                           element ranges that hold it and their checksums, the scalars, the config
//   checkpoint.dir/step_00000020.partial/   a save in progress, or one a crash interrupted: never loaded
//
// A tensor of the training state ("param.<name>", "optim.exp_avg.<name>", ...) is stored as pieces: element ranges
// [begin, begin + numel) of the flattened tensor, or of one N-D chunk of it (a tensor-parallel slice: chunk.hpp), each
// a 1-D safetensors tensor keyed "<name>@<begin>" ("<name>[<chunk>]@<begin>") in the file of the rank that held it.
// Each rank file's "__metadata__" says, under "dtlab.pieces", which tensor and range each key is and its CRC-32;
// collect() builds metadata.json from those headers alone. A save is complete when the directory lost its ".partial":
// commit() writes metadata.json, then renames the directory.
//
// A file named in metadata.json is a plain name inside its step directory: from_json refuses a name with a ".."
// component, an absolute path or a path separator, and read_metadata a rank file that is a symbolic link or no
// regular file, so a metadata.json cannot make dtlab read a file outside its checkpoint.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "lab/checkpoint/chunk.hpp"
#include "lab/checkpoint/safetensors.hpp"

namespace dtlab::checkpoint {

// A checkpoint that cannot be written, found or read. The message names the file or directory and what is wrong.
struct CheckpointError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

inline constexpr const char* kMetadataFile = "metadata.json";
inline constexpr const char* kPiecesKey = "dtlab.pieces";    // rank file __metadata__: the pieces, as JSON
inline constexpr const char* kScalarsKey = "dtlab.scalars";  // rank file __metadata__: the scalars, as JSON

struct Piece {
  std::string file;              // rank file name inside the step directory
  std::string key;               // its safetensors key
  int64_t begin = 0, numel = 0;  // the range of `chunk`'s row-major flattening it holds
  uint32_t crc32 = 0;
  Chunk chunk;  // the box of the whole tensor the range is of (the whole tensor for a 1-D piece)
};

struct TensorInfo {
  std::vector<int64_t> shape;
  std::string dtype;          // safetensors spelling
  std::vector<Piece> pieces;  // sorted by chunk, then begin; the chunks tile the tensor, the ranges each chunk
};

struct Metadata {
  int64_t step = 0;  // optimizer steps completed
  int world_size = 0;
  std::string strategy;
  nlohmann::json config;                  // the run's config (to_json)
  std::map<std::string, double> scalars;  // optimizer steps, loss scaler, data and schedule positions
  std::vector<std::string> files;         // rank files, rank order
  std::map<std::string, TensorInfo> tensors;
  int64_t total_bytes = 0;  // tensor bytes over all files

  nlohmann::json to_json() const;
  // Throws CheckpointError naming `origin` for a malformed document, or a file name that is not a plain name (a ".."
  // component, an absolute path, a path separator) or a piece's file that "files" does not list.
  static Metadata from_json(const nlohmann::json& j, const std::string& origin);
};

// A piece as a rank file records it in its header (the name, shape, begin and checksum of one safetensors key).
struct PieceRecord {
  std::string name;
  std::vector<int64_t> shape;
  int64_t begin = 0;
  uint32_t crc32 = 0;
  Chunk chunk;  // empty offsets and shape: the whole tensor
};
// "<name>@<begin>", or "<name>[<chunk>]@<begin>" for a piece of a chunk that is not the whole tensor.
std::string piece_key(const std::string& name, int64_t begin, const Chunk& chunk = {});
std::string pieces_to_json(const std::map<std::string, PieceRecord>& by_key);

std::string rank_file_name(int rank);  // rank00003.safetensors
std::string step_dir(const std::string& dir, int64_t step);
std::string partial_dir(const std::string& dir, int64_t step);

// Complete checkpoints under `dir` (those with metadata.json and no ".partial"), by ascending step. A missing dir
// has none; throws CheckpointError when `dir` is a file.
std::vector<std::pair<int64_t, std::string>> complete_checkpoints(const std::string& dir);
std::optional<std::string> latest_checkpoint(const std::string& dir);
// Removes the ".partial" directories under `dir` (saves a crash interrupted). Returns their paths.
std::vector<std::string> remove_partials(const std::string& dir);

// metadata.json for the `world_size` rank files in `partial`: reads every header, checks that every tensor's pieces
// tile it exactly (chunk.hpp tiling_problem: no gap, no overlap; one shape and dtype). Throws CheckpointError naming
// the file.
Metadata collect(const std::string& partial, int world_size, int64_t step, const std::string& strategy,
                 const nlohmann::json& config);
// Writes metadata.json into `partial` (atomically), then renames `partial` to `final_dir`. `before_rename` runs
// between the two (a fault-injection point: a crash there leaves a .partial directory with its metadata.json).
void commit(const std::string& partial, const std::string& final_dir, const Metadata& metadata,
            const std::function<void()>& before_rename = nullptr);
// Deletes the oldest complete checkpoints beyond `keep` (0 = keep all); never the newest. Returns what it removed.
std::vector<std::string> prune(const std::string& dir, int64_t keep);

// A step directory's metadata, or (given checkpoint.dir) its latest one's. Checks that every rank file exists and is
// a regular file in the step directory (not a symbolic link). Refuses a ".partial" directory: it is never loaded.
Metadata read_metadata(const std::string& path, std::string* step_dir_out = nullptr);

// Reads the stored pieces of one step directory, each rank file's header parsed once: a piece's bytes, checked
// against its checksum and its size in metadata.json (CheckpointError naming the file and tensor otherwise).
class PieceReader {
 public:
  explicit PieceReader(std::string dir) : dir_(std::move(dir)) {}
  std::vector<char> read(const TensorInfo& info, const Piece& piece);
  int64_t bytes_read() const { return bytes_read_; }

 private:
  std::string dir_;
  std::map<std::string, safetensors::Header> headers_;
  int64_t bytes_read_ = 0;
};

// The whole tensor `name` of the checkpoint in step directory `dir` as row-major bytes, assembled from its pieces
// (each checked against its checksum), reading only the pieces whose chunk meets `wanted` (nullopt: all of them);
// elements outside every piece read are zero. `bytes_read` (if given) grows by the piece bytes read. Throws
// CheckpointError naming the file of a damaged piece.
std::vector<char> read_whole_tensor(const std::string& dir, const Metadata& metadata, const std::string& name,
                                    const std::optional<Chunk>& wanted = std::nullopt, int64_t* bytes_read = nullptr);

// `dtlab checkpoint inspect`: the metadata as text, and with `verify` every piece's bytes against its checksum.
// Returns the text; `problems` counts what failed verification (each is named in the text).
std::string inspect(const std::string& path, bool verify, int& problems);

}  // namespace dtlab::checkpoint
