// results.cpp: result.json / steps.jsonl / scenario.json loading and discovery; see results.hpp.
#include "analysis/results.hpp"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <limits>
#include <set>
#include <sstream>

#include "lab/results_schema.hpp"

namespace dtlab::analysis {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

const char* type_name(const json& j) { return j.type_name(); }

// A view of one JSON object that knows where it came from, so every error names file and key path.
class Obj {
 public:
  Obj(const json& j, std::string source, std::string path) : j_(j), source_(std::move(source)), path_(std::move(path)) {
    if (!j_.is_object()) {
      fail(path_.empty() ? "the document" : quoted(path_), std::string("must be an object, got ") + type_name(j_));
    }
  }

  bool has(const char* key) const { return j_.contains(key) && !j_.at(key).is_null(); }

  const json& at(const char* key) const {
    if (!j_.contains(key)) {
      throw AnalysisError(source_ + ": missing required key " + quoted(key_path(key)));
    }
    return j_.at(key);
  }

  Obj object(const char* key) const { return Obj(at(key), source_, key_path(key)); }

  std::string str(const char* key) const {
    const json& v = at(key);
    if (!v.is_string()) wrong_type(key, "a string", v);
    return v.get<std::string>();
  }

  // Numbers accept null as NaN: nlohmann::json (and Python's json) write a NaN loss as null.
  double num(const char* key) const {
    const json& v = at(key);
    if (v.is_null()) return kNaN;
    if (!v.is_number()) wrong_type(key, "a number", v);
    return v.get<double>();
  }

  std::int64_t integer(const char* key) const {
    const json& v = at(key);
    if (!v.is_number_integer() && !v.is_number_unsigned()) wrong_type(key, "an integer", v);
    return v.get<std::int64_t>();
  }

  std::optional<double> opt_num(const char* key) const {
    if (!has(key)) return std::nullopt;
    return num(key);
  }
  double num_or_nan(const char* key) const { return has(key) ? num(key) : kNaN; }
  std::string str_or(const char* key, const std::string& fallback) const { return has(key) ? str(key) : fallback; }
  bool flag(const char* key) const {  // optional boolean: false when absent
    if (!has(key)) return false;
    const json& v = at(key);
    if (!v.is_boolean()) wrong_type(key, "true or false", v);
    return v.get<bool>();
  }

 private:
  std::string key_path(const char* key) const { return path_.empty() ? key : path_ + "." + key; }
  static std::string quoted(const std::string& s) { return "\"" + s + "\""; }
  [[noreturn]] void fail(const std::string& what, const std::string& rule) const {
    throw AnalysisError(source_ + ": " + what + " " + rule);
  }
  [[noreturn]] void wrong_type(const char* key, const char* want, const json& got) const {
    fail("key " + quoted(key_path(key)),
         std::string("must be ") + want + ", got " + type_name(got) + " (" + got.dump().substr(0, 40) + ")");
  }

  const json& j_;
  std::string source_;
  std::string path_;
};

StepRecord parse_step(const Obj& o) {
  namespace k = schema;
  StepRecord s;
  s.step = o.integer(k::kStep);
  s.loss = o.num(k::kLoss);
  s.step_ms = o.num(k::kStepMs);
  s.lr = o.num_or_nan(k::kLr);
  s.grad_norm = o.num_or_nan(k::kGradNorm);
  s.tokens_per_s = o.num_or_nan(k::kTokensPerS);
  s.comm_wait_ms = o.num_or_nan(k::kCommWaitMs);
  s.comm_wait_least_ms = o.num_or_nan(k::kCommWaitLeastMs);
  s.loss_scale = o.num_or_nan(k::kLossScale);
  s.skipped = o.flag(k::kSkipped);
  return s;
}

json read_json_file(const fs::path& file) {
  std::ifstream in(file);
  if (!in) throw AnalysisError(file.string() + ": cannot open for reading");
  try {
    return json::parse(in);
  } catch (const json::parse_error& e) {
    throw AnalysisError(file.string() + ": not valid JSON: " + e.what());
  }
}

// rank<r> -> r, or -1 if the name is not of that form.
int rank_of_dir(const std::string& name) {
  const std::string prefix = schema::kRankDirPrefix;
  if (name.size() <= prefix.size() || name.compare(0, prefix.size(), prefix) != 0) return -1;
  const std::string digits = name.substr(prefix.size());
  if (!std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; })) return -1;
  if (digits.size() > 6) return -1;
  return std::stoi(digits);
}

