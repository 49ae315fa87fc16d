// collective.hpp: comm-bench's collectives, one small description each (as nccl-tests has one file per collective):
// which algorithms it has, what runs under each name, and a case that owns one size's buffers in one placement,
// fills them with the check pattern, runs one call and counts the wrong elements. The driver (lab/tools/comm_bench.cpp)
// owns everything else: the sweep, timing, ranks, printing.
//
// Out-of-place vs in-place, given what c10d and lab/comm offer (nccl-tests' meaning: out-of-place writes the result
// into a buffer other than the input; in-place reuses the input's memory):
//   all_reduce/backend      c10d's all-reduce is in place only. in-place = that call; out-of-place = the input
//                           copied into a separate output buffer, then all-reduced there; the copy is timed.
//   all_reduce/ring         composed from the lab's ring reduce-scatter and ring all-gather (lab/comm has no ring
//                           all-reduce call). out-of-place: input -> a chunk buffer -> a separate output;
//                           in-place: the chunk is this rank's slice of the buffer itself.
//   all_reduce/hierarchical on a cluster of M nodes x K ranks (lab/comm/hierarchical.hpp): ring reduce-scatter
//                           inside the node, backend all-reduce of the 1/K chunk across nodes, ring all-gather
//                           inside the node. out-of-place: the input copied into the output first (timed).
//   all_gather/*            out-of-place: a separate input chunk; in-place: the input is this rank's slice of the
//                           output (nccl-tests' layout). The lab's ring copies the input into its slice first,
//                           which in place is a copy onto itself (timed, cheap).
//   reduce_scatter/*        out-of-place: a separate output chunk; in-place: the output is this rank's slice of the
//                           input. Gloo's backend runs an all-reduce and copies the chunk out; the lab's ring clones
//                           the input before reducing (both timed: they are what the lab runs).
//   broadcast/backend       c10d's broadcast is in place only. in-place = that call (root 0); out-of-place = the
//                           root copies its input into the output buffer first (timed), then broadcasts.
//   all_to_all/backend      c10d's all-to-all is out of place only. out-of-place = that call (equal parts); in-place =
//                           into a scratch buffer, then copied back over the input (timed).
//   all_gather_dim1/*,      Comm::all_gather_along / reduce_scatter_along dim 1 of an [8, n] matrix (8 rows, or
//   reduce_scatter_dim1/*   the largest power of two that divides a rank's share): the flat collective plus the copy
//                           into or out of rank order that sequence parallelism pays. They return a new tensor, so
//                           both placements run the same call. Run only when named (--op): `--op all` is the five
//                           flat collectives the cost models fit.
//   send_recv/backend       Comm::batch_isend_irecv: a receive from the previous rank and a send to the next, posted
//                           together (the pipeline's pattern); in-place = the received buffer copied back over the
//                           sent one (timed). Run only when named.
// Check pattern: element i of rank r is ((131 i + 17 r) mod 13) - 6, small integers whose sums are exact in float32
// and bfloat16; outputs start as 99 (no sum can be 99 for fewer than 17 ranks), so an element never written is
// counted wrong. Patterns are made on the host and copied to the case's device; results are compared on the host.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <ATen/ATen.h>

#include "lab/comm/comm.hpp"

namespace dtlab {
class HierarchicalComm;
}

namespace dtlab::comm_bench {

// The groups a case may run on: `group` (the whole job, or with --group this rank's node or cross-node group), and
// the job's nodes and cross-node groups when it spans several nodes (all_reduce/hierarchical); and the device its
// buffers live on (--device: the host, or this rank's GPU).
struct CaseComms {
  Comm& group;
  HierarchicalComm* two_level = nullptr;  // null on one node
  at::Device device{at::kCPU};
};

// One collective at one size in one placement.
class CollectiveCase {
 public:
  virtual ~CollectiveCase() = default;
  virtual void fill() = 0;            // the check pattern into the inputs, the sentinel where only results go
  virtual void run() = 0;             // one call of the collective, waited for
  virtual int64_t wrong() const = 0;  // elements of this rank's result that differ from the closed form

 protected:
  CollectiveCase(const CaseComms& comms, const std::string& algorithm, int64_t count, at::ScalarType type,
                 bool in_place);
  at::TensorOptions options() const { return at::TensorOptions().dtype(type_).device(device_); }
  int64_t offset() const { return comm_.rank() * chunk_; }  // this rank's chunk in the full buffer

  Comm& comm_;
  CommAlgorithm algorithm_;
  int64_t count_, chunk_;  // elements: the full buffer, and one rank's share
  at::ScalarType type_;
  at::Device device_;
  bool in_place_;
};

struct CollectiveSpec {
  std::string op;  // all_reduce | all_gather | reduce_scatter | broadcast | all_to_all | all_gather_dim1 | ...
  std::vector<std::string> algorithms;  // backend, ring where the lab has one, hierarchical (all_reduce, clusters)
  // What runs under `algorithm`, one line for the table's series header.
  std::string (*what_runs)(const std::string& algorithm);
  std::unique_ptr<CollectiveCase> (*make_case)(const CaseComms&, const std::string& algorithm, int64_t count,
                                               at::ScalarType, bool in_place);
  bool in_all = true;  // run by `--op all` (the dim-wise variants run only when named)
};

// Every collective comm-bench knows, in the order it runs them.
const std::vector<CollectiveSpec>& collectives();
// The one named `op`; std::invalid_argument naming it and the choices otherwise.
const CollectiveSpec& collective(const std::string& op);

// Check pattern of `rank` for global element indices [begin, begin + n).
at::Tensor pattern(int rank, int64_t begin, int64_t n, at::ScalarType type);

}  // namespace dtlab::comm_bench
