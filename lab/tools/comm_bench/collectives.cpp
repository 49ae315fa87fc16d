// collectives.cpp: the five collectives comm-bench runs and two dim-wise variants, one small description each (see
// collective.hpp for the placements and the check pattern).
#include "lab/tools/comm_bench/collective.hpp"

#include "lab/comm/hierarchical.hpp"

#include <numeric>
#include <stdexcept>

namespace dtlab::comm_bench {
namespace {

constexpr double kSentinel = 99;
constexpr const char* kWho = "comm-bench";

// Sum over ranks 0..p-1 of the pattern, computed exactly in integers.
at::Tensor pattern_sum(int p, int64_t begin, int64_t n, at::ScalarType type) {
  at::Tensor sum = at::zeros({n}, at::kLong);
  const at::Tensor i = at::arange(begin, begin + n, at::kLong);
  for (int r = 0; r < p; ++r) sum += (i * 131 + r * 17).remainder(13) - 6;
  return sum.to(type);
}

// The layout all_reduce, reduce_scatter and broadcast share: every rank's input is the full pattern; in place the
// result lands in the same buffer.
class FullInputCase : public CollectiveCase {
 public:
  FullInputCase(const CaseComms& comms, const std::string& algorithm, int64_t count, at::ScalarType type, bool in_place,
                int64_t output_count)
      : CollectiveCase(comms, algorithm, count, type, in_place) {
    if (in_place_) {
      buffer_ = at::empty({count_}, options());
      slice_ = buffer_.narrow(0, offset(), chunk_);
      return;
    }
    input_ = at::empty({count_}, options());
    output_ = at::empty({output_count}, options());
  }
  void fill() override {
    if (in_place_) {
      buffer_.copy_(pattern(comm_.rank(), 0, count_, type_));
      return;
    }
    input_.copy_(pattern(comm_.rank(), 0, count_, type_));
    output_.fill_(kSentinel);
  }

 protected:
  at::Tensor input_, output_;  // out-of-place
  at::Tensor buffer_, slice_;  // in-place: the one buffer, and this rank's chunk of it
};

// --- all_reduce: the sum of every rank's buffer, on every rank.
class AllReduceCase final : public FullInputCase {
 public:
  AllReduceCase(const CaseComms& comms, const std::string& algorithm, int64_t count, at::ScalarType type, bool in_place)
      : FullInputCase(comms, algorithm, count, type, in_place, count),
        two_level_(algorithm == "hierarchical" ? comms.two_level : nullptr) {
    if (algorithm == "hierarchical" && two_level_ == nullptr)
      throw std::invalid_argument("comm-bench: all_reduce/hierarchical needs a job across nodes (--nodes 2 or more)");
    if (!in_place_ && algorithm_ == CommAlgorithm::ring && !two_level_) slice_ = at::empty({chunk_}, options());
  }
  void run() override {
    at::Tensor& source = in_place_ ? buffer_ : input_;
    at::Tensor& result = in_place_ ? buffer_ : output_;
    if (two_level_) {
      if (!in_place_) output_.copy_(input_);
      two_level_->all_reduce(result, kWho).wait();
      return;
    }
    if (algorithm_ == CommAlgorithm::ring) {
      comm_.reduce_scatter(slice_, source, CommAlgorithm::ring, kWho).wait();
      comm_.all_gather(result, slice_, CommAlgorithm::ring, kWho).wait();
      return;
    }
    if (!in_place_) output_.copy_(input_);
    comm_.all_reduce(result, kWho).wait();
  }
  int64_t wrong() const override {
    return (in_place_ ? buffer_ : output_).cpu().ne(pattern_sum(comm_.size(), 0, count_, type_)).sum().item<int64_t>();
  }

