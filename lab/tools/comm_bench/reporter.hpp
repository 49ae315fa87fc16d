// reporter.hpp: comm-bench's results and the reporters that print them, one per output format (the nccl-tests table
// on rank 0's report stream, and the JSON file that `dtlab calibrate` reads). The driver measures; a reporter only
// formats what it is handed.
#pragma once

#include <cstdint>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace dtlab::comm_bench {

struct Figure {
  double time_us = 0, algbw_GBps = 0, busbw_GBps = 0;
  std::optional<int64_t> wrong;  // empty when --check 0
};

struct Row {
  std::string op, algorithm;
  int64_t bytes = 0, count = 0;
  Figure out_of_place, in_place;
  std::optional<double> model_us;  // with --model
  std::optional<double> model_error_pct;
};

// What every report opens with.
struct BenchHeader {
  int ranks = 0;                  // the group's size: what every row ran over
  std::string group;              // world | node | cross (bench.hpp)
  int job_ranks = 0;              // every rank of the job
  std::string host, dtype, load;  // load: "load average 1.20 on 2 cores" at the start
  int64_t min_bytes = 0, max_bytes = 0;
  double factor = 0;
  int iters = 0, warmup = 0, repeats = 1;
  bool check = true;
  std::string model_source;      // "" without --model
  std::string backend = "gloo";  // gloo | nccl
  std::string device = "cpu";    // where the buffers live: "cpu" or "cuda:0 (NVIDIA H200)"
};

// One op/algorithm series of rows.
struct BenchSeries {
  std::string op, algorithm, what_runs;
  bool with_model = false, model_in_place = false;
};

struct P2pFigure {
  int64_t bytes = 0;
  double time_us = 0, GBps = 0;
  int peer = 1;  // rank 0 <-> this rank
};

// The nodes the ranks span (dtlab launch --nodes, or another launcher's LOCAL_WORLD_SIZE < WORLD_SIZE).
struct ClusterFacts {
  int nodes = 1, ranks_per_node = 1;
  std::string inter_link, intra_link;  // "1 Gbit/s" | "unshaped" | "unknown"
  double inter_link_bps = 0;           // the set rate; 0 = unshaped or unknown
};

// all_reduce at the point-to-point size against the physical limit of the links: every node must send (and
// receive) at least 2(M-1)/M of the buffer over its one link, so no algorithm beats bound_us at the set rate.
struct LinkBound {
  std::string algorithm;
  int64_t bytes = 0;
  double bound_us = 0, time_us = 0;  // time_us: the in-place figure
};

// How much of a collective compute running at the same time hides (bench.hpp's overlap line): an all_reduce of
// `bytes` alone, `gemms` GEMMs alone (about as long), then both at once (the all_reduce issued, the GEMMs run, then
// waited for). hidden_fraction = (comm + compute - together) / min(comm, compute), clamped to [-1, 1] (below 0:
// the two at once took longer than one after the other).
struct OverlapFigure {
  int64_t bytes = 0;
  int gemms = 0, gemm_size = 0;  // square fp32 GEMMs of gemm_size
  double comm_us = 0, compute_us = 0, together_us = 0, hidden_fraction = 0;
};

// What every report closes with.
struct BenchSummary {
  std::optional<int64_t> total_wrong;  // empty when --check 0
  double avg_busbw_GBps = 0;
  std::optional<ClusterFacts> cluster;          // when the ranks span nodes
  std::optional<P2pFigure> p2p;                 // with 2 or more ranks: ranks 0 <-> 1
  std::optional<P2pFigure> p2p_inter;           // on a cluster: ranks 0 <-> ranks_per_node (node 0 <-> node 1)
  std::vector<LinkBound> link_bounds;           // on a cluster with a set inter-node rate, when measured
  std::optional<OverlapFigure> overlap;         // with 2 or more ranks in the group
  const Row* all_reduce_at_p2p_size = nullptr;  // all_reduce's row at the point-to-point size, when measured
  std::optional<double> model_median_error_pct;
  size_t model_rows = 0;  // rows the median is over (with --model)
};

class Reporter {
 public:
  virtual ~Reporter() = default;
  virtual void begin(const BenchHeader&) {}
  virtual void series(const BenchSeries&) {}
  virtual void row(const Row&) {}
  virtual void note(const std::string& /*text*/) {}  // a one-off message (a model that could not predict a row)
  virtual void end(const BenchSummary&) {}
};

// The nccl-tests table, flushed per line so a long sweep shows progress. fd -1 = this process's stdout.
std::unique_ptr<Reporter> make_table_reporter(int fd);
// The JSON document `dtlab calibrate` fits; written at end(). `table` (may be null) is told where it went.
std::unique_ptr<Reporter> make_json_reporter(const std::string& path, Reporter* table);

}  // namespace dtlab::comm_bench
