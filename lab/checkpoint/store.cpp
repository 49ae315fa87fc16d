// store.cpp: the checkpoint directory layout, metadata and inspection (see store.hpp).
#include "lab/checkpoint/store.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "lab/atomic_file.hpp"
#include "lab/checkpoint/safetensors.hpp"

namespace dtlab::checkpoint {

namespace fs = std::filesystem;

namespace {

constexpr const char* kFormat = "dtlab-checkpoint";
// Version 2 adds N-D chunks (chunk.hpp); a checkpoint with none is still written as version 1, and both are read.
constexpr int kFormatVersion = 2;
constexpr int kFormatVersionWithoutChunks = 1;
constexpr const char* kPartialSuffix = ".partial";

int64_t elements(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

std::string shape_text(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

// step_00000010 -> 10; nullopt for any other name.
std::optional<int64_t> step_of(const std::string& name) {
  if (name.rfind("step_", 0) != 0 || name.size() <= 5) return std::nullopt;
  const std::string digits = name.substr(5);
  if (!std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; })) return std::nullopt;
  return std::stoll(digits);
}

void write_text_atomic(const std::string& path, const std::string& text) {
  try {
    write_file_atomic(path, text);
  } catch (const AtomicFileError& e) {
    throw CheckpointError(std::string("checkpoint: ") + e.what());
  }
}

bool has_partial_suffix(const std::string& name) {
  const size_t n = std::strlen(kPartialSuffix);
  return name.size() > n && name.compare(name.size() - n, std::string::npos, kPartialSuffix) == 0;
}

// Refuses a file name from metadata.json (`origin`) that could name a file outside its step directory.
void check_plain_file_name(const std::string& name, const std::string& origin) {
  bool dot_dot = name == "..";
  std::string component;
  for (const char c : name + "/") {
    if (c != '/' && c != '\\') {
      component += c;
      continue;
    }
    dot_dot = dot_dot || component == "..";
    component.clear();
  }
  std::string problem;
  if (name.empty() || name == ".")
    problem = "is empty or \".\"";
  else if (name.front() == '/')
    problem = "is an absolute path";
  else if (dot_dot)
    problem = "has a \"..\" component";
  else if (name.find_first_of("/\\") != std::string::npos)
    problem = "has a path separator";
  if (!problem.empty())
    throw CheckpointError("checkpoint " + origin + ": file name '" + name + "' " + problem +
                          ": refused (a file metadata.json names must be a plain file name inside its checkpoint "
                          "directory)");
}

// Makes a directory's renames durable.
void sync_dir(const std::string& dir) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY);
  if (fd < 0) return;
  ::fsync(fd);
  ::close(fd);
}

}  // namespace

std::string piece_key(const std::string& name, int64_t begin, const Chunk& chunk) {
  return name + (chunk.shape.empty() ? "" : chunk.text()) + "@" + std::to_string(begin);
}

std::string pieces_to_json(const std::map<std::string, PieceRecord>& by_key) {
  nlohmann::json j = nlohmann::json::object();
  for (const auto& [key, p] : by_key) {
    j[key] = {{"name", p.name}, {"shape", p.shape}, {"begin", p.begin}, {"crc32", p.crc32}};
    if (!p.chunk.shape.empty() && !p.chunk.is_whole(p.shape)) {
      j[key]["chunk_offsets"] = p.chunk.offsets;
      j[key]["chunk_shape"] = p.chunk.shape;
    }
  }
  return j.dump();
}

std::string rank_file_name(int rank) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "rank%05d.safetensors", rank);
  return buf;
}

std::string step_dir(const std::string& dir, int64_t step) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "step_%08" PRId64, step);
  return (fs::path(dir) / buf).string();
}

std::string partial_dir(const std::string& dir, int64_t step) { return step_dir(dir, step) + kPartialSuffix; }