 private:
  HierarchicalComm* two_level_;  // set for the hierarchical algorithm
};

std::string all_reduce_runs(const std::string& algorithm) {
  if (algorithm == "hierarchical")
    return "lab ring reduce-scatter in the node + Gloo all-reduce of the 1/K chunk across nodes + lab ring all-gather "
           "in the node";
  return algorithm == "ring" ? "lab ring reduce-scatter + lab ring all-gather, composed (no copy)"
                             : "Gloo ring all-reduce; out-of-place = input copy + in-place all-reduce (copy timed)";
}

// --- reduce_scatter: rank r keeps chunk r of the sum.
class ReduceScatterCase final : public FullInputCase {
 public:
  ReduceScatterCase(const CaseComms& comms, const std::string& algorithm, int64_t count, at::ScalarType type,
                    bool in_place)
      : FullInputCase(comms, algorithm, count, type, in_place, count / comms.group.size()) {}
  void run() override {
    comm_.reduce_scatter(in_place_ ? slice_ : output_, in_place_ ? buffer_ : input_, algorithm_, kWho).wait();
  }
  int64_t wrong() const override {
    const at::Tensor expected = pattern_sum(comm_.size(), offset(), chunk_, type_);
    return (in_place_ ? slice_ : output_).cpu().ne(expected).sum().item<int64_t>();
  }
};

std::string reduce_scatter_runs(const std::string& algorithm) {
  return algorithm == "ring" ? "lab ring reduce-scatter over Gloo send/recv (input clone timed)"
                             : "Gloo: all-reduce + chunk copy (~2x the bytes of a ring)";
}

// --- broadcast: rank 0's buffer on every rank.
class BroadcastCase final : public FullInputCase {
 public:
  BroadcastCase(const CaseComms& comms, const std::string& algorithm, int64_t count, at::ScalarType type, bool in_place)
      : FullInputCase(comms, algorithm, count, type, in_place, count) {}
  void run() override {
    if (!in_place_ && comm_.rank() == 0) output_.copy_(input_);
    comm_.broadcast(in_place_ ? buffer_ : output_, 0, kWho).wait();
  }
  int64_t wrong() const override {
    return (in_place_ ? buffer_ : output_).cpu().ne(pattern(0, 0, count_, type_)).sum().item<int64_t>();
  }
};

std::string broadcast_runs(const std::string&) {
  return "Gloo binomial tree from root 0; out-of-place = root's input copy + in-place broadcast (copy timed)";
}

// --- all_gather: every rank's chunk, concatenated in rank order, on every rank.
class AllGatherCase final : public CollectiveCase {
 public:
  AllGatherCase(const CaseComms& comms, const std::string& algorithm, int64_t count, at::ScalarType type, bool in_place)
      : CollectiveCase(comms, algorithm, count, type, in_place) {
    output_ = at::empty({count_}, options());
    input_ = in_place_ ? output_.narrow(0, offset(), chunk_) : at::empty({chunk_}, options());
  }
  void fill() override {
    output_.fill_(kSentinel);
    input_.copy_(pattern(comm_.rank(), offset(), chunk_, type_));
  }
  void run() override { comm_.all_gather(output_, input_, algorithm_, kWho).wait(); }
  int64_t wrong() const override {
    std::vector<at::Tensor> chunks;
    for (int c = 0; c < comm_.size(); ++c) chunks.push_back(pattern(c, c * chunk_, chunk_, type_));
    return output_.cpu().ne(at::cat(chunks)).sum().item<int64_t>();
  }

 private:
  at::Tensor output_, input_;  // in place, the input is this rank's slice of the output
};

std::string all_gather_runs(const std::string& algorithm) {
  return algorithm == "ring" ? "lab ring all-gather over Gloo send/recv" : "Gloo ring all-gather (_allgather_base)";
}

// --- all_to_all: rank r's j-th part goes to rank j, which keeps it as its r-th part (equal parts).
class AllToAllCase final : public CollectiveCase {
 public:
  AllToAllCase(const CaseComms& comms, const std::string& algorithm, int64_t count, at::ScalarType type, bool in_place)
      : CollectiveCase(comms, algorithm, count, type, in_place) {
    input_ = at::empty({count_}, options());
    output_ = in_place_ ? input_ : at::empty({count_}, options());
    if (in_place_) scratch_ = at::empty({count_}, options());
  }
  void fill() override {
    input_.copy_(pattern(comm_.rank(), 0, count_, type_));
    if (!in_place_) output_.fill_(kSentinel);
  }
  void run() override {
    if (!in_place_) return comm_.all_to_all(output_, input_, {}, {}, kWho).wait();
    comm_.all_to_all(scratch_, input_, {}, {}, kWho).wait();
    input_.copy_(scratch_);
  }
  int64_t wrong() const override {
    std::vector<at::Tensor> parts;
    for (int j = 0; j < comm_.size(); ++j) parts.push_back(pattern(j, offset(), chunk_, type_));
    return output_.cpu().ne(at::cat(parts)).sum().item<int64_t>();
  }

