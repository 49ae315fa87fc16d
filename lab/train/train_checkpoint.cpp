// train_checkpoint.cpp: saving and resuming training state (see train_checkpoint.hpp).
#include "lab/train/train_checkpoint.hpp"

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <mutex>
#include <set>
#include <utility>

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/core/Generator.h>

#include "lab/checkpoint/safetensors.hpp"
#include "lab/checkpoint/store.hpp"
#include "lab/instrument/fault_injection.hpp"
#include "lab/memory.hpp"

namespace dtlab {

namespace fs = std::filesystem;
using checkpoint::CheckpointError;

namespace {

constexpr const char* kRngPiece = "rng.cpu";  // every rank's CPU generator state, one row per rank

double ms_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
}

// The safetensors dtype names of the tensor types a checkpoint holds: one table, read both ways.
constexpr std::array<std::pair<const char*, at::ScalarType>, 6> kSafetensorsDtypes = {{{"F32", at::kFloat},
                                                                                       {"BF16", at::kBFloat16},
                                                                                       {"F16", at::kHalf},
                                                                                       {"F64", at::kDouble},
                                                                                       {"I64", at::kLong},
                                                                                       {"U8", at::kByte}}};

std::string safetensors_dtype(at::ScalarType t) {
  for (const auto& [name, type] : kSafetensorsDtypes)
    if (type == t) return name;
  throw std::invalid_argument(std::string("checkpoint: no safetensors dtype for ") + c10::toString(t));
}

at::ScalarType scalar_type_of(const std::string& dtype, const std::string& where) {
  for (const auto& [name, type] : kSafetensorsDtypes)
    if (dtype == name) return type;
  throw CheckpointError("checkpoint " + where + ": dtype " + dtype + " is not one dtlab reads");
}

// The CPU generator's state as a piece of the "rng.cpu" tensor (one row per rank).
StatePiece rng_piece(const World& world) {
  at::Tensor state = at::detail::getDefaultCPUGenerator().get_state();
  const int64_t n = state.numel();
  return {.name = kRngPiece,
          .shape = {world.world_size(), n},
          .begin = world.rank() * n,
          .data = state.view({-1}),
          .written_here = true,
          .chunk = {}};
}

// A barrier that also tells every rank whether any rank failed (`failed` here): true when one did.
bool any_rank_failed(World& world, bool failed) { return world.all_reduce_max(failed ? 1.0 : 0.0) > 0.0; }

// The same barrier, answering which rank failed: the highest failing rank, or -1 when none did.
int failing_rank(World& world, bool failed) {
  return static_cast<int>(world.all_reduce_max(failed ? world.rank() + 1.0 : 0.0)) - 1;
}

}  // namespace

CheckpointSaver::CheckpointSaver(const Config& config, World& world, std::string strategy_id, StateLayout layout)
    : config_(config), world_(world), strategy_id_(std::move(strategy_id)), layout_(std::move(layout)) {
  if (world_.is_main()) {
    std::error_code ec;
    if (fs::exists(config_.checkpoint.dir, ec) && !fs::is_directory(config_.checkpoint.dir, ec))
      throw CheckpointError("checkpoint.dir=" + config_.checkpoint.dir + " is a file, not a directory");
    fs::create_directories(config_.checkpoint.dir, ec);
    if (ec) throw CheckpointError("checkpoint.dir=" + config_.checkpoint.dir + " cannot be created: " + ec.message());
    for (const std::string& removed : checkpoint::remove_partials(config_.checkpoint.dir))
      std::printf(
          "checkpoint: removed %s, a save a crash interrupted before its commit (a .partial save is never "
          "loaded)\n",
          removed.c_str());
    std::fflush(stdout);
  }
}

CheckpointSaver::~CheckpointSaver() {
  if (background_.joinable()) background_.join();
}

bool CheckpointSaver::due(int64_t step, int64_t total) const {
  const int64_t every = config_.checkpoint.every;
  return step == total || (every > 0 && step % every == 0);
}

