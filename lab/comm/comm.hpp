// comm.hpp: the only door to c10d. Every collective of dtlab goes through a Comm, which records it.
//
//   Comm& c = world.comm();
//   CommHandle h = c.all_reduce(bucket);   // async: returns at once
//   ... overlap compute ...
//   h.wait();                               // rethrows the backend's error, if any
//
// Each call appends a CollectiveRecord: op, algorithm, dtype, bytes (of one rank's input, the
// nccl-tests convention: the full buffer for all_reduce/broadcast, the gathered size for
// all_gather/reduce_scatter), group size and name, and the start and end times of the work. The end
// time is stamped when the backend completes the work (a future callback), not when it was enqueued
// nor when someone waited for it; for work that has no completion callback (Gloo's emulated
// reduce_scatter) it is stamped when wait() returns. Times are microseconds on the lab clock
// (lab/instrument/clock.hpp; comm_clock_us()). Every blocking wait — CommHandle::wait() and
// exchange() — is a comm_wait phase span of the step profiler, named in Megatron's
// vocabulary (lab/instrument/step_profiler.hpp): that is how exposed communication is measured.
//
// Algorithms: `backend` uses the backend's own collective. For Gloo, `ring` runs the lab's ring
// reduce-scatter / all-gather over send/recv: Gloo's reduce_scatter_tensor is an all-reduce plus a
// chunk copy (twice the bytes of a ring). Ring calls are asynchronous like the backend's: they run on the Comm's
// own ring thread, one at a time in issue order (so every rank runs them in the same order, with the same p2p
// tags), and the caller gets a handle at once. The tensors must stay untouched until wait() returns. A ring call
// that failed fails every later one on the same Comm at once, with the first failure's message.
// Devices: a backend works on tensors of one device type — Gloo on host tensors, NCCL on CUDA tensors (the
// communicator's wire device, set by whoever makes it). A tensor of another device is staged: copied to the wire
// device (pinned host memory for Gloo), the collective run on the copy, the result copied back inside wait(). That is
// how ranks sharing one GPU communicate over Gloo, and how the trainer's host-side sums (loss, norms, flags) travel
// over NCCL. The staging copies are recorded nowhere but in the comm_wait span and the `comm` memory category.
// Desync check (instrument.check_collectives; lab/comm/desync_check.hpp): once check_collectives() gave a Comm its
// group's check, every collective first agrees across the group on its call number, op, dtype and shape, and a
// mismatch throws CollectiveDesyncError on every rank before the collective is issued. Without one, a call costs one
// branch more (on that pointer and on DTLAB_INJECT_DESYNC being set).
// Chunks: a 1-D buffer of n elements splits over p ranks as evenly as possible, the first n % p chunks
// one element longer (chunk_bounds); for the backend algorithm n must divide by p.
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <ATen/ATen.h>
#include <c10/util/intrusive_ptr.h>

#include "lab/instrument/collective_record.hpp"  // CollectiveRecord, busbw_factor

namespace c10d {
class Backend;
class Work;
}  // namespace c10d

namespace dtlab {

class SerialThread;  // lab/comm/serial_thread.hpp: the ring thread
class DesyncCheck;   // lab/comm/desync_check.hpp
enum class CollectiveStream : int;
enum class CollectiveOp : int64_t;

enum class CommAlgorithm { backend, ring };
const char* to_string(CommAlgorithm a);

double comm_clock_us();  // the clock of CollectiveRecord's start_us / end_us (lab/instrument/clock.hpp)

class CommHandle {
 public:
  CommHandle() = default;
  // Blocks until done; rethrows the backend's failure with the op and group named.
  void wait();
  bool valid() const { return static_cast<bool>(wait_fn_); }
  // A handle whose wait() runs `finish` (composed collectives: wait for one part, then run the next).
  static CommHandle deferred(std::function<void()> finish);

 private:
  friend class Comm;
  std::function<void()> wait_fn_;
};

class Comm {
 public:
  // `rank` is this process's rank in the group; `global_rank` its rank in the job (fault injection names that).
  Comm(c10::intrusive_ptr<c10d::Backend> backend, std::string group_name, int rank, int size, int global_rank = -1);
  ~Comm();

  int rank() const { return rank_; }
  int size() const { return size_; }
  const std::string& group_name() const { return group_name_; }
  // The links this group's traffic crosses, written into each record ("world" unless set).
  void set_level(std::string level) { level_ = std::move(level); }
  const std::string& level() const { return level_; }
  // The device the backend's tensors live on (see Devices above): the CPU unless set (NCCL: the rank's GPU).
  void set_wire_device(at::Device device) { wire_device_ = device; }
  at::Device wire_device() const { return wire_device_; }