bool is_scenario_dir(const fs::path& p) { return fs::is_regular_file(p / schema::kScenarioFile); }
bool is_run_dir(const fs::path& p) { return fs::is_regular_file(p / schema::kResultFile); }

std::vector<fs::path> sorted_subdirs(const fs::path& dir) {
  std::vector<fs::path> out;
  for (const auto& e : fs::directory_iterator(dir)) {
    if (e.is_directory() && e.path().filename().string().rfind('.', 0) != 0) out.push_back(e.path());
  }
  std::sort(out.begin(), out.end());
  return out;
}

// Depth-first search below `dir` (not `dir` itself): scenario dirs are taken whole, run dirs loose.
void walk(const fs::path& dir, std::vector<fs::path>& scenario_dirs, std::vector<fs::path>& run_dirs) {
  for (const fs::path& sub : sorted_subdirs(dir)) {
    if (is_scenario_dir(sub)) {
      scenario_dirs.push_back(sub);
    } else if (is_run_dir(sub)) {
      run_dirs.push_back(sub);
    } else {
      walk(sub, scenario_dirs, run_dirs);
    }
  }
}

std::string canonical_key(const fs::path& p) {
  std::error_code ec;
  fs::path c = fs::weakly_canonical(p, ec);
  return ec ? p.lexically_normal().string() : c.string();
}

// "a/b/" -> "a/b", "./a" -> "a": so basename and parent mean what a user expects.
fs::path tidy(const fs::path& p) {
  fs::path n = p.lexically_normal();
  if (n.filename().empty() && n.has_parent_path()) n = n.parent_path();
  return n;
}

std::string basename_of(const fs::path& p) { return tidy(p).filename().string(); }

}  // namespace

std::string RunResult::param_dtype() const {
  if (config.is_object() && config.contains(schema::kConfigPrecision)) {
    const json& p = config.at(schema::kConfigPrecision);
    if (p.is_object() && p.contains(schema::kConfigParamDtype) && p.at(schema::kConfigParamDtype).is_string()) {
      return p.at(schema::kConfigParamDtype).get<std::string>();
    }
  }
  return "fp32";
}

int RunResult::warmup_steps() const {
  if (config.is_object() && config.contains(schema::kConfigInstrument)) {
    const json& ins = config.at(schema::kConfigInstrument);
    if (ins.is_object() && ins.contains(schema::kConfigWarmupSteps) && ins.at(schema::kConfigWarmupSteps).is_number()) {
      return ins.at(schema::kConfigWarmupSteps).get<int>();
    }
  }
  return 0;
}

const std::vector<StepRecord>& RunResult::chart_steps() const {
  if (!steps.empty()) return steps;
  auto it = rank_steps.find(0);
  if (it != rank_steps.end()) return it->second;
  return steps;
}

std::optional<double> json_number_at(const json& j, std::initializer_list<const char*> path) {
  const json* at = &j;
  for (const char* key : path) {
    if (!at->is_object() || !at->contains(key)) return std::nullopt;
    at = &(*at)[key];
  }
  if (!at->is_number()) return std::nullopt;
  return at->get<double>();
}

namespace {

// `config` without its precision section and, when `any_length`, without train.steps.
json config_for_twin(json config, bool any_length) {
  config.erase("precision");
  if (any_length && config.contains("train") && config["train"].is_object()) config["train"].erase("steps");
  return config;
}

const RunResult* fp32_run_like(const Scenario& sc, const RunResult& r, bool any_length) {
  const json mine = config_for_twin(r.config, any_length);
  for (const RunResult& other : sc.runs) {
    if (&other == &r || other.param_dtype() != "fp32") continue;
    if (config_for_twin(other.config, any_length) == mine && other.world_size == r.world_size && other.nodes == r.nodes)
      return &other;
  }
  return nullptr;
}

}  // namespace

const RunResult* fp32_twin(const Scenario& sc, const RunResult& r) { return fp32_run_like(sc, r, false); }

const RunResult* fp32_time_twin(const Scenario& sc, const RunResult& r) {
  const RunResult* same_length = fp32_run_like(sc, r, false);
  return same_length ? same_length : fp32_run_like(sc, r, true);
}