void CheckpointSaver::write_rank_file(int64_t step, const std::string& partial, std::vector<StatePiece> pieces,
                                      const std::map<std::string, double>& scalars, SaveRecord& record) {
  const auto start = std::chrono::steady_clock::now();
  std::error_code ec;
  fs::create_directories(partial, ec);
  if (!fs::is_directory(partial))
    throw CheckpointError("checkpoint: cannot create " + partial + (ec ? ": " + ec.message() : std::string()));
  std::vector<safetensors::TensorToWrite> tensors;
  std::map<std::string, checkpoint::PieceRecord> records;
  for (StatePiece& p : pieces) {
    if (!p.written_here) continue;
    p.data = p.data.to(at::kCPU).contiguous();  // a device piece is written from a host copy
    const std::string key = checkpoint::piece_key(p.name, p.begin, p.chunk);
    const auto nbytes = static_cast<int64_t>(p.data.nbytes());
    tensors.push_back({key, safetensors_dtype(p.data.scalar_type()), {p.data.numel()}, p.data.data_ptr()});
    records[key] = {p.name, p.shape, p.begin, safetensors::crc32_of(p.data.data_ptr(), nbytes), p.chunk};
    if (p.name != kRngPiece) record.bytes_here += nbytes;
  }
  std::map<std::string, std::string> metadata = {{checkpoint::kPiecesKey, checkpoint::pieces_to_json(records)},
                                                 {checkpoint::kScalarsKey, nlohmann::json(scalars).dump()},
                                                 {"format", "pt"}};  // what safetensors' torch loader expects
  safetensors::write_file((fs::path(partial) / checkpoint::rank_file_name(world_.rank())).string(), tensors, metadata);
  record.step = step;
  record.write_ms = ms_since(start);
}

int64_t CheckpointSaver::commit_when_complete(int64_t step, const std::string& partial, bool wait_for_files) {
  const int w = world_.world_size();
  if (wait_for_files) {  // async: the other ranks' files appear (by rename) when they are whole
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::minutes(10);
    for (int r = 0; r < w; ++r)
      while (!fs::exists(fs::path(partial) / checkpoint::rank_file_name(r))) {
        if (std::chrono::steady_clock::now() > deadline)
          throw CheckpointError("checkpoint: rank " + std::to_string(r) + "'s file never appeared in " + partial +
                                " (10 min); the save stays incomplete");
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
      }
  }
  const int rank = world_.rank();
  inject_fault("ckpt_before_commit", rank, step);
  const checkpoint::Metadata meta = checkpoint::collect(partial, w, step, strategy_id_, to_json(config_));
  checkpoint::commit(partial, checkpoint::step_dir(config_.checkpoint.dir, step), meta,
                     [rank, step] { inject_fault("ckpt_metadata_written", rank, step); });
  inject_fault("ckpt_after_commit", rank, step);
  checkpoint::prune(config_.checkpoint.dir, config_.checkpoint.keep);
  int64_t rng_bytes = 0;
  if (const auto rng = meta.tensors.find(kRngPiece); rng != meta.tensors.end()) {
    rng_bytes = safetensors::dtype_size(rng->second.dtype);
    for (const int64_t d : rng->second.shape) rng_bytes *= d;
  }
  return meta.total_bytes - rng_bytes;
}

void CheckpointSaver::save(int64_t step, Strategy& strategy, const std::map<std::string, double>& positions) {
  finish();
  const auto start = std::chrono::steady_clock::now();
  std::map<std::string, double> scalars = strategy.state_scalars();
  scalars.insert(positions.begin(), positions.end());
  std::vector<StatePiece> pieces = strategy.state_pieces();
  place_in_whole_tensors(pieces, layout_);
  pieces.push_back(rng_piece(world_));
  const std::string partial = checkpoint::partial_dir(config_.checkpoint.dir, step);
  SaveRecord record;
  record.path = checkpoint::step_dir(config_.checkpoint.dir, step);
  {
    // Every piece as the bytes the file takes: an async save's snapshot (alive until the background write is done),
    // a blocking save's contiguous copies of strided pieces (most pieces are contiguous already and copy nothing).
    // The snapshot is host memory, as DCP's async save stages to the host: outside the device side and its cap.
    const int64_t before = cpu_tensor_memory().current_bytes;
    MemoryScope copies(MemoryCategory::buffers);
    const HostMemoryScope snapshot_on_host(config_.checkpoint.async);
    for (StatePiece& p : pieces)
      if (p.written_here) {
        if (config_.checkpoint.async) {
          p.data = p.data.is_cpu() ? p.data.clone(at::MemoryFormat::Contiguous) : p.data.to(at::kCPU).contiguous();
          record.snapshot_bytes += static_cast<int64_t>(p.data.nbytes());
        } else {
          p.data = p.data.to(at::kCPU).contiguous();
        }
      }
    record.extra_bytes = cpu_tensor_memory().current_bytes - before;
  }
  if (config_.checkpoint.async) {
    record.blocking_ms = ms_since(start);
    records_.push_back(record);
    const bool commits = world_.is_main();
    background_ = std::thread([this, step, partial, pieces = std::move(pieces), scalars, commits]() mutable {
      try {
        write_rank_file(step, partial, std::move(pieces), scalars, records_.back());
        pieces.clear();  // the snapshot's memory goes back as soon as it is written
        inject_fault("ckpt_async_written", world_.rank(), step);
        if (commits) records_.back().total_bytes = commit_when_complete(step, partial, /*wait_for_files=*/true);
      } catch (const std::exception& e) {
        background_error_ = e.what();
      }
    });
    return;
  }
  std::string error;
  try {
    write_rank_file(step, partial, std::move(pieces), scalars, record);
  } catch (const std::exception& e) {
    error = e.what();
  }
  inject_fault("ckpt_shards_written", world_.rank(), step);
  if (!any_rank_failed(world_, !error.empty()) && world_.is_main()) {  // every rank's file is in place
    try {
      record.total_bytes = commit_when_complete(step, partial, /*wait_for_files=*/false);
    } catch (const std::exception& e) {
      error = e.what();
    }
  }
  const bool failed = any_rank_failed(world_, !error.empty());
  record.blocking_ms = ms_since(start);
  records_.push_back(record);
  if (failed)
    throw CheckpointError(error.empty() ? "checkpoint: another rank failed to save step " + std::to_string(step)
                                        : error);
}

