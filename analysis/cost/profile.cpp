// profile.cpp: machine profile JSON — reading with errors that name file and key, writing, rate look-up
// (see profile.hpp for the layout).
#include "analysis/cost/profile.hpp"

#include <charconv>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>
#include <system_error>

#include "lab/dtype.hpp"

namespace dtlab::analysis {
namespace {

// Reads one key of an object, naming "<origin>: <path>" in every error.
class Reader {
 public:
  Reader(const nlohmann::json& j, std::string origin, std::string path)
      : j_(j), origin_(std::move(origin)), path_(std::move(path)) {}

  [[noreturn]] void fail(const std::string& key, const std::string& rule) const {
    throw ProfileError(origin_ + ": " + where(key) + ": " + rule);
  }
  bool has(const std::string& key) const { return j_.contains(key) && !j_[key].is_null(); }
  const nlohmann::json& at(const std::string& key) const {
    if (!has(key)) fail(key, "missing (see analysis/cost/profile.hpp for the layout)");
    return j_[key];
  }
  std::string text(const std::string& key) const {
    const auto& v = at(key);
    if (!v.is_string()) fail(key, "must be a string, got " + v.dump());
    return v.get<std::string>();
  }
  double non_negative(const std::string& key) const {
    const auto& v = at(key);
    if (!v.is_number() || !std::isfinite(v.get<double>()) || v.get<double>() < 0)
      fail(key, "must be a number >= 0, got " + v.dump());
    return v.get<double>();
  }
  double positive(const std::string& key) const {
    const auto& v = at(key);
    if (!v.is_number() || !std::isfinite(v.get<double>()) || v.get<double>() <= 0)
      fail(key, "must be a number > 0, got " + v.dump());
    return v.get<double>();
  }
  int count(const std::string& key, int minimum) const {
    const auto& v = at(key);
    if (!v.is_number_integer() || v.get<int64_t>() < minimum)
      fail(key, "must be an integer >= " + std::to_string(minimum) + ", got " + v.dump());
    return v.get<int>();
  }
  Reader object(const std::string& key) const {
    const auto& v = at(key);
    if (!v.is_object()) fail(key, "must be an object, got " + v.dump());
    return Reader(v, origin_, where(key));
  }
  std::string where(const std::string& key) const { return path_.empty() ? key : path_ + "." + key; }
  const nlohmann::json& json() const { return j_; }

