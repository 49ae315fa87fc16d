// fault_injection.cpp: parses DTLAB_INJECT_DELAY once and sleeps at the named points.
#include "lab/dist/fault_injection.hpp"

#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <sstream>
#include <string>
#include <thread>

namespace dtlab {
namespace {

// point or point@rank -> milliseconds
const std::map<std::string, int>& delays() {
  static const std::map<std::string, int> table = [] {
    std::map<std::string, int> t;
    const char* spec = std::getenv("DTLAB_INJECT_DELAY");
    if (!spec) return t;
    std::stringstream in(spec);
    std::string item;
    while (std::getline(in, item, ',')) {
      const auto eq = item.find('=');
      if (eq == std::string::npos) continue;
      t[item.substr(0, eq)] = std::atoi(item.c_str() + eq + 1);
    }
    return t;
  }();
  return table;
}

}  // namespace

void inject_delay(const char* point, int rank) {
  const auto& table = delays();
  if (table.empty()) return;
  int ms = 0;
  if (auto it = table.find(point); it != table.end()) ms = it->second;
  if (auto it = table.find(std::string(point) + "@" + std::to_string(rank)); it != table.end()) ms = it->second;
  if (ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(ms));
}

bool inject_nonfinite(int64_t step, int rank) {
  static const char* spec = std::getenv("DTLAB_INJECT_INF");
  if (!spec) return false;
  int inf_rank = -1;
  long long inf_step = -1;
  if (std::sscanf(spec, "%d:%lld", &inf_rank, &inf_step) != 2) return false;
  return inf_rank == rank && inf_step == step;
}

void inject_fault(int64_t step, int rank) {
  static const char* spec = std::getenv("DTLAB_INJECT_FAULT");
  if (!spec) return;
  int fault_rank = -1;
  long long fault_step = -1;
  char kind[16] = {0};
  if (std::sscanf(spec, "%d:%lld:%15s", &fault_rank, &fault_step, kind) != 3) return;
  if (fault_rank != rank || fault_step != step) return;
  const std::string k = kind;
  std::fprintf(stderr, "fault injection: rank %d after step %lld: %s\n", rank, fault_step, kind);
  std::fflush(stderr);
  if (k == "exit") std::_Exit(1);
  if (k == "sigkill") std::raise(SIGKILL);
  if (k == "sigterm") std::raise(SIGTERM);
  if (k == "abort") std::abort();
}

}  // namespace dtlab