void CheckpointSaver::finish() {
  if (!background_.joinable()) return;
  background_.join();
  const std::string error = std::exchange(background_error_, {});
  if (any_rank_failed(world_, !error.empty()))
    throw CheckpointError(error.empty() ? "checkpoint: another rank's background save failed" : error);
}

namespace {

// Reads this rank's part of the checkpoint at `path` into the strategy's state pieces (and the RNG), every check on
// the way; `dir` and `bytes_read` are set. Not collective: a failure here is this rank's alone.
checkpoint::Metadata read_checkpoint_pieces(const std::string& path, const Config& config, Strategy& strategy,
                                            const StateLayout& layout, World& world, std::string& dir,
                                            int64_t& bytes_read) {
  checkpoint::Metadata meta = checkpoint::read_metadata(path, &dir);
  // The same model and optimizer: anything else (strategy, world size, precision, wrap) may differ.
  const nlohmann::json here = to_json(config);
  for (const std::string section : {"model"})
    for (const auto& [key, value] : here.at(section).items())
      if (meta.config.contains(section) && meta.config[section].contains(key) && meta.config[section][key] != value &&
          key != "preset" && key != "trainable")
        throw CheckpointError("checkpoint " + dir + " holds a model with " + section + "." + key + "=" +
                              meta.config[section][key].dump() + ", this run's is " + value.dump() +
                              " (a checkpoint loads only into the same model shape)");
  if (meta.config.contains("train") &&
      meta.config["train"].value("optimizer", config.train.optimizer) != config.train.optimizer)
    throw CheckpointError("checkpoint " + dir + " holds " + meta.config["train"]["optimizer"].dump() +
                          " optimizer state; this run's train.optimizer is " + config.train.optimizer);

  // A stored piece's bytes as a tensor, its checksum and size verified (checkpoint::PieceReader).
  checkpoint::PieceReader reader(dir);
  auto stored_tensor = [&](const checkpoint::TensorInfo& info, const checkpoint::Piece& p) {
    std::vector<char> bytes = reader.read(info, p);
    const at::ScalarType type = scalar_type_of(info.dtype, dir);
    return at::from_blob(bytes.data(), {p.numel}, at::TensorOptions().dtype(type)).clone();
  };

  std::vector<StatePiece> pieces = strategy.state_pieces();
  place_in_whole_tensors(pieces, layout);
  if (meta.world_size == world.world_size()) pieces.push_back(rng_piece(world));  // generators: same world only
  at::NoGradGuard no_grad;
  for (StatePiece& piece : pieces) {
    const auto it = meta.tensors.find(piece.name);
    if (it == meta.tensors.end()) {
      if (piece.name == kRngPiece) continue;
      throw CheckpointError("checkpoint " + dir + " holds no '" + piece.name + "' (saved by " + meta.strategy +
                            " with train.optimizer=" + meta.config["train"].value("optimizer", std::string("?")) +
                            "); this run needs it");
    }
    const checkpoint::TensorInfo& info = it->second;
    if (info.shape != piece.shape)
      throw CheckpointError("checkpoint " + dir + ": '" + piece.name + "' has shape " +
                            nlohmann::json(info.shape).dump() + ", this run's is " +
                            nlohmann::json(piece.shape).dump());
    const checkpoint::Chunk wanted = piece.chunk.shape.empty() ? checkpoint::Chunk::whole(piece.shape) : piece.chunk;
    const bool same_chunks = std::all_of(info.pieces.begin(), info.pieces.end(), [&](const checkpoint::Piece& p) {
      return p.chunk == wanted || !checkpoint::intersect(p.chunk, wanted);
    });
    const int64_t begin = piece.begin, end = piece.begin + piece.data.numel();
    if (same_chunks) {  // stored as this rank holds it (the same chunk, cut into other ranges): ranges meet ranges
      for (const checkpoint::Piece& stored : info.pieces) {
        const int64_t a = std::max(begin, stored.begin), b = std::min(end, stored.begin + stored.numel);
        if (stored.chunk != wanted || a >= b) continue;
        const at::Tensor source = stored_tensor(info, stored);
        piece.data.narrow(0, a - begin, b - a).copy_(source.narrow(0, a - stored.begin, b - a));
      }
    } else {  // another layout's chunks: the stored pieces that meet this one's chunk, placed in the whole tensor
      std::vector<char> whole = checkpoint::read_whole_tensor(dir, meta, piece.name, wanted, &bytes_read);
      at::Tensor box =
          at::from_blob(whole.data(), info.shape, at::TensorOptions().dtype(scalar_type_of(info.dtype, dir)));
      for (size_t d = 0; d < wanted.shape.size(); ++d)
        box = box.narrow(static_cast<int64_t>(d), wanted.offsets[d], wanted.shape[d]);
      piece.data.copy_(box.contiguous().view({-1}).narrow(0, begin, end - begin));
    }
    if (piece.name == kRngPiece) {
      at::Generator generator = at::detail::getDefaultCPUGenerator();  // a handle to the process's generator
      const std::lock_guard<std::mutex> lock(generator.mutex());
      generator.set_state(piece.data);
    }
  }
  bytes_read += reader.bytes_read();
  return meta;
}

}  // namespace