 private:
  at::Tensor input_, output_, scratch_;  // in place: output is input, written back from scratch
};

std::string all_to_all_runs(const std::string&) {
  return "Gloo pairwise all-to-all (alltoall_base); in-place = into scratch, then copied back (copy timed)";
}

// --- all_gather_dim1 / reduce_scatter_dim1: the same collectives along dim 1 of an [R, n] matrix (Comm::
// all_gather_along, reduce_scatter_along): rank r's columns [r*c, (r+1)*c). R = 8, or the largest power of two that
// divides a rank's share, so every size of the sweep has whole columns.
class Dim1Case : public CollectiveCase {
 public:  // inherited by the two cases below, whose constructors make<> calls
  Dim1Case(const CaseComms& comms, const std::string& algorithm, int64_t count, at::ScalarType type, bool in_place)
      : CollectiveCase(comms, algorithm, count, type, in_place), rows_(std::gcd(chunk_, int64_t{8})) {}

 protected:
  int64_t rows_;
  at::Tensor input_, output_;  // the output is the call's new tensor (none before the first call)
};

class AllGatherDim1Case final : public Dim1Case {
 public:
  using Dim1Case::Dim1Case;
  void fill() override {
    input_ = pattern(comm_.rank(), offset(), chunk_, type_).to(device_).view({rows_, chunk_ / rows_});
    output_.reset();
  }
  void run() override { output_ = comm_.all_gather_along(input_, 1, algorithm_, kWho); }
  int64_t wrong() const override {
    if (!output_.defined()) return count_;
    std::vector<at::Tensor> columns;  // rank c's [R, n/p] block, side by side
    for (int c = 0; c < comm_.size(); ++c) columns.push_back(pattern(c, c * chunk_, chunk_, type_).view({rows_, -1}));
    return output_.cpu().ne(at::cat(columns, 1)).sum().item<int64_t>();
  }
};

class ReduceScatterDim1Case final : public Dim1Case {
 public:
  using Dim1Case::Dim1Case;
  void fill() override {
    input_ = pattern(comm_.rank(), 0, count_, type_).to(device_).view({rows_, count_ / rows_});
    output_.reset();
  }
  void run() override { output_ = comm_.reduce_scatter_along(input_, 1, algorithm_, kWho); }
  int64_t wrong() const override {
    if (!output_.defined()) return chunk_;
    const int64_t columns = count_ / rows_ / comm_.size();
    const at::Tensor expected =
        pattern_sum(comm_.size(), 0, count_, type_).view({rows_, -1}).narrow(1, comm_.rank() * columns, columns);
    return output_.cpu().ne(expected).sum().item<int64_t>();
  }
};

std::string dim1_runs(const std::string& algorithm) {
  return std::string(algorithm == "ring" ? "lab ring" : "Gloo") +
         " collective of the matrix in rank order, plus the copy to or from [R, n] (timed); no in-place form";
}

// --- send_recv: a ring shift, each rank's buffer to the next rank and the previous rank's into its own, the receive
// and the send posted together with Comm::batch_isend_irecv: what a pipeline stage does each action
// (lab/train/pipeline_step.cpp). Bus bandwidth is the algorithm bandwidth, each byte crossing one link (nccl-tests'
// sendrecv). One rank: no message, the copy only.
class SendRecvCase final : public CollectiveCase {
 public:
  SendRecvCase(const CaseComms& comms, const std::string& algorithm, int64_t count, at::ScalarType type, bool in_place)
      : CollectiveCase(comms, algorithm, count, type, in_place) {
    input_ = at::empty({count_}, options());
    output_ = at::empty({count_}, options());
  }
  void fill() override {
    input_.copy_(pattern(comm_.rank(), 0, count_, type_));
    output_.fill_(kSentinel);
  }
  void run() override {
    const int p = comm_.size();
    if (p == 1) {
      output_.copy_(input_);
    } else {
      std::vector<Comm::P2pOp> ops;
      ops.push_back(
          {.kind = Comm::P2pOp::Kind::recv, .tensor = output_, .peer = (comm_.rank() + p - 1) % p, .tag = kWho});
      ops.push_back({.kind = Comm::P2pOp::Kind::send, .tensor = input_, .peer = (comm_.rank() + 1) % p, .tag = kWho});
      for (CommHandle& handle : comm_.batch_isend_irecv(std::move(ops))) handle.wait();
    }
    if (in_place_) input_.copy_(output_);  // the received buffer back over the one sent (timed)
  }
  int64_t wrong() const override {
    const int previous = (comm_.rank() + comm_.size() - 1) % comm_.size();
    return output_.cpu().ne(pattern(previous, 0, count_, type_)).sum().item<int64_t>();
  }