namespace {

// The largest of `key` (else tensor_peak_bytes) over memory.ranks[], or over rank 0's memory when there are none.
double largest_rank_memory(const RunResult& r, const char* key) {
  auto value = [&](const json& m) -> double {
    for (const char* k : {key, schema::kTensorPeakBytes})
      if (m.is_object() && m.contains(k) && m[k].is_number()) return m[k].get<double>();
    return 0;
  };
  if (!r.raw.contains("memory") || !r.raw["memory"].is_object())
    return r.memory && r.memory->tensor_peak ? *r.memory->tensor_peak : 0;
  const json& memory = r.raw["memory"];
  double peak = value(memory);
  if (memory.contains("ranks") && memory["ranks"].is_array())
    for (const json& rank : memory["ranks"]) peak = std::max(peak, value(rank));
  return peak;
}

}  // namespace

double largest_rank_peak(const RunResult& r) { return largest_rank_memory(r, schema::kTensorPeakBytes); }
double largest_rank_device_side_peak(const RunResult& r) {
  return largest_rank_memory(r, schema::kDeviceSidePeakBytes);
}

RunResult parse_result(const json& doc, const std::string& source) {
  namespace k = schema;
  const Obj top(doc, source, "");

  const json& version = top.at(k::kSchemaVersion);
  if (!version.is_number_integer() || version.get<int>() != k::kVersion) {
    throw AnalysisError(source + ": \"" + k::kSchemaVersion + "\" is " + version.dump() + ", this reader supports " +
                        std::to_string(k::kVersion) + "; rerun the training with a matching dtlab or use a matching " +
                        "dtlab-report");
  }

  RunResult r;
  r.raw = doc;
  r.config = top.at(k::kConfig);
  if (!r.config.is_object()) {
    throw AnalysisError(source + ": key \"config\" must be an object, got " + std::string(r.config.type_name()));
  }

  const Obj ctx = top.object(k::kContext);
  r.dtlab_version = ctx.str(k::kDtlabVersion);
  r.git_sha = ctx.str(k::kGitSha);
  r.torch_version = ctx.str(k::kTorchVersion);
  r.host = ctx.str(k::kHost);
  r.world_size = static_cast<int>(ctx.integer(k::kWorldSize));
  r.launcher = ctx.str(k::kLauncher);
  r.started_at = ctx.str(k::kStartedAt);
  r.threads = ctx.has(k::kThreads) ? static_cast<int>(ctx.integer(k::kThreads)) : 0;
  r.command = ctx.str_or(k::kCommand, "");
  r.strategy_doc = ctx.str_or(k::kStrategyDoc, "");
  r.choose_when = ctx.str_or(k::kChooseWhen, "");
  r.baseline = ctx.str_or(k::kBaseline, "");
  r.nodes = ctx.has(k::kNodes) ? static_cast<int>(ctx.integer(k::kNodes)) : 1;
  r.ranks_per_node = ctx.has(k::kRanksPerNode) ? static_cast<int>(ctx.integer(k::kRanksPerNode)) : 0;
  r.inter_link = ctx.str_or(k::kInterLink, "");
  r.intra_link = ctx.str_or(k::kIntraLink, "");
  r.inter_link_bps = ctx.opt_num(k::kInterLinkBps);
  if (ctx.has(k::kCpu)) {
    const Obj cpu = ctx.object(k::kCpu);
    RunResult::Cpu c;
    c.model = cpu.str_or("model", "unknown CPU");
    c.cores = cpu.has("cores") ? static_cast<int>(cpu.integer("cores")) : 0;
    c.avx2 = cpu.flag("avx2");
    c.avx512f = cpu.flag("avx512f");
    c.avx512_bf16 = cpu.flag("avx512_bf16");
    c.amx_bf16 = cpu.flag("amx_bf16");
    c.kernels_capped_by = cpu.str_or("kernels_capped_by", "");
    r.cpu = c;
  }
  std::string config_strategy = "unknown";
  if (r.config.contains(k::kConfigParallel)) {
    const json& par = r.config.at(k::kConfigParallel);
    if (par.is_object() && par.contains(k::kStrategy) && par.at(k::kStrategy).is_string()) {
      config_strategy = par.at(k::kStrategy).get<std::string>();
    }
  }
  r.strategy = ctx.str_or(k::kStrategy, config_strategy);

  const Obj model = top.object(k::kModel);
  r.params = model.integer(k::kParams);
  r.flops_per_token = model.num(k::kFlopsPerToken);
  std::string config_preset;
  if (r.config.contains(k::kModel) && r.config.at(k::kModel).is_object() &&
      r.config.at(k::kModel).contains(k::kPreset) && r.config.at(k::kModel).at(k::kPreset).is_string()) {
    config_preset = r.config.at(k::kModel).at(k::kPreset).get<std::string>();
  }
  r.preset = model.str_or(k::kPreset, config_preset);

  const json& steps = top.at(k::kSteps);
  if (!steps.is_array()) {
    throw AnalysisError(source + ": key \"steps\" must be an array, got " + std::string(steps.type_name()));
  }
  r.steps.reserve(steps.size());
  for (std::size_t i = 0; i < steps.size(); ++i) {
    r.steps.push_back(parse_step(Obj(steps[i], source, std::string(k::kSteps) + "[" + std::to_string(i) + "]")));
  }

  if (top.has(k::kStatus)) {
    const std::string status = top.str(k::kStatus);
    if (status != k::kStatusOom)
      throw AnalysisError(source + ": \"" + k::kStatus + "\" is \"" + status + "\"; this reader knows \"" +
                          k::kStatusOom + "\" (or no status: the run completed)");
    const Obj oom = top.object(k::kOom);
    RunResult::OutOfMemory o;
    o.rank = static_cast<int>(oom.integer("rank"));
    o.step = oom.integer("step");
    o.category = oom.str("category");
    o.requested_bytes = oom.num("requested_bytes");
    o.in_use_bytes = oom.num("in_use_bytes");
    o.limit_bytes = oom.num("limit_bytes");
    o.message = oom.str_or("message", "");
    r.oom = o;
    return r;  // no summary, memory or collectives: the run stopped
  }

  const Obj sum = top.object(k::kSummary);
  r.tokens_per_s = sum.num(k::kTokensPerS);
  r.step_ms_median = sum.num(k::kStepMsMedian);
  r.step_ms_min = sum.num(k::kStepMsMin);
  r.step_ms_max = sum.num(k::kStepMsMax);
  r.final_loss = sum.num(k::kFinalLoss);
  r.tflops = sum.num(k::kTflops);
  r.wall_s = sum.num(k::kWallS);
  r.measured_steps = sum.integer(k::kMeasuredSteps);
  r.mfu_pct = sum.opt_num(k::kMfuPct);
  r.gemm_tflops = sum.opt_num(k::kGemmTflops);
  r.comm_wait_ms_median = sum.opt_num(k::kCommWaitMsMedian);
  r.comm_wait_least_ms_median = sum.opt_num(k::kCommWaitLeastMsMedian);

  // "memory" is optional, and older results kept other keys there: read it only in this schema's shape.
  if (top.has(k::kMemory) && top.at(k::kMemory).is_object() && top.at(k::kMemory).contains(k::kParamsBytes)) {
    const Obj mem = top.object(k::kMemory);
    RunResult::Memory m;
    m.params = mem.num(k::kParamsBytes);
    m.grads = mem.num(k::kGradsBytes);
    m.optimizer = mem.num(k::kOptimizerBytes);
    m.buffers = mem.num(k::kBuffersBytes);
    m.activations = mem.opt_num(k::kActivationsBytes);
    m.tensor_peak = mem.opt_num(k::kTensorPeakBytes);
    m.hwm = mem.opt_num(k::kHwmBytes);
    r.memory = m;
  }
  if (doc.contains(k::kCollectives) && doc.at(k::kCollectives).is_array()) {
    double total = 0;
    for (const json& row : doc.at(k::kCollectives)) {
      if (!row.is_object() || !row.contains(k::kBytesPerStep) || !row.at(k::kBytesPerStep).is_number()) continue;
      const double b = row.at(k::kBytesPerStep).get<double>();
      total += b;
      if (row.contains("op") && row.at("op").is_string())
        r.comm_bytes_per_step_by_op[row.at("op").get<std::string>()] += b;
    }
    r.comm_bytes_per_step = total;
  }
  return r;
}