nlohmann::json Metadata::to_json() const {
  nlohmann::json tensors_json = nlohmann::json::object();
  bool chunked = false;
  for (const auto& [name, t] : tensors) {
    nlohmann::json pieces = nlohmann::json::array();
    for (const Piece& p : t.pieces) {
      pieces.push_back({{"file", p.file}, {"key", p.key}, {"begin", p.begin}, {"numel", p.numel}, {"crc32", p.crc32}});
      if (!p.chunk.is_whole(t.shape)) {
        chunked = true;
        pieces.back()["chunk_offsets"] = p.chunk.offsets;
        pieces.back()["chunk_shape"] = p.chunk.shape;
      }
    }
    tensors_json[name] = {{"shape", t.shape}, {"dtype", t.dtype}, {"pieces", pieces}};
  }
  const int version = chunked ? kFormatVersion : kFormatVersionWithoutChunks;
  return {{"format", kFormat},       {"version", version}, {"step", step},   {"world_size", world_size},
          {"strategy", strategy},    {"scalars", scalars}, {"files", files}, {"total_bytes", total_bytes},
          {"tensors", tensors_json}, {"config", config}};
}

Metadata Metadata::from_json(const nlohmann::json& j, const std::string& origin) {
  try {
    if (j.value("format", std::string()) != kFormat)
      throw CheckpointError("checkpoint " + origin + ": not a dtlab checkpoint (\"format\" is not \"" + kFormat +
                            "\")");
    const int version = j.at("version").get<int>();
    if (version < kFormatVersionWithoutChunks || version > kFormatVersion)
      throw CheckpointError("checkpoint " + origin + ": format version " + j.at("version").dump() +
                            ", this dtlab reads versions " + std::to_string(kFormatVersionWithoutChunks) + " to " +
                            std::to_string(kFormatVersion));
    Metadata m;
    m.step = j.at("step").get<int64_t>();
    m.world_size = j.at("world_size").get<int>();
    m.strategy = j.at("strategy").get<std::string>();
    m.config = j.at("config");
    m.scalars = j.at("scalars").get<std::map<std::string, double>>();
    m.files = j.at("files").get<std::vector<std::string>>();
    for (const std::string& file : m.files) check_plain_file_name(file, origin);
    m.total_bytes = j.value("total_bytes", int64_t{0});
    for (const auto& [name, t] : j.at("tensors").items()) {
      TensorInfo info;
      info.shape = t.at("shape").get<std::vector<int64_t>>();
      info.dtype = t.at("dtype").get<std::string>();
      for (const auto& p : t.at("pieces")) {
        const std::string file = p.at("file").get<std::string>();
        check_plain_file_name(file, origin);
        if (std::find(m.files.begin(), m.files.end(), file) == m.files.end())
          throw CheckpointError("checkpoint " + origin + ": a piece of '" + name + "' is in file '" + file +
                                "', which \"files\" does not list (every piece is in a listed rank file)");
        Piece piece{file,
                    p.at("key").get<std::string>(),
                    p.at("begin").get<int64_t>(),
                    p.at("numel").get<int64_t>(),
                    p.at("crc32").get<uint32_t>(),
                    Chunk::whole(info.shape)};
        if (p.contains("chunk_offsets") || p.contains("chunk_shape"))
          piece.chunk = {p.at("chunk_offsets").get<std::vector<int64_t>>(),
                         p.at("chunk_shape").get<std::vector<int64_t>>()};
        if (const std::string problem = chunk_problem(piece.chunk, info.shape); !problem.empty())
          throw CheckpointError("checkpoint " + origin + ": piece '" + piece.key + "' of '" + name + "' " +
                                shape_text(info.shape) + ": " + problem);
        if (piece.begin < 0 || piece.numel < 0 || piece.begin + piece.numel > piece.chunk.numel())
          throw CheckpointError("checkpoint " + origin + ": piece '" + piece.key + "' of '" + name +
                                "' holds elements " + std::to_string(piece.begin) + ".." +
                                std::to_string(piece.begin + piece.numel) + " of a chunk of " +
                                std::to_string(piece.chunk.numel()));
        info.pieces.push_back(std::move(piece));
      }
      m.tensors[name] = std::move(info);
    }
    return m;
  } catch (const nlohmann::json::exception& e) {
    throw CheckpointError("checkpoint " + origin + ": malformed metadata: " + e.what());
  }
}