 private:
  const nlohmann::json& j_;
  std::string origin_, path_;
};

// A training step's efficiency, (0, kMaxTrainEfficiency] (profile.hpp).
double efficiency_at(const Reader& r, const std::string& key) {
  const double e = r.positive(key);
  if (e > kMaxTrainEfficiency) {
    char rule[200];
    std::snprintf(rule, sizeof rule,
                  "is a step's rate over the matmul rate, must be <= %g (above it the GEMMs did not time the kernels "
                  "the step runs: calibrate again), got %g",
                  kMaxTrainEfficiency, e);
    r.fail(key, rule);
  }
  return e;
}

CommModel comm_model_at(const Reader& comm, const std::string& key, const std::string& origin) {
  const auto& v = comm.at(key);
  try {
    return CommModel::from_json(v, origin + ": " + comm.where(key));
  } catch (const std::invalid_argument& e) {
    throw ProfileError(e.what());
  }
}

}  // namespace

nlohmann::json MachineProfile::to_json() const {
  nlohmann::json matmul = nlohmann::json::object();
  for (const auto& [dtype, tflops] : compute.matmul_tflops) matmul[dtype] = tflops;
  nlohmann::json j = {{"name", name}, {"kind", kind}, {"source", source}, {"device", device}};
  j["compute"] = {
      {"matmul_tflops", matmul}, {"train_efficiency", compute.train_efficiency}, {"memory_GBps", compute.memory_GBps}};
  if (!compute.train_efficiency_by_dtype.empty())
    j["compute"]["train_efficiency_by_dtype"] = compute.train_efficiency_by_dtype;
  if (!compute.train_efficiency_by_width.empty()) {
    nlohmann::json by_width = nlohmann::json::object();
    for (const auto& [dtype, widths] : compute.train_efficiency_by_width)
      for (const auto& [width, e] : widths) by_width[dtype][std::to_string(width)] = e;
    j["compute"]["train_efficiency_by_width"] = by_width;
  }
  if (!compute.gemm_overhead_us.empty()) j["compute"]["gemm_overhead_us"] = compute.gemm_overhead_us;
  if (compute.threads > 0) j["compute"]["threads"] = compute.threads;
  if (compute.cores > 0) j["compute"]["cores"] = compute.cores;
  if (compute.ranks > 0) j["compute"]["ranks"] = compute.ranks;
  j["comm"] = {{"ranks_per_node", comm.ranks_per_node}, {"intra_node", comm.intra_node.to_json()}};
  if (comm.inter_node) j["comm"]["inter_node"] = comm.inter_node->to_json();
  if (comm.measured_world_size > 0) j["comm"]["measured_world_size"] = comm.measured_world_size;
  if (comm.ranks_per_link != 1) j["comm"]["ranks_per_link"] = comm.ranks_per_link;
  if (comm.inter_link_bps > 0) j["comm"]["inter_link_bps"] = comm.inter_link_bps;
  if (comm.intra_link_bps > 0) j["comm"]["intra_link_bps"] = comm.intra_link_bps;
  if (host_device_GBps) j["host_device_GBps"] = *host_device_GBps;
  if (disk_write_GBps) j["disk_write_GBps"] = *disk_write_GBps;
  if (!notes.empty()) j["notes"] = notes;
  return j;
}

MachineProfile MachineProfile::from_json(const nlohmann::json& j, const std::string& origin) {
  if (!j.is_object())
    throw ProfileError(origin +
                       ": a machine profile must be a JSON object ({\"name\", \"kind\", \"compute\", ...; see " +
                       "analysis/cost/profile.hpp), got " + j.type_name());
  const Reader top(j, origin, "");
  MachineProfile p;
  p.name = top.text("name");
  p.kind = top.text("kind");
  if (p.kind != "measured" && p.kind != "spec-sheet")
    top.fail("kind", "must be \"measured\" or \"spec-sheet\", got \"" + p.kind + "\"");
  p.source = top.text("source");
  p.device = top.text("device");

  const Reader compute = top.object("compute");
  const Reader matmul = compute.object("matmul_tflops");
  for (const auto& [dtype, value] : matmul.json().items()) {
    if (!is_torch_name(dtype)) matmul.fail(dtype, "unknown dtype; use float32 | bfloat16 | float16");
    p.compute.matmul_tflops[dtype] = matmul.positive(dtype);
  }
  if (p.compute.matmul_tflops.empty()) compute.fail("matmul_tflops", "needs at least one dtype (float32 first)");
  p.compute.train_efficiency = efficiency_at(compute, "train_efficiency");
  if (compute.has("train_efficiency_by_dtype")) {
    const Reader by_dtype = compute.object("train_efficiency_by_dtype");
    for (const auto& [dtype, value] : by_dtype.json().items()) {
      if (!is_torch_name(dtype)) by_dtype.fail(dtype, "unknown dtype; use float32 | bfloat16 | float16");
      p.compute.train_efficiency_by_dtype[dtype] = efficiency_at(by_dtype, dtype);
    }
  }
  if (compute.has("train_efficiency_by_width")) {
    const Reader by_width = compute.object("train_efficiency_by_width");
    for (const auto& [dtype, value] : by_width.json().items()) {
      if (!is_torch_name(dtype)) by_width.fail(dtype, "unknown dtype; use float32 | bfloat16 | float16");
      const Reader widths = by_width.object(dtype);
      for (const auto& [width, efficiency] : widths.json().items()) {
        int64_t d = 0;
        const auto [end, error] = std::from_chars(width.data(), width.data() + width.size(), d);
        if (error != std::errc() || end != width.data() + width.size() || d < 1)
          widths.fail(width, "is not a model width: the keys are d_model values, integers >= 1 (e.g. \"256\")");
        p.compute.train_efficiency_by_width[dtype][d] = efficiency_at(widths, width);
      }
    }
  }
  if (compute.has("gemm_overhead_us")) {
    const Reader by_dtype = compute.object("gemm_overhead_us");
    for (const auto& [dtype, value] : by_dtype.json().items()) {
      if (!is_torch_name(dtype)) by_dtype.fail(dtype, "unknown dtype; use float32 | bfloat16 | float16");
      p.compute.gemm_overhead_us[dtype] = by_dtype.non_negative(dtype);
    }
  }
  p.compute.memory_GBps = compute.positive("memory_GBps");
  if (compute.has("threads")) p.compute.threads = compute.count("threads", 1);
  if (compute.has("cores")) p.compute.cores = compute.count("cores", 1);
  if (compute.has("ranks")) p.compute.ranks = compute.count("ranks", 1);

  const Reader comm = top.object("comm");
  p.comm.ranks_per_node = comm.count("ranks_per_node", 1);
  p.comm.intra_node = comm_model_at(comm, "intra_node", origin);
  if (comm.has("inter_node")) p.comm.inter_node = comm_model_at(comm, "inter_node", origin);
  if (comm.has("measured_world_size")) p.comm.measured_world_size = comm.count("measured_world_size", 0);
  if (comm.has("ranks_per_link")) p.comm.ranks_per_link = comm.count("ranks_per_link", 1);
  if (comm.has("inter_link_bps")) p.comm.inter_link_bps = comm.positive("inter_link_bps");
  if (comm.has("intra_link_bps")) p.comm.intra_link_bps = comm.positive("intra_link_bps");

  if (top.has("host_device_GBps")) p.host_device_GBps = top.positive("host_device_GBps");
  if (top.has("disk_write_GBps")) p.disk_write_GBps = top.positive("disk_write_GBps");
  if (top.has("notes")) {
    const auto& notes = top.at("notes");
    if (!notes.is_array()) top.fail("notes", "must be an array of strings");
    for (const auto& n : notes) {
      if (!n.is_string()) top.fail("notes", "must be an array of strings, found " + n.dump());
      p.notes.push_back(n.get<std::string>());
    }
  }
  return p;
}

MachineProfile load_profile(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw ProfileError(path + ": cannot open machine profile (shipped ones: analysis/profiles/*.json)");
  std::stringstream text;
  text << in.rdbuf();
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text.str());
  } catch (const nlohmann::json::parse_error& e) {
    throw ProfileError(
        path + ": not valid JSON (a machine profile is one JSON object; see analysis/cost/profile.hpp): " + e.what());
  }
  return MachineProfile::from_json(j, path);
}

