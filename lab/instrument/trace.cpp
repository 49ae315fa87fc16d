// trace.cpp: Chrome/Perfetto trace writer, reader and multi-rank merge (see trace.hpp).
#include "lab/instrument/trace.hpp"

#include "lab/atomic_file.hpp"
#include "lab/instrument/clock.hpp"

#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <limits>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace dtlab {
namespace {

using json = nlohmann::json;

double round_to_ns(double us) { return std::round(us * 1000.0) / 1000.0; }

json metadata(const char* what, int pid, int64_t tid, json args) {
  return {{"ph", "M"}, {"name", what}, {"pid", pid}, {"tid", tid}, {"ts", 0}, {"args", std::move(args)}};
}

bool is_metadata(const json& e) { return e.value("ph", "") == "M"; }

double ts_of(const json& e) {
  const auto it = e.find("ts");
  return it != e.end() && it->is_number() ? it->get<double>() : 0.0;
}

// Metadata first, then by ts; equal keys keep their order (a parent span recorded before its child stays first).
void sort_events(std::vector<json>& events) {
  std::stable_sort(events.begin(), events.end(), [](const json& a, const json& b) {
    const bool ma = is_metadata(a), mb = is_metadata(b);
    if (ma != mb) return ma;
    return ts_of(a) < ts_of(b);
  });
}

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// `text` as a gzip stream (zlib's deflate with the gzip wrapper, level 6), in 16 MiB pieces of input.
std::string gzip(const std::string& text, const std::string& path) {
  z_stream z{};
  if (deflateInit2(&z, 6, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK)
    throw TraceError("cannot write trace " + path + ": gzip: deflateInit2 failed");
  std::string out;
  std::vector<char> buffer(size_t{1} << 20);
  size_t done = 0;
  int flush = Z_NO_FLUSH;
  while (flush != Z_FINISH) {
    const size_t piece = std::min<size_t>(text.size() - done, size_t{1} << 24);
    z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(text.data() + done));
    z.avail_in = static_cast<uInt>(piece);
    done += piece;
    flush = done == text.size() ? Z_FINISH : Z_NO_FLUSH;
    do {  // deflate until it leaves room in the buffer: all of this piece's input consumed
      z.next_out = reinterpret_cast<Bytef*>(buffer.data());
      z.avail_out = static_cast<uInt>(buffer.size());
      if (deflate(&z, flush) == Z_STREAM_ERROR) {
        deflateEnd(&z);
        throw TraceError("cannot write trace " + path + ": gzip: deflate failed");
      }
      out.append(buffer.data(), buffer.size() - z.avail_out);
    } while (z.avail_out == 0);
  }
  deflateEnd(&z);
  return out;
}

// Writes `text` (gzipped for a .gz path) through the lab's atomic writer, so a reader never sees half a file.
void write_bytes(const std::string& text, const std::string& path) {
  namespace fs = std::filesystem;
  const fs::path target(path);
  std::error_code ec;
  if (target.has_parent_path()) fs::create_directories(target.parent_path(), ec);
  if (ec) throw TraceError("cannot create the directory of " + path + ": " + ec.message());
  try {
    write_file_atomic(path, ends_with(path, ".gz") ? gzip(text, path) : text);
  } catch (const AtomicFileError& e) {
    throw TraceError(std::string("cannot write trace ") + e.what());
  }
}

}  // namespace

TraceWriter::TraceWriter(int rank, int world_size, std::string backend)
    : rank_(rank), world_size_(world_size), backend_(std::move(backend)), base_time_ns_(lab_clock_epoch_unix_ns()) {
  if (world_size < 1 || rank < 0 || rank >= world_size) {
    throw TraceError("TraceWriter: rank " + std::to_string(rank) + " is not in [0, world_size " +
                     std::to_string(world_size) + ")");
  }
}

void TraceWriter::set_device_properties(json devices) {
  std::lock_guard<std::mutex> lock(mutex_);
  device_properties_ = devices.is_array() ? std::move(devices) : json::array({std::move(devices)});
}

void TraceWriter::push(json event) {
  if (!is_metadata(event)) event["ts"] = round_to_ns(event["ts"].get<double>());
  const std::string text = event.dump();
  std::lock_guard<std::mutex> lock(mutex_);
  if (!events_text_.empty()) events_text_ += ',';
  events_text_ += text;
  ++event_count_;
}

void TraceWriter::thread_name(int64_t tid, const std::string& name) {
  push(metadata("thread_name", rank_, tid, {{"name", name}}));
  push(metadata("thread_sort_index", rank_, tid, {{"sort_index", tid}}));
}

void TraceWriter::span(const std::string& name, const std::string& cat, int64_t tid, double start_us, double dur_us,
                       json args) {
  json e = {{"ph", "X"},
            {"cat", cat},
            {"name", name},
            {"pid", rank_},
            {"tid", tid},
            {"ts", start_us},
            {"dur", round_to_ns(std::max(0.0, dur_us))}};
  if (!args.is_null()) e["args"] = std::move(args);
  push(std::move(e));
}

