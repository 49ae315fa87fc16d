// cluster.cpp: the emulated cluster of `dtlab launch --nodes M` (see cluster.hpp): namespaces, veth pairs, a
// bridge and tbf qdiscs, made and removed with iproute2's `ip` and `tc`.
#include "lab/launch/cluster.hpp"

#include <signal.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>

#include "lab/process.hpp"

namespace dtlab {
namespace {

constexpr const char* kNetnsDirectory = "/run/netns";  // where `ip netns add` mounts a namespace's file
constexpr int kCapNetAdmin = 12, kCapSysAdmin = 21;    // linux/capability.h

// The command line as a user would type it, for messages.
std::string command_text(const std::vector<std::string>& argv) {
  std::string text;
  for (const std::string& word : argv) text += (text.empty() ? "" : " ") + word;
  return text;
}

// Runs one iproute2 command; throws ClusterError with the command and what it printed when it fails.
void run_tool(const std::vector<std::string>& argv) {
  ProcessSpec spec;
  spec.argv = argv;
  spec.search_path = true;
  spec.stdin_fd = kNullDevice;
  const ProcessResult result = run_process(spec, /*capture_output=*/true);
  if (result.exit_code != 0) {
    std::string output = result.output;
    while (!output.empty() && output.back() == '\n') output.pop_back();
    throw ClusterError("emulated cluster: `" + command_text(argv) + "` failed (exit " +
                       std::to_string(result.exit_code) + ")" + (output.empty() ? "" : ": " + output));
  }
}

// The effective capability mask of this process (/proc/self/status, CapEff); 0 when it cannot be read.
uint64_t effective_capabilities() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("CapEff:", 0) != 0) continue;
    try {
      return std::stoull(line.substr(7), nullptr, 16);
    } catch (const std::exception&) {
      return 0;
    }
  }
  return 0;
}

// tbf's bucket: a 4 ms refill at the rate (one scheduler tick at HZ=250, so the bucket never runs dry between two
// refills) plus room for two 64 KiB segments (loopback's MTU, and veth's GSO packets).
std::string tbf_burst_bytes(const LinkRate& rate) {
  const double bytes = rate.bits_per_s / 8.0 / 250.0 + 2.0 * 65536.0;
  return std::to_string(static_cast<int64_t>(bytes));
}

std::vector<std::string> tbf_command(const std::string& netns, const std::string& device, const LinkRate& rate) {
  return {"tc",
          "-n",
          netns,
          "qdisc",
          "add",
          "dev",
          device,
          "root",
          "tbf",
          "rate",
          rate.tc_text,
          "burst",
          tbf_burst_bytes(rate),
          "latency",
          "50ms"};
}

bool process_alive(pid_t pid) { return ::kill(pid, 0) == 0 || errno == EPERM; }

}  // namespace

LinkRate parse_link_rate(const std::string& text, const std::string& option) {
  // Case does not matter: "1gbit", "1Gbit", "1Gbps", "500Mbit/s".
  static const std::regex kForm(R"(^([0-9]+(\.[0-9]+)?(e[0-9]+)?)\s*([kmg]?)(bit|bps|bit/s)$)");
  std::string lowered = text;
  for (char& c : lowered) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  const auto refuse = [&] {
    return std::invalid_argument(option + " " + text +
                                 ": not a link rate; write it as tc does, e.g. 200mbit, 1gbit, 4gbit (also 1Gbps, "
                                 "500Mbit/s), between 1 Mbit/s and 1000 Gbit/s");
  };
  std::smatch match;
  if (!std::regex_match(lowered, match, kForm)) throw refuse();
  const std::string multiple = match[4].str();
  const double scale = multiple == "k" ? 1e3 : multiple == "m" ? 1e6 : multiple == "g" ? 1e9 : 1.0;
  const double bits_per_s = std::stod(match[1].str()) * scale;
  if (!(bits_per_s >= 1e6 && bits_per_s <= 1e12)) throw refuse();
  char tc_text[64];
  std::snprintf(tc_text, sizeof tc_text, "%.0fbit", bits_per_s);
  return {bits_per_s, tc_text};
}

std::optional<double> launched_link_bps(const char* text) {
  if (text == nullptr || *text == '\0') return std::nullopt;
  if (std::string(text) == "none") return 0.0;
  try {
    return parse_link_rate(text, "the launcher's link rate").bits_per_s;
  } catch (const std::invalid_argument&) {
    return std::nullopt;
  }
}

std::string describe_launched_link(const std::optional<double>& bits_per_s) {
  if (!bits_per_s) return "unknown";
  return *bits_per_s > 0 ? describe_rate(*bits_per_s) : "unshaped";
}

bool can_build_clusters(std::string* why) {
  const uint64_t capabilities = effective_capabilities();
  std::string missing;
  if (!(capabilities >> kCapNetAdmin & 1)) missing = "CAP_NET_ADMIN";
  if (!(capabilities >> kCapSysAdmin & 1)) missing += std::string(missing.empty() ? "" : " and ") + "CAP_SYS_ADMIN";
  if (!missing.empty()) {
    if (why)
      *why = "an emulated cluster (--nodes > 1) needs " + missing +
             " to create network namespaces, links and qdiscs: run as root (or grant the capability), or run on "
             "one node with --nodes 1";
    return false;
  }
  for (const char* tool : {"ip", "tc"}) {
    if (!find_on_path(tool)) {
      if (why)
        *why = std::string("an emulated cluster (--nodes > 1) needs `") + tool +
               "` (Debian package iproute2) on PATH; install it, or run on one node with --nodes 1";
      return false;
    }
  }
  return true;
}

