// hierarchical.hpp: topology-aware collectives for a job of M nodes x K ranks per node.
//
// A flat ring over all M*K ranks crosses each node's link where the ring leaves the node, and the rank at that edge
// sends 2(n-1)/n of the whole buffer over it: 1.5x the buffer per node at 2 nodes x 2, against a link bound of 1x.
// The hierarchical all-reduce sends only what must cross:
//
//   1. reduce-scatter inside the node (lab ring): local rank l holds the node's sum of chunk l (1/K of the buffer);
//   2. all-reduce of that chunk across nodes, among the ranks with the same local rank (backend, async): each
//      node's K ranks together send 2(M-1)/M of the buffer over the node's link, the link bound;
//   3. all-gather inside the node (lab ring): every rank has the whole sum.
//
// Each level is its own Comm (groups "node.<n>" at level "intra", "cross.<l>" at level "inter"), so each
// level's traffic is its own collective record. Chunks may be uneven (K need not divide the buffer: 2 x 3 works).
// Results equal the flat all-reduce's within fp32 rounding, not bit for bit: the sum is added up in another order
// (inside each node first, then across nodes).
//
// Buffers over kPieceBytes go in pieces, pipelined: piece i+1's reduce-scatter runs while piece i crosses the
// nodes, and piece i's all-gather while later pieces still cross. all_reduce returns once every piece's step 1 is
// done and its step 2 issued; wait() waits for each piece's step 2 and runs its step 3, so the slow inter-node part
// overlaps whatever the caller does in between (DDP: the rest of backward).
//
// The hierarchical reduce-scatter and all-gather (the sharded strategies' collectives) split a buffer of M*K equal
// chunks *local-rank-major*: local rank l of node m holds chunk l*M + m (chunk_index()), not chunk m*K + l as the flat
// ones do. Then neither level needs a copy to reorder the buffer:
//
//   reduce-scatter: inside the node over K blocks of M chunks (local rank l gets the node's sum of block l), then
//                   across nodes over those M chunks (node m gets chunk m of it: chunk l*M + m, the world's sum);
//   all-gather:     across nodes (block l from its M chunks), then inside the node (the buffer from its K blocks).
//
// Only 1/K of the buffer crosses the node's link per rank, (M-1)/M of it each way: the link bound. Each call runs its
// two levels on a thread of its own (one for reduce-scatters, one for all-gathers; each in issue order, so every
// rank issues the same collectives in the same order on each group) and returns at once; wait() waits for both
// levels. Reduce-scatters use the lab's ring at both levels, so they never touch the backends' collective sequence,
// which the all-gathers' thread alone drives. All-gathers are bit-exact; a reduce-scatter's sum is added up in another
// order than the flat ring's (inside each node first), so it equals the flat one within fp32 rounding.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include <ATen/ATen.h>

#include "lab/comm/comm.hpp"
#include "lab/comm/serial_thread.hpp"

namespace dtlab {

class World;

class HierarchicalComm {
 public:
  // Splits `world` into its nodes (consecutive blocks of ranks_per_node ranks) and the cross-node groups, named
  // `prefix` + "node.<n>" and `prefix` + "cross.<l>" (a world's split names are unique: a second instance in one
  // world needs its own prefix). Collective on every rank of the world. ranks_per_node must divide the world size
  // and be >= 1.
  HierarchicalComm(World& world, int ranks_per_node, const std::string& prefix = "");

  int nodes() const { return nodes_; }
  int ranks_per_node() const { return ranks_per_node_; }
  Comm& intra() { return *intra_; }
  Comm& inter() { return *inter_; }

  static constexpr int64_t kPieceBytes = int64_t{16} << 20;  // the pipeline's piece (16 MiB)

  // Sum in place across every rank of the world. `tensor` must be 1-D and contiguous.
  CommHandle all_reduce(at::Tensor& tensor, const std::string& tag = "");

  // The chunk this rank holds of a buffer that reduce_scatter / all_gather split into M*K chunks: l*M + m for local
  // rank l of node m (see above).
  int chunk_index() const;
  // output (one chunk) <- the world's sum of input's chunk chunk_index(). input: 1-D, contiguous, M*K times output's
  // numel, same dtype. Asynchronous: both tensors stay untouched until wait() returns.
  CommHandle reduce_scatter(at::Tensor& output, at::Tensor& input, const std::string& tag = "");
  // output (M*K chunks, chunk i from the rank whose chunk_index() is i) <- every rank's input. Asynchronous.
  CommHandle all_gather(at::Tensor& output, at::Tensor& input, const std::string& tag = "");

 private:
  // Runs `levels` on `thread` (started at its first call); the handle waits for it and rethrows its failure.
  CommHandle run_levels(std::unique_ptr<SerialThread>& thread, const char* op, const std::string& tag,
                        std::function<void()> levels);
  void check_chunked(const char* op, const at::Tensor& whole, const at::Tensor& chunk) const;

  int nodes_ = 1, ranks_per_node_ = 1;
  std::shared_ptr<Comm> intra_, inter_;
  // Last: joined first, while the groups they use still exist.
  std::unique_ptr<SerialThread> scatter_thread_, gather_thread_;
};

}  // namespace dtlab
