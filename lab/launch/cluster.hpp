// cluster.hpp: an emulated cluster on one machine, for `dtlab launch --nodes M` (torch-free).
//
// Each node is a network namespace; the nodes are joined by veth pairs to a bridge that lives in a namespace of its
// own, so nothing is added to, and no address is used in, the machine's own namespace. Traffic between ranks of one
// node stays inside its namespace (over its loopback); traffic between nodes crosses the node's veth and the bridge.
// The kernel's token-bucket filter (tc tbf) shapes each link in both directions: the node's side of its veth
// (what the node sends) and the bridge's side (what it receives) at the inter-node rate, the node's loopback at the
// intra-node rate. Everything is made with the real `ip` and `tc` (iproute2).
//
// Names carry the launcher's pid, so leftovers can be traced to their launcher and found when it is gone:
//   namespaces   dtlab-<pid>-n<i> (node i), dtlab-<pid>-br (the bridge)
//   links        dt<pid>-n<i> (node i's side of its veth), dt<pid>-b<i> (the bridge's side), dt<pid>-br (bridge)
//   addresses    198.18.0.<i+1>/24 on node i (RFC 2544's benchmarking range, only inside these namespaces)
//
//   EmulatedCluster cluster({.nodes = 2, .ranks_per_node = 2, .inter_link = parse_link_rate("1gbit", "--inter-link")},
//                           getpid());
//   spec.network_namespace = cluster.node_namespace_path(0);   // a process started in node 0
//   ... cluster.tear_down() (or the destructor) removes all of it.
#pragma once

#include <sys/types.h>

#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "lab/link_rate.hpp"

namespace dtlab {

// A link rate as tc spells it: "200mbit", "1gbit", "4gbit", "500kbit", "1000000bit" (SI multiples of bits per
// second); "Mbit/s", "Gbit/s" and "Gbps" spellings are accepted too.
struct LinkRate {
  double bits_per_s = 0;
  std::string tc_text;  // what tc is given, e.g. "200mbit"
};

// Throws std::invalid_argument naming `option`, the text and the accepted forms.
LinkRate parse_link_rate(const std::string& text, const std::string& option);

// A link's rate as `dtlab launch --nodes` hands it to each rank (DTLAB_INTER_LINK / DTLAB_INTRA_LINK: tc's text, or
// "none"): bits per second, 0 = unshaped; nullopt when `text` is null, empty or not a rate.
std::optional<double> launched_link_bps(const char* text);
// "1 Gbit/s", "unshaped" (0) or "unknown" (nullopt): how results and comm-bench name such a link.
std::string describe_launched_link(const std::optional<double>& bits_per_s);

struct ClusterSpec {
  int nodes = 2;                       // 1..kMaxNodes
  int ranks_per_node = 1;              // for the messages only: every rank of node i runs in node i's namespace
  std::optional<LinkRate> inter_link;  // nullopt: the veth is not shaped
  std::optional<LinkRate> intra_link;  // nullopt: the node's loopback is not shaped
};

constexpr int kMaxNodes = 250;  // node addresses are 198.18.0.1 .. 198.18.0.250

struct ClusterError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Whether this process holds what building a cluster takes: CAP_NET_ADMIN (links, addresses, qdiscs) and
// CAP_SYS_ADMIN (`ip netns add` mounts the namespace), and `ip` and `tc` on PATH. When not, `why` says which is
// missing and the way out.
bool can_build_clusters(std::string* why = nullptr);

class EmulatedCluster {
 public:
  // Builds the cluster for launcher `owner_pid`. Throws ClusterError naming the command that failed and what it
  // printed; whatever was built before the failure is removed first.
  EmulatedCluster(const ClusterSpec& spec, pid_t owner_pid);
  ~EmulatedCluster();
  EmulatedCluster(const EmulatedCluster&) = delete;
  EmulatedCluster& operator=(const EmulatedCluster&) = delete;

  // Removes every namespace it made (their links and qdiscs go with them). Idempotent; never throws; returns the
  // problems it met ("" = none).
  std::string tear_down() noexcept;

  const ClusterSpec& spec() const { return spec_; }
  std::string node_namespace(int node) const;       // "dtlab-1234-n0"
  std::string node_namespace_path(int node) const;  // "/run/netns/dtlab-1234-n0": ProcessSpec::network_namespace
  std::string node_interface(int node) const;       // "dt1234-n0": the node's interface (GLOO_SOCKET_IFNAME)
  static std::string node_address(int node);        // "198.18.0.1"
  std::string bridge_namespace() const;             // "dtlab-1234-br"

 private:
  void build();
  ClusterSpec spec_;
  pid_t owner_pid_;
  std::vector<std::string> made_;  // namespaces made so far, in order
};

// The names of every namespace of an emulated cluster ("dtlab-<pid>-..."), with the launcher pid each names.
struct ClusterNamespace {
  std::string name;
  pid_t owner_pid = 0;
};
std::vector<ClusterNamespace> cluster_namespaces();

// Removes the namespaces of clusters whose launcher no longer runs (killed with SIGKILL, say); leaves live ones.
// Returns the names removed. `problems` (may be null) gets one line per namespace that could not be removed.
std::vector<std::string> remove_stale_clusters(std::string* problems = nullptr);

}  // namespace dtlab
