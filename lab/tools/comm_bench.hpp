// comm_bench.hpp: `dtlab comm-bench` — a collective benchmark in the manner of nccl-tests, over lab/comm.
//
//   dtlab comm-bench -b 1K -e 256M -f 4 -n 10 -w 3              # 2 local ranks, every op and algorithm
//   dtlab comm-bench --op all_reduce --algorithm ring --json out.json --model profile.json
//   dtlab launch -n 4 dtlab comm-bench -b 1M -e 64M              # inside a job: uses that job's ranks
//   dtlab comm-bench --nodes 2 --ranks 2 --inter-link 1gbit      # on an emulated cluster of 2 nodes x 2 ranks
//
// From a plain shell (no launcher's environment) it re-launches itself as --ranks N ranks through
// `dtlab launch`'s machinery; rank 0 then writes the report to the shell's own stdout (an inherited
// descriptor, --report-fd), so the table is not prefixed with "[rank 0] " and can be piped or parsed.
//
// For each op / algorithm and each size S = min, min·f, ... <= max: a check pass (deterministic integer
// pattern, every element compared with its closed-form result: "#wrong", summed over ranks), then for the
// out-of-place and the in-place variant: warm-up, a barrier, n timed calls (each waited for, as the lab's
// training loop does), time = mean per call, the maximum over ranks. algbw = S / time, busbw = algbw times
// nccl-tests' factor (all_reduce 2(n-1)/n, all_gather, reduce_scatter and all_to_all (n-1)/n, broadcast 1). Sizes
// follow lab/comm's byte convention (the full buffer for all_reduce / broadcast, the gathered size for all_gather /
// reduce_scatter, what one rank sends for all_to_all) and are rounded down to whole elements divisible by the world
// size. The footer: "# Avg bus bandwidth" (mean busbw over every row, out-of-place and in-place, as nccl-tests), a
// point-to-point line (Gloo send/recv between ranks 0 and 1 at 64 MiB, both directions at once — one ring
// step), and all_reduce's busbw at 64 MiB as a percentage of it (target >= 80%) when 64 MiB was measured.
// The overlap line (2 or more ranks in the group): an all_reduce of 4 MiB (backend) alone, square fp32 GEMMs alone
// (as many as last about as long), and both at once — the all_reduce issued, the GEMMs run, then waited for, as DDP
// overlaps a bucket with the backward. hidden = (comm + compute - together) / min(comm, compute), in [-1, 1]: 1 when
// the collective costs the rank nothing while it computes, 0 when running both at once costs what taking turns
// would, below 0 when it costs more (on a CPU whose cores the ranks' compute already holds, Gloo's threads copy and
// reduce on those cores, and the two contend for caches and memory besides). `dtlab calibrate` stores it as the comm
// model's overlap_hidden, which the step model charges overlapped collectives by.
// When the ranks span nodes (dtlab launch --nodes M, or --nodes here): the cluster, the inter-node point-to-point
// rate (ranks 0 <-> first rank of node 1) against the set rate, and all_reduce at 64 MiB against the link bound
// (every node must send 2(M-1)/M of the buffer over its link: time / bound, 1.0 = the physical limit).
// --group (a job across nodes only): `world` (default) runs every collective over all ranks; `node` over each node's
// K ranks, every node at once (the intra-node level: its links are the node's loopback); `cross` over one rank per
// node (the ranks with local rank 0; the others wait), so one stream crosses each node's link (the inter-node level).
// `dtlab calibrate --nodes` fits its intra_node model to `node` and its inter_node model to `cross`. Rows, the
// busbw factor and --model use the group's size; the JSON names the group and its size.
// --device cuda (cuda configuration): the buffers on this rank's GPU and, with --backend auto, NCCL when every local
// rank has a GPU of its own (else Gloo, staged through pinned host memory); the overlap line's GEMMs run on the GPU.
// Exit status 1 when any element was wrong.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace dtlab {

// An optional cost model to print next to each row (`--model FILE`). The driver includes no cost model: the CLI
// wires analysis/cost/comm_model.hpp in through these functions.
struct CommBenchModel {
  std::string source;  // the file, for the header
  // Predicted time of one call in microseconds.
  std::function<double(const std::string& op, const std::string& algorithm, int64_t bytes, int group_size)> time_us;
  // Whether the model predicts the in-place figure of `op` (else the out-of-place one).
  std::function<bool(const std::string& op)> predicts_in_place;
};

struct CommBenchOptions {
  int64_t min_bytes = 1024;
  int64_t max_bytes = int64_t{256} << 20;
  double factor = 4;  // > 1: sizes grow geometrically (rounded down to whole elements)
  int iters = 10;
  int warmup = 3;
  // >= 1. Runs the timed loop this many times and keeps the smallest mean (1 = nccl-tests' single mean). On a
  // shared machine a loop that waited for busy cores is an outlier of the machine, not of the collective.
  int repeats = 1;
  std::vector<std::string> ops;         // subset of all_reduce, all_gather, reduce_scatter, broadcast, all_to_all
  std::vector<std::string> algorithms;  // subset of backend, ring (broadcast has backend only)
  std::string dtype = "float32";        // float32 | bfloat16
  // Where the buffers live: cpu, or cuda (this rank's GPU, cuda:(local rank % GPUs); cuda configuration). The
  // backend: gloo, nccl (CUDA buffers, one GPU per local rank), or auto (nccl when the buffers are on GPUs and every
  // local rank has one of its own, else gloo: over Gloo, CUDA buffers are staged through pinned host memory, as the
  // ranks sharing a GPU train). Timed calls on a GPU end with a device synchronize.
  std::string device = "cpu";
  std::string backend = "auto";
  std::string json_path;               // "" = no JSON
  int ranks = 2;                       // when not already a rank of a job: ranks (per node) to re-launch as
  int nodes = 1;                       // ... on this many nodes of an emulated cluster (dtlab launch --nodes)
  std::string inter_link, intra_link;  // ... with these link rates ("1gbit"; "" = unshaped)
  std::string group = "world";         // world | node | cross (see above)
  bool check = true;                   // the #wrong pass
  double timeout_s = 300;              // rendezvous and each collective
  std::optional<CommBenchModel> model;
  // Set by the CLI: this subcommand's own arguments (to re-launch itself), and where rank 0 of a re-launched
  // job writes its report (-1 = its stdout).
  std::vector<std::string> relaunch_args;
  int report_fd = -1;
};

// Parses "1024", "1K", "64M", "1G" (binary multiples, as nccl-tests). Throws std::invalid_argument naming text.
int64_t parse_byte_size(const std::string& text);

// Expands "all" and validates the names; throws std::invalid_argument naming the bad value and the choices.
std::vector<std::string> resolve_comm_bench_ops(const std::string& op);
std::vector<std::string> resolve_comm_bench_algorithms(const std::string& algorithm);

// Runs the benchmark (re-launching as options.ranks ranks when not in a job). Returns the exit status.
int run_comm_bench(const CommBenchOptions& options);

}  // namespace dtlab