  CommHandle all_reduce(at::Tensor& tensor, const std::string& tag = "");  // sum, in place
  CommHandle broadcast(at::Tensor& tensor, int root, const std::string& tag = "");
  // output (p * chunk) <- every rank's input (chunk). Ring: uneven chunks allowed (see chunk_bounds).
  CommHandle all_gather(at::Tensor& output, at::Tensor& input, CommAlgorithm algorithm, const std::string& tag = "");
  // output (this rank's chunk) <- sum over ranks of input's chunk. Input and output are 1-D contiguous.
  CommHandle reduce_scatter(at::Tensor& output, at::Tensor& input, CommAlgorithm algorithm,
                            const std::string& tag = "");
  // Along a tensor dimension, blocking (the layout copy needs the data): every rank's `input` concatenated along
  // `dim` in group-rank order (all_gather_along: rank r's part at [r*n, (r+1)*n) of dim), and this rank's part of the
  // sum over ranks when `input`'s `dim` is cut into size() equal parts (reduce_scatter_along; throws
  // std::invalid_argument naming the dim and its size when it does not divide). Recorded as the flat all_gather /
  // reduce_scatter they run, with the same bytes: what differs is the copy into or out of rank order (sequence
  // parallelism gathers the sequence, dim 1 of [batch, seq, hidden]).
  at::Tensor all_gather_along(const at::Tensor& input, int64_t dim, CommAlgorithm algorithm, const std::string& tag);
  at::Tensor reduce_scatter_along(const at::Tensor& input, int64_t dim, CommAlgorithm algorithm,
                                  const std::string& tag);
  // output <- rows (dim 0) from every rank: input's rows are cut in group-rank order into input_splits[j] rows for
  // rank j, and output's into output_splits[j] rows from rank j (the sizes every rank sends this one; both empty:
  // equal parts). Every rank's rows have the same shape after dim 0 and the same dtype. Recorded as op "all_to_all"
  // with the input's bytes (nccl-tests' convention: what one rank sends, its own part included). Expert parallelism's
  // token exchange (tokens to the ranks that hold their experts, and back).
  CommHandle all_to_all(at::Tensor& output, at::Tensor& input, const std::vector<int64_t>& output_splits,
                        const std::vector<int64_t>& input_splits, const std::string& tag = "");
  void barrier();
  // Point-to-point: sends send_buf to rank `to` while receiving recv_buf from rank `from`, both posted at once
  // (one ring step); blocks until both are done. Recorded as op "send_recv". Uses p2p tag 0, which the ring never
  // uses; successive exchanges between a pair match in order. (comm-bench's point-to-point line.)
  void exchange(at::Tensor& send_buf, int to, at::Tensor& recv_buf, int from, const std::string& tag = "");

  // Point-to-point, asynchronous (pipeline stages): send `tensor` to group rank `to`, or receive into it from group
  // rank `from`, matched with the peer's call by `p2p_tag`. Tags from kPipelineP2pTagBase up are the caller's (the
  // ring's and exchange()'s lie below). Recorded as op "send" / "recv" with the tensor's bytes; the end is stamped
  // when wait() returns, and the tensor must stay untouched until then. Not part of the desync check.
  static constexpr int kPipelineP2pTagBase = 1 << 30;
  CommHandle send(at::Tensor& tensor, int to, int p2p_tag, const std::string& tag = "");
  CommHandle recv(at::Tensor& tensor, int from, int p2p_tag, const std::string& tag = "");
  // Several sends and receives posted together, one handle per op in order (torch's batch_isend_irecv). A backend
  // that coalesces (NCCL) runs them as one group, so two ranks that send to each other at once cannot deadlock and
  // each handle then waits for the whole group; Gloo posts them in order and each completes on its own. Each op is
  // recorded as its own "send" / "recv".
  struct P2pOp {
    enum class Kind { send, recv } kind;
    at::Tensor tensor;  // send: what goes; recv: where it lands (untouched until the handle's wait)
    int peer = -1;      // group rank
    int p2p_tag = kPipelineP2pTagBase;
    std::string tag;
  };
  std::vector<CommHandle> batch_isend_irecv(std::vector<P2pOp> ops);
  // Whether batch_isend_irecv runs a batch as one group (NCCL): its ops then complete together, in stream order.
  bool coalesces_p2p() const;
  // Copies of the records so far (thread-safe).
  std::vector<CollectiveRecord> records() const;
  // Copies of records [first, record_count()) — the collectives issued since an earlier record_count().
  std::vector<CollectiveRecord> records_since(size_t first) const;
  size_t record_count() const;

  // Element ranges [begin, end) of each rank's chunk when n elements split over p ranks.
  static std::vector<std::pair<int64_t, int64_t>> chunk_bounds(int64_t n, int p);

  // Called before each collective is issued (fault injection / delay tests); may be empty.
  std::function<void(const std::string& op)> before_collective;
  // Called when a collective fails or times out: what the other ranks were doing (DistWorld's progress board).
  // Its text is appended to the error. May be empty.
  std::function<std::string()> explain_failure;
  // "#57 all_reduce 'ddp.bucket.0' on world", the last collective issued (thread-safe); "" before the first.
  std::string last_issued() const;