ResumePoint load_checkpoint(const std::string& path, const Config& config, Strategy& strategy, World& world,
                            const StateLayout& layout) {
  const auto start = std::chrono::steady_clock::now();
  int64_t bytes_read = 0;
  std::string dir = path;
  checkpoint::Metadata meta;
  std::exception_ptr failure;  // kept as thrown: an out-of-memory refusal must still reach the trainer as one
  try {
    meta = read_checkpoint_pieces(path, config, strategy, layout, world, dir, bytes_read);
  } catch (const std::exception&) {
    failure = std::current_exception();
  }
  // Agreement before restore_state, which may be collective: a rank that failed to read (a damaged piece only it
  // reads) must not leave the others waiting in a collective until the timeout.
  const int failed = failing_rank(world, failure != nullptr);
  if (failure) std::rethrow_exception(failure);
  if (failed >= 0)
    throw CheckpointError("checkpoint " + dir + ": rank " + std::to_string(failed) +
                          " failed to load it (that rank's error says why), so rank " + std::to_string(world.rank()) +
                          " stops too");
  strategy.restore_state(meta.scalars);
  return {.step = meta.step,
          .path = dir,
          .saved_by = meta.strategy + " at world " + std::to_string(meta.world_size),
          .load_ms = ms_since(start),
          .bytes_read = bytes_read};
}

std::optional<ResumePoint> resume_if_asked(const Config& config, Strategy& strategy, World& world,
                                           const StateLayout& layout) {
  const CheckpointConfig& c = config.checkpoint;
  if (c.resume == "never") {
    if (!c.dir.empty()) {
      const auto existing = checkpoint::latest_checkpoint(c.dir);
      if (existing)
        throw CheckpointError("checkpoint.dir=" + c.dir + " already holds checkpoints (latest " + *existing +
                              ") and checkpoint.resume=never would overwrite them: use checkpoint.resume=auto to "
                              "continue from it, or another checkpoint.dir");
    }
    return std::nullopt;
  }
  std::string path = c.resume;
  if (c.resume == "auto") {
    if (c.dir.empty()) return std::nullopt;
    const auto latest = checkpoint::latest_checkpoint(c.dir);
    if (!latest) return std::nullopt;
    path = *latest;
  }
  ResumePoint point = load_checkpoint(path, config, strategy, world, layout);
  if (point.step >= config.train.steps)
    throw CheckpointError("checkpoint " + point.path + " already holds " + std::to_string(point.step) +
                          " steps and train.steps=" + std::to_string(config.train.steps) +
                          ": nothing left to train (raise train.steps to continue, or set checkpoint.resume=never "
                          "with another checkpoint.dir)");
  return point;
}

int restart_count() {
  const char* text = std::getenv("DTLAB_RESTART_COUNT");
  return text != nullptr && *text != '\0' ? std::atoi(text) : 0;
}

nlohmann::json to_json(const SaveRecord& r) {
  return {{"step", r.step},
          {"path", r.path},
          {"bytes_here", r.bytes_here},
          {"total_bytes", r.total_bytes},
          {"blocking_ms", r.blocking_ms},
          {"write_ms", r.write_ms},
          {"snapshot_bytes", r.snapshot_bytes},
          {"extra_bytes", r.extra_bytes}};
}

}  // namespace dtlab