void TraceWriter::counter(const std::string& name, double ts_us, json values) {
  push({{"ph", "C"}, {"name", name}, {"pid", rank_}, {"tid", trace_tid::kMain}, {"ts", ts_us}, {"args", values}});
}

void TraceWriter::instant(const std::string& name, int64_t tid, double ts_us, json args) {
  json e = {{"ph", "i"}, {"s", "t"}, {"name", name}, {"pid", rank_}, {"tid", tid}, {"ts", ts_us}};
  if (!args.is_null()) e["args"] = std::move(args);
  push(std::move(e));
}

size_t TraceWriter::event_count() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return event_count_;
}

json TraceWriter::to_json() const {
  std::vector<json> events;
  json devices;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    events = json::parse("[" + events_text_ + "]").get<std::vector<json>>();
    devices = device_properties_;
  }
  events.insert(events.begin(), {metadata("process_name", rank_, 0, {{"name", "rank " + std::to_string(rank_)}}),
                                 metadata("process_sort_index", rank_, 0, {{"sort_index", rank_}})});
  sort_events(events);
  json doc = json::object();
  doc["schemaVersion"] = 1;
  doc["distributedInfo"] = {{"backend", backend_}, {"rank", rank_}, {"world_size", world_size_}};
  doc["deviceProperties"] = std::move(devices);
  doc["displayTimeUnit"] = "ms";
  doc["baseTimeNanoseconds"] = base_time_ns_;
  doc["traceEvents"] = std::move(events);
  return doc;
}

void TraceWriter::write(const std::string& path) const { write_trace_json(to_json(), path); }

std::string trace_text(const json& doc) {
  // Laid out the way Kineto writes it: one top-level key per line with ": " after each key, and one event per
  // line. HTA finds a file's rank by the first line matching "rank":<spaces><digits> (hta/common/trace_file.py), so
  // distributedInfo is written with spaces and comes before the events (whose compact args never match).
  std::string text = "{";
  bool first = true;
  auto key_line = [&](const std::string& key) {
    text += first ? "\n  " : ",\n  ";
    first = false;
    text += json(key).dump() + ": ";
  };
  for (const auto& [key, value] : doc.items()) {
    if (key == "traceEvents") continue;
    key_line(key);
    if (key == "distributedInfo" && value.is_object()) {
      std::string info = "{";
      for (const auto& [k, v] : value.items()) info += (info.size() > 1 ? ", " : "") + json(k).dump() + ": " + v.dump();
      text += info + "}";
    } else {
      text += value.dump();
    }
  }
  key_line("traceEvents");
  text += "[";
  const json& events = doc.contains("traceEvents") ? doc["traceEvents"] : json::array();
  for (size_t i = 0; i < events.size(); ++i) text += (i ? ",\n  " : "\n  ") + events[i].dump();
  text += "\n  ]\n}\n";
  return text;
}

void write_trace_json(const json& doc, const std::string& path) { write_bytes(trace_text(doc), path); }

json read_trace(const std::string& path) {
  // gzread passes plain files through unchanged, so one reader serves .json and .json.gz.
  gzFile gz = gzopen(path.c_str(), "rb");
  if (!gz) throw TraceError("cannot read trace " + path + ": " + std::strerror(errno));
  std::string text;
  char buf[1 << 16];
  int n = 0;
  while ((n = gzread(gz, buf, sizeof buf)) > 0) text.append(buf, static_cast<size_t>(n));
  int code = Z_OK;
  const std::string why = n < 0 ? gzerror(gz, &code) : "";
  const int close_rc = gzclose(gz);
  if (n < 0) throw TraceError("cannot read trace " + path + ": gzip: " + why);
  if (close_rc == Z_BUF_ERROR) throw TraceError("cannot read trace " + path + ": gzip stream is truncated");
  json doc;
  try {
    doc = json::parse(text);
  } catch (const json::exception& e) {
    throw TraceError("trace " + path + " is not JSON: " + e.what());
  }
  if (!doc.is_object() || !doc.contains("traceEvents") || !doc["traceEvents"].is_array()) {
    throw TraceError("trace " + path + " has no \"traceEvents\" array (not a Chrome/Perfetto trace)");
  }
  return doc;
}

