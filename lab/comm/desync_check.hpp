// desync_check.hpp: collective desync detection (instrument.check_collectives=true; RELIABILITY C16).
//
// Before a checked collective is issued, every rank of its group publishes the call's signature — its call number on
// the group, the op, the dtype, the shape (and the output's element count, the reduce op, the broadcast root, the
// caller's tag) — and reads every other rank's. Every rank compares the same full set, so when one differs every
// rank throws the same CollectiveDesyncError, before the collective that would hang or mix up data is issued:
//
//   collective desync on group 'world' (2 ranks) at call #5: rank 0 all_reduce sum float32[1024] 'ddp.bucket.0'
//   vs rank 1 all_reduce sum float64[1] 'metric'
//
// A rank that skipped a collective shows its next one at that call number; a rank that never reaches the call is
// named when the others have waited the collective timeout for it. This is TORCH_DISTRIBUTED_DEBUG=DETAIL's check
// (PyTorch's ProcessGroupWrapper all-gathers a fingerprint of each collective over a helper Gloo group before
// running it); here the signatures travel through the job's rendezvous store under a key per group, stream, call
// and rank. The store is not one of the group's backends, so a check never queues behind the collectives already in
// flight (overlap stays), never takes a place in a backend's collective order, works alike over Gloo and NCCL, and
// can say which rank did not arrive.
//
// Streams: a Comm's backend collectives and its ring collectives (which run on the Comm's ring thread over p2p) are
// issued in order per stream, each possibly from its own thread (lab/comm/hierarchical.hpp), so each stream has its
// own call numbers; messages name ring calls "ring call #N". Point-to-point exchanges are not checked.
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include <c10/util/intrusive_ptr.h>

namespace c10d {
class Store;
}  // namespace c10d

namespace dtlab {

struct CollectiveDesyncError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

enum class CollectiveStream : int { backend = 0, ring = 1 };
enum class CollectiveOp : int64_t {
  all_reduce = 1,
  broadcast = 2,
  all_gather = 3,
  reduce_scatter = 4,
  barrier = 5,
  all_to_all = 6,  // its signature holds the row shape (dims after the first): ranks may send different row counts
};

// One call as every rank must agree on it. Fixed-size int64 fields plus the caller's tag.
struct CollectiveSignature {
  static constexpr int kMaxDims = 8;  // more dims fold into the last one (numel still compares the whole)
  int64_t seq = 0;                    // the call's number on its group and stream, from 0
  int64_t stream = 0;                 // CollectiveStream
  int64_t op = 0;                     // CollectiveOp
  int64_t dtype = -1;                 // c10::ScalarType, -1 = no tensor
  int64_t reduce_op = 0;              // 1 = sum for reducing ops (the only one Comm has), 0 = none
  int64_t root = -1;                  // broadcast's root, -1 = none
  int64_t ndim = 0;
  std::array<int64_t, kMaxDims> dims{};
  int64_t numel = 0;
  int64_t out_numel = -1;  // all_gather / reduce_scatter: the output's elements; -1 = in place
  std::string tag;

  bool operator==(const CollectiveSignature& o) const;
  bool operator!=(const CollectiveSignature& o) const { return !(*this == o); }
};

// The signature of a call on a tensor of `sizes` (empty sizes and dtype -1: a barrier).
CollectiveSignature make_signature(int64_t seq, CollectiveStream stream, CollectiveOp op, int64_t dtype,
                                   const std::vector<int64_t>& sizes, int64_t out_numel, int64_t root,
                                   const std::string& tag);

// "all_reduce sum float32[1024] 'ddp.bucket.0'", "all_gather float32[512] -> 1024 'x'", "broadcast root 0 ...".
std::string describe(const CollectiveSignature& s);
// "call #5" or "ring call #5".
std::string call_name(int64_t seq, CollectiveStream stream);

// Bytes for the store, and back (throws CollectiveDesyncError on bytes that are not a signature).
std::vector<uint8_t> encode(const CollectiveSignature& s);
CollectiveSignature decode(const std::vector<uint8_t>& bytes);

// The error every rank raises when `by_rank` (index = rank in the group) does not agree, or nullopt when it does.
// The message names the group, its size, the call, and each distinct signature with the ranks that hold it (the most
// common first; ties go to the lowest rank).
std::optional<std::string> find_desync(const std::string& group, const std::vector<CollectiveSignature>& by_rank);

// One group's check through a store every rank of the group reaches (the rendezvous store under a prefix of the
// group's). Thread-safe per stream: each stream has its own connection (a clone of `store`).
class DesyncCheck {
 public:
  DesyncCheck(c10::intrusive_ptr<c10d::Store> store, std::string group, int rank, int size,
              std::chrono::milliseconds timeout);
  ~DesyncCheck();
  // Publishes `mine`, waits for every rank's signature of the same call (up to the timeout), compares. Throws
  // CollectiveDesyncError when they differ or a rank did not arrive.
  void agree(const CollectiveSignature& mine);

 private:
  std::string key(int64_t stream, int64_t seq, int rank) const;
  c10::intrusive_ptr<c10d::Store>& store_for(int64_t stream);

  std::string group_;
  int rank_, size_;
  std::chrono::milliseconds timeout_;
  c10::intrusive_ptr<c10d::Store> base_;
  std::array<c10::intrusive_ptr<c10d::Store>, 2> streams_;  // one connection per stream, cloned at first use
};

}  // namespace dtlab