std::vector<StepRecord> parse_steps_jsonl(std::istream& in, const std::string& source) {
  std::vector<StepRecord> out;
  std::string line;
  int line_no = 0;
  while (std::getline(in, line)) {
    ++line_no;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    json j;
    try {
      j = json::parse(line);
    } catch (const json::parse_error& e) {
      throw AnalysisError(source + ":" + std::to_string(line_no) + ": not valid JSON: " + e.what());
    }
    out.push_back(parse_step(Obj(j, source + ":" + std::to_string(line_no), "")));
  }
  return out;
}

RunResult load_run(const fs::path& run_dir, const std::string& name) {
  const fs::path file = run_dir / schema::kResultFile;
  if (!fs::is_regular_file(file)) {
    throw AnalysisError(file.string() +
                        ": not found (a run dir holds result.json, written by rank 0 of `dtlab train`)");
  }
  RunResult r = parse_result(read_json_file(file), file.string());
  r.dir = run_dir.string();
  r.name = name.empty() ? basename_of(run_dir) : name;
  for (const fs::path& sub : sorted_subdirs(run_dir)) {
    const int rank = rank_of_dir(sub.filename().string());
    const fs::path steps_file = sub / schema::kStepsFile;
    if (rank < 0 || !fs::is_regular_file(steps_file)) continue;
    std::ifstream in(steps_file);
    if (!in) throw AnalysisError(steps_file.string() + ": cannot open for reading");
    r.rank_steps[rank] = parse_steps_jsonl(in, steps_file.string());
  }
  return r;
}

