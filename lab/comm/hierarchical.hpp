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
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include <ATen/ATen.h>

#include "lab/comm/comm.hpp"

namespace dtlab {

class World;

class HierarchicalComm {
 public:
  // Splits `world` into its nodes (consecutive blocks of ranks_per_node ranks) and the cross-node groups.
  // Collective on every rank of the world. ranks_per_node must divide the world size and be >= 1.
  HierarchicalComm(World& world, int ranks_per_node);

  int nodes() const { return nodes_; }
  int ranks_per_node() const { return ranks_per_node_; }
  Comm& intra() { return *intra_; }
  Comm& inter() { return *inter_; }

  static constexpr int64_t kPieceBytes = int64_t{16} << 20;  // the pipeline's piece (16 MiB)

  // Sum in place across every rank of the world. `tensor` must be 1-D and contiguous.
  CommHandle all_reduce(at::Tensor& tensor, const std::string& tag = "");

 private:
  int nodes_ = 1, ranks_per_node_ = 1;
  std::shared_ptr<Comm> intra_, inter_;
};

}  // namespace dtlab