  // From now on every collective first agrees with the group through `check` (see Desync check above). Set before
  // the first collective, on every rank of the group alike.
  void check_collectives(std::shared_ptr<DesyncCheck> check) { desync_check_ = std::move(check); }
  bool checks_collectives() const { return desync_check_ != nullptr; }

 private:
  struct LiveRecord {  // a record whose end time a backend thread stamps
    CollectiveRecord record;
    std::atomic<double> end_us{0};
  };
  std::shared_ptr<LiveRecord> start_record(const std::string& op, const std::string& algorithm, const at::Tensor& t,
                                           int64_t bytes, const std::string& tag);
  CommHandle track(const c10::intrusive_ptr<c10d::Work>& work, std::shared_ptr<LiveRecord> record,
                   bool has_completion_callback, std::function<void()> after_wait = {});
  // Queues `body` on the ring thread (started at the first call); its handle waits for it and rethrows a failure
  // like a failed wait.
  CommHandle run_ring(std::shared_ptr<LiveRecord> record, std::function<void()> body);
  // Runs `body` in the caller's thread (exchange); a failure is rethrown like a failed wait.
  void run_blocking(const std::shared_ptr<LiveRecord>& record, const std::function<void()>& body);
  // Before a collective is issued (see Desync check): numbers the call on its stream, applies DTLAB_INJECT_DESYNC
  // (false: this rank skips the call; a shape change swaps `input` and `output` for scratch longer by their
  // `*_per_rank` elements) and agrees with the group on the call's signature. `output` null: in place; `root` -1:
  // none; `input` null: no tensor (barrier).
  // `rows`: the signature holds input's shape after dim 0 and no output count, and a shape injection is not applied
  // (all_to_all: the ranks' row counts differ by design).
  bool agree_on_call(CollectiveStream stream, CollectiveOp op, at::Tensor* input, int64_t input_per_rank,
                     at::Tensor* output, int64_t output_per_rank, int64_t root, const std::string& tag,
                     bool rows = false);
  // The collectives themselves, once agreed on.
  CommHandle issue_all_reduce(at::Tensor& tensor, const std::string& tag);
  CommHandle issue_broadcast(at::Tensor& tensor, int root, const std::string& tag);
  CommHandle issue_all_gather(at::Tensor& output, at::Tensor& input, CommAlgorithm algorithm, const std::string& tag);
  CommHandle issue_reduce_scatter(at::Tensor& output, at::Tensor& input, CommAlgorithm algorithm,
                                  const std::string& tag);
  CommHandle issue_all_to_all(at::Tensor& output, at::Tensor& input, const std::vector<int64_t>& output_splits,
                              const std::vector<int64_t>& input_splits, const std::string& tag);
  void issue_barrier();
  [[noreturn]] void rethrow_failure(const CollectiveRecord& record, const std::exception& e) const;
  // The ring algorithms (ring.cpp), on the ring thread; sizes checked by the caller (check_ring_chunk).
  void ring_reduce_scatter(at::Tensor& output, const at::Tensor& input);
  void ring_all_gather(at::Tensor& output, const at::Tensor& input);
  void check_ring_chunk(const char* op, const char* which, int64_t total, int64_t chunk) const;
  void send_recv(at::Tensor& send_buf, int to, at::Tensor& recv_buf, int from, int tag);
  // True when `t` lives on another device type than the backend's (it is then staged; see Devices above).
  bool staged(const at::Tensor& t) const { return t.defined() && t.device().type() != wire_device_.type(); }
  // A copy of `t` on the wire device: pinned host memory for a host backend.
  at::Tensor wire_copy(const at::Tensor& t) const;

  c10::intrusive_ptr<c10d::Backend> backend_;
  std::string group_name_;
  std::string level_ = "world";
  at::Device wire_device_{at::kCPU};
  int rank_, size_, global_rank_;
  mutable std::mutex mutex_;
  std::deque<std::shared_ptr<LiveRecord>> records_;
  int64_t next_seq_ = 0;
  std::shared_ptr<DesyncCheck> desync_check_;   // null unless checking collectives
  std::atomic<int64_t> backend_calls_made_{0};  // backend collectives asked for (DTLAB_INJECT_DESYNC counts these)
  std::atomic<int64_t> calls_issued_[2] = {};   // per CollectiveStream: the calls' numbers in the desync check
  int next_p2p_tag_ = 1;                        // the ring thread's
  std::string ring_failure_;  // the ring thread's: the first ring call that failed and why ("" while none has)
  std::unique_ptr<SerialThread> ring_thread_;  // last: joined first, while everything it uses still exists
};

}  // namespace dtlab