 private:
  at::Tensor input_, output_;
};

std::string send_recv_runs(const std::string&) {
  return "batched isend/irecv to the next rank, from the previous (Comm::batch_isend_irecv); in-place = the received "
         "buffer copied back over the sent one (copy timed)";
}

template <class Case>
std::unique_ptr<CollectiveCase> make(const CaseComms& comms, const std::string& algorithm, int64_t count,
                                     at::ScalarType type, bool in_place) {
  return std::make_unique<Case>(comms, algorithm, count, type, in_place);
}

}  // namespace

CollectiveCase::CollectiveCase(const CaseComms& comms, const std::string& algorithm, int64_t count, at::ScalarType type,
                               bool in_place)
    : comm_(comms.group),
      algorithm_(algorithm == "ring" ? CommAlgorithm::ring : CommAlgorithm::backend),  // hierarchical: its own
      count_(count),
      chunk_(count / comms.group.size()),
      type_(type),
      device_(comms.device),
      in_place_(in_place) {}

at::Tensor pattern(int rank, int64_t begin, int64_t n, at::ScalarType type) {
  const at::Tensor i = at::arange(begin, begin + n, at::kLong);
  return ((i * 131 + rank * 17).remainder(13) - 6).to(type);
}

const std::vector<CollectiveSpec>& collectives() {
  static const std::vector<CollectiveSpec> kCollectives = {
      {"all_reduce", {"backend", "ring", "hierarchical"}, all_reduce_runs, make<AllReduceCase>},
      {"all_gather", {"backend", "ring"}, all_gather_runs, make<AllGatherCase>},
      {"reduce_scatter", {"backend", "ring"}, reduce_scatter_runs, make<ReduceScatterCase>},
      {"broadcast", {"backend"}, broadcast_runs, make<BroadcastCase>},
      {"all_to_all", {"backend"}, all_to_all_runs, make<AllToAllCase>},
      {"all_gather_dim1", {"backend", "ring"}, dim1_runs, make<AllGatherDim1Case>, false},
      {"reduce_scatter_dim1", {"backend", "ring"}, dim1_runs, make<ReduceScatterDim1Case>, false},
      {"send_recv", {"backend"}, send_recv_runs, make<SendRecvCase>, false},
  };
  return kCollectives;
}

const CollectiveSpec& collective(const std::string& op) {
  for (const CollectiveSpec& spec : collectives())
    if (spec.op == op) return spec;
  throw std::invalid_argument("comm-bench: --op " + op +
                              " is not one of all_reduce | all_gather | reduce_scatter | broadcast | all_to_all | all"
                              " | all_gather_dim1 | reduce_scatter_dim1 | send_recv");
}

}  // namespace dtlab::comm_bench