json merge_traces(const std::vector<json>& rank_traces) {
  if (rank_traces.empty()) throw TraceError("merge_traces: no traces to merge");
  std::map<int, const json*> by_rank;
  for (size_t i = 0; i < rank_traces.size(); ++i) {
    const json& t = rank_traces[i];
    const json* info = t.is_object() && t.contains("distributedInfo") ? &t["distributedInfo"] : nullptr;
    if (!info || !info->contains("rank") || !(*info)["rank"].is_number_integer()) {
      throw TraceError("merge_traces: input " + std::to_string(i) +
                       " has no integer distributedInfo.rank (write it with TraceWriter or add it)");
    }
    if (!t.contains("traceEvents") || !t["traceEvents"].is_array()) {
      throw TraceError("merge_traces: input " + std::to_string(i) + " has no \"traceEvents\" array");
    }
    const int rank = (*info)["rank"].get<int>();
    if (!by_rank.emplace(rank, &t).second) {
      throw TraceError("merge_traces: rank " + std::to_string(rank) + " appears in more than one input");
    }
  }

  // Re-base every rank onto the earliest baseTimeNanoseconds (only when all inputs have one).
  int64_t base_ns = std::numeric_limits<int64_t>::max();
  bool all_based = true;
  for (const auto& [rank, t] : by_rank) {
    if (t->contains("baseTimeNanoseconds") && (*t)["baseTimeNanoseconds"].is_number_integer()) {
      base_ns = std::min(base_ns, (*t)["baseTimeNanoseconds"].get<int64_t>());
    } else {
      all_based = false;
    }
  }

  int world_size = 0;
  std::string backend;
  json ranks = json::array(), rank_info = json::array(), devices = json::array();
  std::vector<json> events;
  for (const auto& [rank, t] : by_rank) {
    const json& info = (*t)["distributedInfo"];
    world_size = std::max(world_size, info.value("world_size", rank + 1));
    if (backend.empty()) backend = info.value("backend", "");
    ranks.push_back(rank);
    rank_info.push_back(info);
    if (t->contains("deviceProperties") && (*t)["deviceProperties"].is_array()) {
      for (json d : (*t)["deviceProperties"]) {
        d["rank"] = rank;
        devices.push_back(std::move(d));
      }
    }
    const double shift_us =
        all_based ? static_cast<double>((*t)["baseTimeNanoseconds"].get<int64_t>() - base_ns) / 1000.0 : 0.0;
    for (json e : (*t)["traceEvents"]) {
      e["pid"] = rank;
      if (shift_us != 0.0 && e.contains("ts") && e["ts"].is_number() && !is_metadata(e)) {
        e["ts"] = round_to_ns(e["ts"].get<double>() + shift_us);
      }
      events.push_back(std::move(e));
    }
  }
  sort_events(events);

  json doc = json::object();
  doc["schemaVersion"] = 1;
  doc["distributedInfo"] = {{"backend", backend},
                            {"rank", by_rank.begin()->first},
                            {"world_size", world_size},
                            {"ranks", ranks},
                            {"merged", true}};
  doc["rankInfo"] = std::move(rank_info);
  doc["deviceProperties"] = std::move(devices);
  doc["displayTimeUnit"] = "ms";
  if (all_based) doc["baseTimeNanoseconds"] = base_ns;
  doc["traceEvents"] = std::move(events);
  return doc;
}

std::vector<std::string> find_trace_files(const std::vector<std::string>& inputs) {
  namespace fs = std::filesystem;
  if (inputs.empty()) throw TraceError("no trace inputs given (a run dir or trace files)");
  std::vector<std::string> files;
  for (const std::string& input : inputs) {
    std::error_code ec;
    if (fs::is_regular_file(input, ec)) {
      files.push_back(input);
      continue;
    }
    if (!fs::is_directory(input, ec)) throw TraceError(input + ": no such file or directory");
    std::map<int, std::string> by_rank;  // rank order, not name order (rank10 after rank9)
    for (const auto& entry : fs::directory_iterator(input, ec)) {
      const std::string name = entry.path().filename().string();
      if (!entry.is_directory() || name.rfind("rank", 0) != 0 || name.size() == 4) continue;
      if (name.find_first_not_of("0123456789", 4) != std::string::npos) continue;
      for (const char* file : {"trace.json.gz", "trace.json"}) {
        if (fs::is_regular_file(entry.path() / file)) {
          by_rank.emplace(std::stoi(name.substr(4)), (entry.path() / file).string());
          break;
        }
      }
    }
    if (by_rank.empty()) {
      throw TraceError(input + ": no rank*/trace.json.gz found (was the run made with instrument.trace=true?)");
    }
    for (auto& [rank, path] : by_rank) files.push_back(std::move(path));
  }
  return files;
}

std::string merge_trace_files(const std::vector<std::string>& inputs, const std::string& out_path) {
  const std::vector<std::string> files = find_trace_files(inputs);
  std::vector<json> traces;
  traces.reserve(files.size());
  for (const std::string& f : files) traces.push_back(read_trace(f));
  json merged;
  try {
    merged = merge_traces(traces);
  } catch (const TraceError& e) {
    std::string names;
    for (const std::string& f : files) names += (names.empty() ? "" : ", ") + f;
    throw TraceError(std::string(e.what()) + " (inputs in order: " + names + ")");
  }
  write_trace_json(merged, out_path);
  return "merged " + std::to_string(merged["distributedInfo"]["ranks"].size()) + " ranks (" +
         std::to_string(merged["traceEvents"].size()) + " events) from " + std::to_string(files.size()) + " files -> " +
         out_path;
}

}  // namespace dtlab
