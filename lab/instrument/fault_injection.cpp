// fault_injection.cpp: parses the DTLAB_INJECT_* variables once and acts at the named points (see the header).
#include "lab/instrument/fault_injection.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <iterator>
#include <limits>
#include <map>
#include <mutex>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "lab/config.hpp"

namespace dtlab {
namespace {

const std::set<std::string>& delay_points() {
  static const std::set<std::string> points = {"before_all_reduce", "before_all_gather", "before_reduce_scatter",
                                               "before_broadcast",  "before_barrier",    "before_send_recv",
                                               "after_forward",     "before_optimizer"};
  return points;
}

const std::set<std::string>& checkpoint_points() {
  static const std::set<std::string> points = {"ckpt_shards_written", "ckpt_async_written", "ckpt_before_commit",
                                               "ckpt_metadata_written", "ckpt_after_commit"};
  return points;
}

std::string point_list() {
  std::string out;
  for (const auto& p : delay_points()) out += (out.empty() ? "" : " | ") + p;
  return out;
}

[[noreturn]] void bad(const char* variable, const std::string& item, const std::string& rule) {
  throw FaultSpecError(std::string(variable) + ": '" + item + "' " + rule);
}

int parse_int(const char* variable, const std::string& item, const std::string& text, const char* what) {
  size_t used = 0;
  int value = -1;
  try {
    value = std::stoi(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used != text.size() || value < 0) bad(variable, item, std::string("has no valid ") + what + " (a number >= 0)");
  return value;
}

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::stringstream in(s);
  std::string part;
  while (std::getline(in, part, sep)) out.push_back(part);
  return out;
}

struct Specs {
  std::map<std::string, int> delays_ms;  // point or point@rank
  struct {
    bool set = false;
    int rank = -1;
    int64_t step = -1;
    std::string kind, point = "step_end";
  } fault;
  struct {
    bool set = false;
    int rank = -1;
    int64_t step = -1;
    bool nan = false;
  } nonfinite;
  std::optional<std::pair<int, int64_t>> memory_limit;  // rank, bytes
  std::string mutation;
  struct {
    bool set = false;
    int rank = -1;
    int64_t call = -1;  // -1: the first call tagged `tag`
    std::string tag;
    DesyncInjection kind = DesyncInjection::none;
    std::string group = "world";
  } desync;
};

Specs parse_specs() {
  Specs s;
  if (const char* spec = std::getenv("DTLAB_INJECT_DELAY"); spec && *spec) {
    for (const std::string& item : split(spec, ',')) {
      const auto eq = item.find('=');
      if (eq == std::string::npos) bad("DTLAB_INJECT_DELAY", item, "is not POINT[@RANK]=MS");
      const std::string key = item.substr(0, eq);
      const std::string point = key.substr(0, key.find('@'));
      if (!delay_points().count(point)) bad("DTLAB_INJECT_DELAY", item, "names no point (" + point_list() + ")");
      if (key.find('@') != std::string::npos)
        parse_int("DTLAB_INJECT_DELAY", item, key.substr(key.find('@') + 1), "rank after @");
      s.delays_ms[key] = parse_int("DTLAB_INJECT_DELAY", item, item.substr(eq + 1), "milliseconds");
    }
  }
  // A fault is transient: it fires in a job's first attempt only, so a restarted job (dtlab launch --max-restarts)
  // runs clean.
  const char* restart = std::getenv("DTLAB_RESTART_COUNT");
  const bool restarted = restart != nullptr && *restart != '\0' && std::string(restart) != "0";
  if (const char* spec = std::getenv("DTLAB_INJECT_FAULT"); spec && *spec && !restarted) {
    std::string item = spec, where;
    if (const auto at = item.find('@'); at != std::string::npos) where = item.substr(at + 1), item = item.substr(0, at);
    const auto parts = split(item, ':');
    if (parts.size() != 3) bad("DTLAB_INJECT_FAULT", spec, "is not RANK:STEP:KIND[@POINT]");
    s.fault.set = true;
    s.fault.rank = parse_int("DTLAB_INJECT_FAULT", spec, parts[0], "rank");
    s.fault.step = parse_int("DTLAB_INJECT_FAULT", spec, parts[1], "step");
    s.fault.kind = parts[2];
    if (!std::set<std::string>{"exit", "sigkill", "sigterm", "abort", "stop"}.count(s.fault.kind))
      bad("DTLAB_INJECT_FAULT", spec, "has no valid KIND (exit | sigkill | sigterm | abort | stop)");
    if (!where.empty()) {
      if (where != "step_end" && where != "mid_ring" && !delay_points().count(where) &&
          !checkpoint_points().count(where)) {
        std::string checkpoint_list;
        for (const auto& p : checkpoint_points()) checkpoint_list += " | " + p;
        bad("DTLAB_INJECT_FAULT", spec,
            "has no valid POINT (step_end | mid_ring | " + point_list() + checkpoint_list + ")");
      }
      s.fault.point = where;
    }
  }
  if (const char* spec = std::getenv("DTLAB_INJECT_INF"); spec && *spec) {
    const auto parts = split(spec, ':');
    if (parts.size() < 2 || parts.size() > 3 || (parts.size() == 3 && parts[2] != "nan"))
      bad("DTLAB_INJECT_INF", spec, "is not RANK:STEP or RANK:STEP:nan");
    s.nonfinite = {true, parse_int("DTLAB_INJECT_INF", spec, parts[0], "rank"),
                   parse_int("DTLAB_INJECT_INF", spec, parts[1], "step"), parts.size() == 3};
  }
  if (const char* spec = std::getenv("DTLAB_INJECT_MEMORY_LIMIT"); spec && *spec) {
    const std::string item = spec;
    const auto colon = item.find(':');
    if (colon == std::string::npos) bad("DTLAB_INJECT_MEMORY_LIMIT", spec, "is not RANK:SIZE (e.g. 1:4MiB)");
    const int rank = parse_int("DTLAB_INJECT_MEMORY_LIMIT", spec, item.substr(0, colon), "rank");
    try {
      s.memory_limit = {rank, memory_limit_bytes(MemoryConfig{item.substr(colon + 1)})};
    } catch (const ConfigError& e) {
      bad("DTLAB_INJECT_MEMORY_LIMIT", spec, std::string("has no valid SIZE: ") + e.what());
    }
  }
  if (const char* spec = std::getenv("DTLAB_INJECT_MUTATION"); spec && *spec) {
    s.mutation = spec;
    static const char* const kMutations[] = {"drop_world_factor", "sum_hybrid_replicas", "skip_bucket",
                                             "drop_micro_batch_grad", "skip_weight_pass"};
    if (std::find(std::begin(kMutations), std::end(kMutations), s.mutation) == std::end(kMutations))
      bad("DTLAB_INJECT_MUTATION", spec,
          "is not one of drop_world_factor | sum_hybrid_replicas | skip_bucket | drop_micro_batch_grad | "
          "skip_weight_pass");
    std::fprintf(stderr, "fault injection: MUTATION %s is active: this process trains with a deliberate bug\n", spec);
  }
  if (const char* spec = std::getenv("DTLAB_INJECT_DESYNC"); spec && *spec) {
    std::string item = spec;
    if (const auto at = item.find('@'); at != std::string::npos) s.desync.group = item.substr(at + 1), item.resize(at);
    const auto parts = split(item, ':');
    if (parts.size() != 3 || (parts[2] != "skip" && parts[2] != "shape") || s.desync.group.empty())
      bad("DTLAB_INJECT_DESYNC", spec, "is not RANK:CALL:skip|shape[@GROUP]");
    s.desync.set = true;
    s.desync.rank = parse_int("DTLAB_INJECT_DESYNC", spec, parts[0], "rank");
    if (parts[1].find_first_not_of("0123456789") == std::string::npos)
      s.desync.call = parse_int("DTLAB_INJECT_DESYNC", spec, parts[1], "call number");
    else
      s.desync.tag = parts[1];
    s.desync.kind = parts[2] == "skip" ? DesyncInjection::skip : DesyncInjection::shape;
  }
  return s;
}

const Specs& specs() {
  static const Specs parsed = parse_specs();
  return parsed;
}

std::atomic<int64_t> g_delays{0};
std::atomic<int64_t> g_step{0};
std::atomic<bool> g_fault_fired{false};

}  // namespace

void validate_fault_injection() { (void)specs(); }

void inject_delay(const char* point, int rank) {
  const auto& table = specs().delays_ms;
  if (table.empty()) return;
  int ms = 0;
  if (auto it = table.find(point); it != table.end()) ms = it->second;
  if (auto it = table.find(std::string(point) + "@" + std::to_string(rank)); it != table.end()) ms = it->second;
  if (ms <= 0) return;
  static std::mutex announced_mutex;
  static std::set<std::string> announced;
  {
    std::lock_guard<std::mutex> lock(announced_mutex);
    if (announced.insert(point).second) {
      std::fprintf(stderr, "fault injection: rank %d sleeps %d ms at %s (first of its delays there)\n", rank, ms,
                   point);
      std::fflush(stderr);
    }
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(ms));
  g_delays.fetch_add(1);
}

int64_t injected_delay_count() { return g_delays.load(); }

void set_fault_step(int64_t step) { g_step.store(step); }

void inject_fault(const char* point, int rank) { inject_fault(point, rank, g_step.load()); }

void inject_fault(const char* point, int rank, int64_t step) {
  const auto& f = specs().fault;
  if (!f.set || f.rank != rank || f.point != point || step < f.step) return;
  if (g_fault_fired.exchange(true)) return;
  std::fprintf(stderr, "fault injection: rank %d at step %lld, %s: %s\n", rank, static_cast<long long>(step), point,
               f.kind.c_str());
  std::fflush(stderr);
  if (f.kind == "exit") std::_Exit(1);
  if (f.kind == "sigkill") std::raise(SIGKILL);
  if (f.kind == "sigterm") std::raise(SIGTERM);
  if (f.kind == "abort") std::abort();
  if (f.kind == "stop") {
    // A rank that really stalls keeps its heartbeat thread; SIGSTOP freezes that too. Two heartbeat polls first
    // (lab/dist/progress_board.hpp: every 50 ms), so the board says where it stalled even when steps are faster
    // than a poll.
    std::this_thread::sleep_for(std::chrono::milliseconds(120));
    std::raise(SIGSTOP);  // stalls here until SIGCONT or SIGKILL
  }
}

bool inject_nonfinite(int64_t step, int rank) {
  const auto& n = specs().nonfinite;
  return n.set && n.rank == rank && n.step == step;
}

double nonfinite_injection_value() {
  return specs().nonfinite.nan ? std::numeric_limits<double>::quiet_NaN() : std::numeric_limits<double>::infinity();
}

std::optional<int64_t> injected_memory_limit(int rank) {
  const auto& limit = specs().memory_limit;
  if (!limit || limit->first != rank) return std::nullopt;
  std::fprintf(stderr, "fault injection: rank %d's memory.limit is %lld bytes\n", rank,
               static_cast<long long>(limit->second));
  return limit->second;
}

bool mutation(const char* name) { return specs().mutation == name; }

bool desync_injection_set() { return specs().desync.set; }

DesyncInjection injected_desync(int rank, const std::string& group, int64_t call, const std::string& tag) {
  const auto& d = specs().desync;
  if (!d.set || d.rank != rank || d.group != group) return DesyncInjection::none;
  if (d.call >= 0 ? d.call != call : d.tag != tag) return DesyncInjection::none;
  static std::atomic<bool> fired{false};
  if (fired.exchange(true)) return DesyncInjection::none;  // once: a tag's first call
  std::fprintf(stderr, "fault injection: rank %d %s call #%lld '%s' on group '%s'\n", rank,
               d.kind == DesyncInjection::skip ? "skips" : "changes the shape of", static_cast<long long>(call),
               tag.c_str(), group.c_str());
  std::fflush(stderr);
  return d.kind;
}

}  // namespace dtlab