Scenario load_scenario(const fs::path& dir) {
  namespace k = schema;
  const fs::path file = dir / k::kScenarioFile;
  const std::string source = file.string();
  const json doc = read_json_file(file);
  const Obj top(doc, source, "");

  Scenario s;
  s.dir = dir.string();
  s.name = top.str(k::kScenario);
  s.title = top.str_or(k::kTitle, s.name);
  s.description = top.str_or(k::kDescription, "");
  s.question = top.str_or(k::kQuestion, "");
  s.look_for = top.str_or(k::kLookFor, "");
  if (top.has(k::kNotes)) {
    const json& notes = top.at(k::kNotes);
    if (!notes.is_array()) throw AnalysisError(source + ": key \"notes\" must be an array of strings");
    for (std::size_t i = 0; i < notes.size(); ++i) {
      if (!notes[i].is_string()) {
        throw AnalysisError(source + ": key \"notes[" + std::to_string(i) + "]\" must be a string");
      }
      s.notes.push_back(notes[i].get<std::string>());
    }
  }
  const json& runs = top.at(k::kRuns);
  if (!runs.is_array()) throw AnalysisError(source + ": key \"runs\" must be an array");
  for (std::size_t i = 0; i < runs.size(); ++i) {
    const Obj run(runs[i], source, std::string(k::kRuns) + "[" + std::to_string(i) + "]");
    const std::string run_name = run.str(k::kRunName);
    const std::string run_dir = run.str_or(k::kRunDir, run_name);
    RunResult r = load_run(dir / run_dir, run_name);
    (r.oom ? s.oom_runs : s.runs).push_back(std::move(r));
  }
  return s;
}

std::vector<Scenario> discover(const std::vector<std::string>& inputs) {
  std::vector<fs::path> scenario_dirs;
  std::vector<fs::path> run_dirs;
  for (const std::string& input : inputs) {
    fs::path p(input);
    if (!fs::exists(p)) throw AnalysisError(input + ": input does not exist");
    if (fs::is_regular_file(p)) {
      const std::string fname = p.filename().string();
      if (fname != schema::kScenarioFile && fname != schema::kResultFile) {
        throw AnalysisError(input +
                            ": not a results input (give a scenario dir, a run dir, a parent dir, or a "
                            "scenario.json / result.json file)");
      }
      p = p.parent_path().empty() ? fs::path(".") : p.parent_path();
    }
    if (is_scenario_dir(p)) {
      scenario_dirs.push_back(p);
    } else if (is_run_dir(p)) {
      run_dirs.push_back(p);
    } else {
      walk(p, scenario_dirs, run_dirs);
    }
  }

  std::vector<Scenario> out;
  std::set<std::string> seen;
  for (const fs::path& d : scenario_dirs) {
    if (seen.insert(canonical_key(d)).second) out.push_back(load_scenario(d));
  }

  Scenario loose;
  loose.name = "runs";
  loose.title = "Selected runs";
  loose.description = "Run directories given directly (not part of a scenario).";
  for (const fs::path& d : run_dirs) {
    if (!seen.insert(canonical_key(d)).second) continue;
    RunResult r = load_run(d);
    const bool clash =
        std::any_of(loose.runs.begin(), loose.runs.end(), [&](const RunResult& o) { return o.name == r.name; });
    if (clash) r.name = basename_of(tidy(d).parent_path()) + "/" + r.name;
    (r.oom ? loose.oom_runs : loose.runs).push_back(std::move(r));
  }
  if (!loose.runs.empty() || !loose.oom_runs.empty()) {
    if (loose.runs.size() == 1) loose.dir = loose.runs.front().dir;
    out.push_back(std::move(loose));
  }

  if (out.empty()) {
    std::string list;
    for (const std::string& i : inputs) list += (list.empty() ? "" : ", ") + i;
    throw AnalysisError("no scenario.json or result.json found under: " + (list.empty() ? "(no inputs)" : list));
  }
  return out;
}

}  // namespace dtlab::analysis