void save_profile(const MachineProfile& profile, const std::string& path) {
  const std::filesystem::path file(path);
  std::error_code ec;
  if (file.has_parent_path()) std::filesystem::create_directories(file.parent_path(), ec);
  std::ofstream out(path);
  if (!out) throw ProfileError(path + ": cannot write machine profile");
  out << profile.to_json().dump(2) << "\n";
  if (!out) throw ProfileError(path + ": write failed");
}

namespace {
// The profile's key for a dtype in either spelling; an unknown name stays as given (and finds no entry).
std::string profile_dtype_name(const std::string& dtype) {
  const std::optional<Dtype> d = parse_dtype(dtype);
  return d ? std::string(torch_name(*d)) : dtype;
}
}  // namespace

double train_efficiency_for(const MachineProfile& profile, const std::string& dtype) {
  const auto it = profile.compute.train_efficiency_by_dtype.find(profile_dtype_name(dtype));
  return it != profile.compute.train_efficiency_by_dtype.end() ? it->second : profile.compute.train_efficiency;
}

double train_efficiency_for(const MachineProfile& profile, const std::string& dtype, int64_t d_model) {
  const auto it = profile.compute.train_efficiency_by_width.find(profile_dtype_name(dtype));
  if (it == profile.compute.train_efficiency_by_width.end() || it->second.empty())
    return train_efficiency_for(profile, dtype);
  const std::map<int64_t, double>& widths = it->second;
  const auto above = widths.lower_bound(d_model);
  if (above == widths.end()) return widths.rbegin()->second;  // wider than any measured width
  if (above->first == d_model || above == widths.begin()) return above->second;
  const auto below = std::prev(above);
  const double t = std::log2(static_cast<double>(d_model) / static_cast<double>(below->first)) /
                   std::log2(static_cast<double>(above->first) / static_cast<double>(below->first));
  return below->second + t * (above->second - below->second);
}

double gemm_overhead_us_for(const MachineProfile& profile, const std::string& dtype) {
  const auto it = profile.compute.gemm_overhead_us.find(profile_dtype_name(dtype));
  return it != profile.compute.gemm_overhead_us.end() ? it->second : 0.0;
}

double matmul_tflops_for(const MachineProfile& profile, const std::string& dtype, bool* fell_back) {
  const std::string name = profile_dtype_name(dtype);
  const auto& rates = profile.compute.matmul_tflops;
  auto it = rates.find(name);
  if (fell_back) *fell_back = it == rates.end();
  if (it == rates.end()) it = rates.find("float32");
  if (it == rates.end())
    throw ProfileError("profile " + profile.name + ": compute.matmul_tflops has neither " + name + " nor float32");
  return it->second;
}

}  // namespace dtlab::analysis