EmulatedCluster::EmulatedCluster(const ClusterSpec& spec, pid_t owner_pid) : spec_(spec), owner_pid_(owner_pid) {
  if (spec.nodes < 1 || spec.nodes > kMaxNodes)
    throw ClusterError("emulated cluster: --nodes " + std::to_string(spec.nodes) + " must be between 1 and " +
                       std::to_string(kMaxNodes));
  try {
    build();
  } catch (...) {
    tear_down();
    throw;
  }
}

EmulatedCluster::~EmulatedCluster() { tear_down(); }

std::string EmulatedCluster::node_namespace(int node) const {
  return "dtlab-" + std::to_string(owner_pid_) + "-n" + std::to_string(node);
}
std::string EmulatedCluster::node_namespace_path(int node) const {
  return std::string(kNetnsDirectory) + "/" + node_namespace(node);
}
std::string EmulatedCluster::node_interface(int node) const {
  return "dt" + std::to_string(owner_pid_) + "-n" + std::to_string(node);
}
std::string EmulatedCluster::node_address(int node) { return "198.18.0." + std::to_string(node + 1); }
std::string EmulatedCluster::bridge_namespace() const { return "dtlab-" + std::to_string(owner_pid_) + "-br"; }

void EmulatedCluster::build() {
  const std::string pid = std::to_string(owner_pid_);
  const std::string br_ns = bridge_namespace(), bridge = "dt" + pid + "-br";
  run_tool({"ip", "netns", "add", br_ns});
  made_.push_back(br_ns);
  run_tool({"ip", "-n", br_ns, "link", "add", "name", bridge, "type", "bridge"});
  run_tool({"ip", "-n", br_ns, "link", "set", "dev", bridge, "addrgenmode", "none", "up"});
  for (int node = 0; node < spec_.nodes; ++node) {
    const std::string ns = node_namespace(node), inside = node_interface(node);
    const std::string outside = "dt" + pid + "-b" + std::to_string(node);
    run_tool({"ip", "netns", "add", ns});
    made_.push_back(ns);
    // The pair is made inside the node and its other end moved straight to the bridge's namespace: neither end ever
    // appears in the machine's own namespace. No IPv6 link-local addresses: nothing but the ranks' traffic.
    run_tool({"ip", "-n", ns, "link", "add", "name", inside, "type", "veth", "peer", "name", outside, "netns", br_ns});
    run_tool({"ip", "-n", ns, "link", "set", "dev", inside, "addrgenmode", "none"});
    run_tool({"ip", "-n", ns, "addr", "add", node_address(node) + "/24", "dev", inside});
    run_tool({"ip", "-n", ns, "link", "set", "dev", inside, "up"});
    run_tool({"ip", "-n", ns, "link", "set", "dev", "lo", "up"});
    run_tool({"ip", "-n", br_ns, "link", "set", "dev", outside, "addrgenmode", "none", "master", bridge, "up"});
    if (spec_.inter_link) {
      run_tool(tbf_command(ns, inside, *spec_.inter_link));      // what the node sends
      run_tool(tbf_command(br_ns, outside, *spec_.inter_link));  // what the node receives
    }
    if (spec_.intra_link) run_tool(tbf_command(ns, "lo", *spec_.intra_link));
  }
}

std::string EmulatedCluster::tear_down() noexcept {
  std::string problems;
  // Nodes first, then the bridge: deleting a namespace deletes its links, and a veth pair goes with either end.
  while (!made_.empty()) {
    const std::string name = made_.back();
    made_.pop_back();
    try {
      run_tool({"ip", "netns", "del", name});
    } catch (const std::exception& e) {
      problems += std::string(problems.empty() ? "" : "\n") + e.what();
    }
  }
  return problems;
}

std::vector<ClusterNamespace> cluster_namespaces() {
  static const std::regex kName(R"(^dtlab-([0-9]+)-(n[0-9]+|br)$)");
  std::vector<ClusterNamespace> found;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(kNetnsDirectory, ec)) {
    const std::string name = entry.path().filename().string();
    std::smatch match;
    if (!std::regex_match(name, match, kName)) continue;
    try {
      found.push_back({name, static_cast<pid_t>(std::stol(match[1].str()))});
    } catch (const std::exception&) {
      // a pid too large to be one: not ours
    }
  }
  return found;
}

std::vector<std::string> remove_stale_clusters(std::string* problems) {
  std::vector<std::string> removed;
  for (const ClusterNamespace& ns : cluster_namespaces()) {
    if (process_alive(ns.owner_pid)) continue;
    try {
      run_tool({"ip", "netns", "del", ns.name});
      removed.push_back(ns.name);
    } catch (const std::exception& e) {
      if (problems) *problems += std::string(problems->empty() ? "" : "\n") + e.what();
    }
  }
  return removed;
}

}  // namespace dtlab