std::vector<std::pair<int64_t, std::string>> complete_checkpoints(const std::string& dir) {
  std::vector<std::pair<int64_t, std::string>> out;
  std::error_code ec;
  if (!fs::exists(dir, ec)) return out;
  if (!fs::is_directory(dir, ec))
    throw CheckpointError("checkpoint.dir=" + dir + " is a file, not a directory (checkpoints are directories)");
  for (const auto& entry : fs::directory_iterator(dir)) {
    const std::string name = entry.path().filename().string();
    const auto step = step_of(name);
    if (step && entry.is_directory() && fs::exists(entry.path() / kMetadataFile))
      out.emplace_back(*step, entry.path().string());
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::optional<std::string> latest_checkpoint(const std::string& dir) {
  const auto all = complete_checkpoints(dir);
  if (all.empty()) return std::nullopt;
  return all.back().second;
}

std::vector<std::string> remove_partials(const std::string& dir) {
  std::vector<std::string> removed;
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return removed;
  for (const auto& entry : fs::directory_iterator(dir)) {
    const std::string name = entry.path().filename().string();
    if (entry.is_directory() && has_partial_suffix(name) &&
        step_of(name.substr(0, name.size() - std::strlen(kPartialSuffix)))) {
      fs::remove_all(entry.path(), ec);
      removed.push_back(entry.path().string());
    }
  }
  std::sort(removed.begin(), removed.end());
  return removed;
}

Metadata collect(const std::string& partial, int world_size, int64_t step, const std::string& strategy,
                 const nlohmann::json& config) {
  Metadata m;
  m.step = step;
  m.world_size = world_size;
  m.strategy = strategy;
  m.config = config;
  for (int r = 0; r < world_size; ++r) {
    const std::string file = rank_file_name(r);
    const std::string path = (fs::path(partial) / file).string();
    const safetensors::Header header = safetensors::read_header(path);
    m.files.push_back(file);
    const auto pieces_it = header.metadata.find(kPiecesKey);
    if (pieces_it == header.metadata.end())
      throw CheckpointError("checkpoint: " + path + " has no \"" + kPiecesKey + "\" metadata (not written by dtlab)");
    const nlohmann::json pieces = nlohmann::json::parse(pieces_it->second);
    if (r == 0) {
      const auto scalars_it = header.metadata.find(kScalarsKey);
      if (scalars_it != header.metadata.end())
        m.scalars = nlohmann::json::parse(scalars_it->second).get<std::map<std::string, double>>();
    }
    for (const safetensors::StoredTensor& stored : header.tensors) {
      if (!pieces.contains(stored.key))
        throw CheckpointError("checkpoint: " + path + ": tensor '" + stored.key + "' is not in its piece list");
      const nlohmann::json& p = pieces.at(stored.key);
      const std::string name = p.at("name").get<std::string>();
      const auto shape = p.at("shape").get<std::vector<int64_t>>();
      TensorInfo& info = m.tensors[name];
      if (info.pieces.empty()) {
        info.shape = shape;
        info.dtype = stored.dtype;
      } else if (info.shape != shape || info.dtype != stored.dtype) {
        throw CheckpointError("checkpoint: " + path + ": '" + name + "' is " + stored.dtype + " " + shape_text(shape) +
                              " here but " + info.dtype + " " + shape_text(info.shape) + " in another rank's file");
      }
      const int64_t numel = elements(stored.shape);
      Chunk chunk = Chunk::whole(shape);
      if (p.contains("chunk_offsets"))
        chunk = {p.at("chunk_offsets").get<std::vector<int64_t>>(), p.at("chunk_shape").get<std::vector<int64_t>>()};
      info.pieces.push_back(
          {file, stored.key, p.at("begin").get<int64_t>(), numel, p.at("crc32").get<uint32_t>(), std::move(chunk)});
      m.total_bytes += stored.end - stored.begin;
    }
  }
  for (auto& [name, info] : m.tensors) {
    std::sort(info.pieces.begin(), info.pieces.end(), [](const Piece& a, const Piece& b) {
      return a.chunk != b.chunk ? a.chunk < b.chunk : a.begin < b.begin;
    });
    std::vector<ChunkRange> ranges;
    for (const Piece& p : info.pieces) ranges.push_back({p.chunk, p.begin, p.numel});
    if (const std::string problem = tiling_problem(std::move(ranges), info.shape); !problem.empty())
      throw CheckpointError("checkpoint " + partial + ": '" + name + "' " + problem +
                            " (the strategy's pieces must cover each tensor exactly once)");
  }
  return m;
}

void commit(const std::string& partial, const std::string& final_dir, const Metadata& metadata,
            const std::function<void()>& before_rename) {
  write_text_atomic((fs::path(partial) / kMetadataFile).string(), metadata.to_json().dump(1) + "\n");
  if (before_rename) before_rename();
  std::error_code ec;
  if (fs::exists(final_dir, ec))
    throw CheckpointError("checkpoint: " + final_dir + " already exists; not overwriting it (the save stays in " +
                          partial + ")");
  fs::rename(partial, final_dir, ec);
  if (ec) throw CheckpointError("checkpoint: renaming " + partial + " to " + final_dir + " failed: " + ec.message());
  sync_dir(fs::path(final_dir).parent_path().string());
}

std::vector<std::string> prune(const std::string& dir, int64_t keep) {
  std::vector<std::string> removed;
  if (keep <= 0) return removed;
  const auto all = complete_checkpoints(dir);
  for (size_t i = 0; i + static_cast<size_t>(keep) < all.size(); ++i) {
    std::error_code ec;
    fs::remove_all(all[i].second, ec);
    if (!ec) removed.push_back(all[i].second);
  }
  return removed;
}

Metadata read_metadata(const std::string& path, std::string* step_dir_out) {
  std::error_code ec;
  if (!fs::exists(path, ec)) throw CheckpointError("checkpoint " + path + ": no such file or directory");
  if (!fs::is_directory(path, ec))
    throw CheckpointError("checkpoint " + path + " is a file; a checkpoint is a step directory (or checkpoint.dir)");
  std::string trimmed = path;
  while (trimmed.size() > 1 && trimmed.back() == '/') trimmed.pop_back();
  if (has_partial_suffix(fs::path(trimmed).filename().string()))
    throw CheckpointError("checkpoint " + path + " is a save that was never committed (" + kPartialSuffix +
                          "): a .partial save is never loaded; give a complete step_* directory or checkpoint.dir");
  std::string dir = path;
  if (!fs::exists(fs::path(path) / kMetadataFile)) {
    const auto latest = latest_checkpoint(path);
    if (!latest)
      throw CheckpointError("checkpoint " + path + ": no " + kMetadataFile +
                            " here and no complete step_* checkpoint under it (a .partial save is never loaded)");
    dir = *latest;
  }
  const std::string meta_path = (fs::path(dir) / kMetadataFile).string();
  std::ifstream in(meta_path);
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception& e) {
    throw CheckpointError("checkpoint " + meta_path + ": not JSON: " + e.what());
  }
  Metadata m = Metadata::from_json(j, meta_path);
  // Each name is plain (from_json); a rank file must also be a regular file, not a link that leads elsewhere.
  for (const std::string& file : m.files) {
    const fs::path file_path = fs::path(dir) / file;
    const fs::file_status status = fs::symlink_status(file_path, ec);
    if (!fs::exists(status))
      throw CheckpointError("checkpoint " + dir + ": rank file " + file + " is missing (metadata lists " +
                            std::to_string(m.files.size()) + " files)");
    if (fs::is_symlink(status))
      throw CheckpointError("checkpoint " + meta_path + ": rank file '" + file + "' is a symbolic link (to " +
                            fs::read_symlink(file_path, ec).string() + "): refused (a rank file must be a regular " +
                            "file inside its checkpoint directory)");
    if (!fs::is_regular_file(status))
      throw CheckpointError("checkpoint " + meta_path + ": rank file '" + file + "' is not a regular file: refused " +
                            "(a rank file must be a regular file inside its checkpoint directory)");
  }
  if (step_dir_out) *step_dir_out = dir;
  return m;
}

std::vector<char> PieceReader::read(const TensorInfo& info, const Piece& p) {
  const std::string file = (fs::path(dir_) / p.file).string();
  auto h = headers_.find(p.file);
  if (h == headers_.end()) h = headers_.emplace(p.file, safetensors::read_header(file)).first;
  std::vector<char> bytes = safetensors::read_bytes(h->second, h->second.tensor(p.key));
  bytes_read_ += static_cast<int64_t>(bytes.size());
  const uint32_t crc = safetensors::crc32_of(bytes.data(), static_cast<int64_t>(bytes.size()));
  if (crc != p.crc32)
    throw CheckpointError("checkpoint " + file + ": tensor '" + p.key + "' fails its checksum (crc32 " +
                          std::to_string(crc) + ", metadata.json says " + std::to_string(p.crc32) +
                          "): the file is damaged");
  const auto element_size = static_cast<size_t>(safetensors::dtype_size(info.dtype));
  if (bytes.size() != static_cast<size_t>(p.numel) * element_size)
    throw CheckpointError("checkpoint " + file + ": tensor '" + p.key + "' holds " + std::to_string(bytes.size()) +
                          " bytes, metadata.json says " + std::to_string(p.numel) + " elements of " + info.dtype);
  return bytes;
}

std::vector<char> read_whole_tensor(const std::string& dir, const Metadata& metadata, const std::string& name,
                                    const std::optional<Chunk>& wanted, int64_t* bytes_read) {
  const auto it = metadata.tensors.find(name);
  if (it == metadata.tensors.end()) throw CheckpointError("checkpoint " + dir + " holds no '" + name + "'");
  const TensorInfo& info = it->second;
  const auto element_size = static_cast<size_t>(safetensors::dtype_size(info.dtype));
  std::vector<char> whole(static_cast<size_t>(elements(info.shape)) * element_size, 0);
  PieceReader reader(dir);
  for (const Piece& p : info.pieces) {
    if (wanted && !intersect(p.chunk, *wanted)) continue;
    const std::vector<char> bytes = reader.read(info, p);
    scatter_into_whole(bytes.data(), p.begin, p.numel, p.chunk, info.shape, element_size, whole.data());
  }
  if (bytes_read) *bytes_read += reader.bytes_read();
  return whole;
}

std::string inspect(const std::string& path, bool verify, int& problems) {
  problems = 0;
  std::string dir;
  const Metadata m = read_metadata(path, &dir);
  std::ostringstream out;
  out << "checkpoint " << dir << "\n";
  out << "  step " << m.step << " | strategy " << m.strategy << " | world size " << m.world_size << " | "
      << m.tensors.size() << " tensors, " << m.total_bytes << " bytes in " << m.files.size() << " files\n";
  out << "  scalars:";
  for (const auto& [k, v] : m.scalars) out << " " << k << "=" << v;
  out << "\n  files:\n";
  std::map<std::string, safetensors::Header> headers;
  for (const std::string& file : m.files) {
    const std::string file_path = (fs::path(dir) / file).string();
    try {
      headers.emplace(file, safetensors::read_header(file_path));
      out << "    " << file << "  " << fs::file_size(file_path) << " bytes\n";
    } catch (const std::exception& e) {
      ++problems;
      out << "    " << file << "  PROBLEM: " << e.what() << "\n";
    }
  }
  out << "  tensors (name, shape, dtype, pieces as file:[begin, end), or file:<chunk>[begin, end) of an N-D chunk):\n";
  for (const auto& [name, t] : m.tensors) {
    out << "    " << name << "  " << shape_text(t.shape) << "  " << t.dtype << " ";
    for (const Piece& p : t.pieces)
      out << " " << p.file.substr(0, p.file.find('.')) << ":" << (p.chunk.is_whole(t.shape) ? "" : p.chunk.text())
          << "[" << p.begin << ", " << p.begin + p.numel << ")";
    out << "\n";
  }
  if (!verify) return out.str();
  int64_t checked = 0;
  for (const auto& [name, t] : m.tensors)
    for (const Piece& p : t.pieces) {
      const auto h = headers.find(p.file);
      if (h == headers.end()) continue;  // already a problem above
      try {
        const std::vector<char> bytes = safetensors::read_bytes(h->second, h->second.tensor(p.key));
        const uint32_t crc = safetensors::crc32_of(bytes.data(), static_cast<int64_t>(bytes.size()));
        if (crc != p.crc32) {
          ++problems;
          out << "  CHECKSUM MISMATCH: " << p.file << " '" << p.key << "' has crc32 " << crc << ", metadata says "
              << p.crc32 << "\n";
        }
        ++checked;
      } catch (const std::exception& e) {
        ++problems;
        out << "  PROBLEM: " << e.what() << "\n";
      }
    }
  out << "  verified " << checked << " pieces: " << (problems == 0 ? "all checksums match" : "PROBLEMS above") << "\n";
  return out.str();
}

}  // namespace dtlab::checkpoint
