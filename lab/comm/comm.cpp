// comm.cpp: recorded collectives over a c10d::Backend (see comm.hpp).
#include "lab/comm/comm.hpp"

#include "lab/comm/desync_check.hpp"
#include "lab/comm/serial_thread.hpp"
#include "lab/instrument/clock.hpp"
#include "lab/instrument/fault_injection.hpp"
#include "lab/instrument/step_profiler.hpp"
#include "lab/memory.hpp"

#include <algorithm>
#include <chrono>
#include <exception>
#include <future>
#include <sstream>
#include <stdexcept>
#include <thread>

#include <ATen/core/ivalue.h>
#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <torch/csrc/distributed/c10d/Work.hpp>

namespace dtlab {

const char* to_string(CommAlgorithm a) { return a == CommAlgorithm::ring ? "ring" : "backend"; }

double comm_clock_us() { return lab_clock_us(); }

void CommHandle::wait() {
  if (!wait_fn_) return;
  auto fn = std::move(wait_fn_);
  wait_fn_ = nullptr;
  fn();
}

CommHandle CommHandle::deferred(std::function<void()> finish) {
  CommHandle handle;
  handle.wait_fn_ = std::move(finish);
  return handle;
}

Comm::Comm(c10::intrusive_ptr<c10d::Backend> backend, std::string group_name, int rank, int size, int global_rank)
    : backend_(std::move(backend)),
      group_name_(std::move(group_name)),
      rank_(rank),
      size_(size),
      global_rank_(global_rank < 0 ? rank : global_rank) {
  comm_clock_us();  // fix the epoch
}

Comm::~Comm() = default;

std::vector<std::pair<int64_t, int64_t>> Comm::chunk_bounds(int64_t n, int p) {
  std::vector<std::pair<int64_t, int64_t>> out;
  const int64_t base = n / p, extra = n % p;
  int64_t begin = 0;
  for (int r = 0; r < p; ++r) {
    const int64_t len = base + (r < extra ? 1 : 0);
    out.emplace_back(begin, begin + len);
    begin += len;
  }
  return out;
}

std::shared_ptr<Comm::LiveRecord> Comm::start_record(const std::string& op, const std::string& algorithm,
                                                     const at::Tensor& t, int64_t bytes, const std::string& tag) {
  if (before_collective) before_collective(op);
  const std::string point = "before_" + op;
  inject_delay(point.c_str(), global_rank_);
  inject_fault(point.c_str(), global_rank_);
  auto live = std::make_shared<LiveRecord>();
  CollectiveRecord& r = live->record;
  r.op = op;
  r.algorithm = algorithm;
  r.dtype = t.defined() ? c10::getDtypeNames(t.scalar_type()).first : "none";  // "float32", as documented
  r.bytes = bytes;
  r.group_size = size_;
  r.group = group_name_;
  r.level = level_;
  r.tag = tag;
  std::lock_guard<std::mutex> lock(mutex_);
  r.seq = next_seq_++;
  r.start_us = comm_clock_us();
  records_.push_back(live);
  return live;
}

CommHandle Comm::track(const c10::intrusive_ptr<c10d::Work>& work, std::shared_ptr<LiveRecord> record,
                       bool has_completion_callback, std::function<void()> after_wait) {
  if (has_completion_callback && work) {
    // Stamp the end when the backend completes the work (runs on a backend thread).
    work->getFuture()->addCallback([record](c10::ivalue::Future&) { record->end_us.store(comm_clock_us()); });
  }
  CommHandle handle;
  handle.wait_fn_ = [this, work, record, after_wait = std::move(after_wait)]() {
    ScopedPhase blocked(Phase::comm_wait, collective_span_name(record->record.op, record->record.tag));
    try {
      if (work) work->wait();  // null: posted inside a coalesced group, which batch_isend_irecv waits for
    } catch (const std::exception& e) {
      rethrow_failure(record->record, e);
    }
    if (after_wait) after_wait();
    double expected = 0;
    record->end_us.compare_exchange_strong(expected, comm_clock_us());
  };
  return handle;
}

void Comm::rethrow_failure(const CollectiveRecord& r, const std::exception& e) const {
  std::string message = "comm: rank " + std::to_string(global_rank_) + ": " + r.op + " '" + r.tag + "' on group '" +
                        group_name_ + "' (#" + std::to_string(r.seq) + ", " + std::to_string(r.bytes) +
                        " bytes) failed: " + e.what();
  if (explain_failure) {
    const std::string why = explain_failure();
    if (!why.empty()) message += "\n  " + why;
  }
  throw std::runtime_error(message);
}

CommHandle Comm::run_ring(std::shared_ptr<LiveRecord> record, std::function<void()> body) {
  if (!ring_thread_) ring_thread_ = std::make_unique<SerialThread>();
  auto done = std::make_shared<std::promise<void>>();
  std::shared_future<void> finished = done->get_future().share();
  ring_thread_->post([this, record, body = std::move(body), done] {
    at::NoGradGuard no_grad;                    // plain buffers; this thread has autograd's default mode
    MemoryScope scratch(MemoryCategory::comm);  // the ring's partial sums, receive buffer and staging copies
    // After a failed ring the peers are out of step (some sends were never received): later rings on this group
    // are not run, and each says which call failed before it and why.
    try {
      if (!ring_failure_.empty()) throw std::runtime_error("not run: an earlier ring on this group, " + ring_failure_);
      body();
      record->end_us.store(comm_clock_us());
      done->set_value();
    } catch (const std::exception& e) {
      if (ring_failure_.empty())
        ring_failure_ = record->record.op + " '" + record->record.tag + "' (#" + std::to_string(record->record.seq) +
                        "), failed: " + e.what();
      done->set_exception(std::current_exception());
    } catch (...) {
      if (ring_failure_.empty()) ring_failure_ = record->record.op + " '" + record->record.tag + "', failed";
      done->set_exception(std::current_exception());
    }
  });
  CommHandle handle;
  handle.wait_fn_ = [this, record, finished]() {
    ScopedPhase blocked(Phase::comm_wait, collective_span_name(record->record.op, record->record.tag));
    try {
      finished.get();
    } catch (const std::exception& e) {
      rethrow_failure(record->record, e);
    }
  };
  return handle;
}

void Comm::run_blocking(const std::shared_ptr<LiveRecord>& record, const std::function<void()>& body) {
  ScopedPhase blocked(Phase::comm_wait, collective_span_name(record->record.op, record->record.tag));
  try {
    body();
  } catch (const std::invalid_argument&) {
    throw;  // a caller's mistake, not a failed collective
  } catch (const std::exception& e) {
    rethrow_failure(record->record, e);
  }
  record->end_us.store(comm_clock_us());
}

void Comm::check_ring_chunk(const char* op, const char* which, int64_t total, int64_t chunk) const {
  const auto [begin, end] = chunk_bounds(total, size_)[static_cast<size_t>(rank_)];
  if (chunk != end - begin)
    throw std::invalid_argument(std::string("comm: ring ") + op + " " + which + " of rank " + std::to_string(rank_) +
                                " needs " + std::to_string(end - begin) + " elements, got " + std::to_string(chunk));
}

std::string Comm::last_issued() const {
  std::lock_guard<std::mutex> lock(mutex_);
  if (records_.empty()) return "";
  const CollectiveRecord& r = records_.back()->record;
  // A stream, not an operator+ chain: GCC 12 at -O3 warns (-Wstringop-overflow) on that chain, wrongly.
  std::ostringstream out;
  out << '#' << r.seq << ' ' << r.op << " '" << r.tag << "' on " << group_name_;
  return out.str();
}

at::Tensor Comm::wire_copy(const at::Tensor& t) const {
  if (!wire_device_.is_cpu()) return t.to(wire_device_);
  at::Tensor host = at::empty(t.sizes(), t.options().device(at::kCPU).pinned_memory(true));
  host.copy_(t);  // device -> pinned host: the host waits for it, so the backend reads finished data
  return host;
}

CommHandle Comm::issue_all_reduce(at::Tensor& tensor, const std::string& tag) {
  auto record = start_record("all_reduce", "backend", tensor, static_cast<int64_t>(tensor.nbytes()), tag);
  MemoryScope staging(MemoryCategory::comm);  // the backend's own staging copies, if any
  if (staged(tensor)) {
    at::Tensor wire = wire_copy(tensor);
    std::vector<at::Tensor> tensors{wire};
    return track(backend_->allreduce(tensors), record, true, [tensor, wire]() mutable { tensor.copy_(wire); });
  }
  std::vector<at::Tensor> tensors{tensor};
  return track(backend_->allreduce(tensors), record, true);
}

CommHandle Comm::issue_broadcast(at::Tensor& tensor, int root, const std::string& tag) {
  auto record = start_record("broadcast", "backend", tensor, static_cast<int64_t>(tensor.nbytes()), tag);
  c10d::BroadcastOptions options;
  options.rootRank = root;
  MemoryScope staging(MemoryCategory::comm);  // the backend's own staging copies, if any
  if (staged(tensor)) {
    at::Tensor wire = wire_copy(tensor);
    std::vector<at::Tensor> tensors{wire};
    return track(backend_->broadcast(tensors, options), record, true, [tensor, wire]() mutable { tensor.copy_(wire); });
  }
  std::vector<at::Tensor> tensors{tensor};
  return track(backend_->broadcast(tensors, options), record, true);
}

CommHandle Comm::issue_all_gather(at::Tensor& output, at::Tensor& input, CommAlgorithm algorithm,
                                  const std::string& tag) {
  auto record = start_record("all_gather", to_string(algorithm), input, static_cast<int64_t>(output.nbytes()), tag);
  if (algorithm == CommAlgorithm::ring) {  // on the ring thread
    return run_ring(record, [this, output, input]() mutable {
      if (!staged(output)) return ring_all_gather(output, input);
      at::Tensor wire_out = wire_copy(output);
      ring_all_gather(wire_out, wire_copy(input));
      output.copy_(wire_out);
    });
  }
  if (output.numel() != input.numel() * size_)
    throw std::invalid_argument("comm: backend all_gather needs output numel (" + std::to_string(output.numel()) +
                                ") = world (" + std::to_string(size_) + ") * input numel (" +
                                std::to_string(input.numel()) + ")");
  MemoryScope staging(MemoryCategory::comm);  // the backend's own staging copies, if any
  if (staged(output)) {
    at::Tensor wire_out = wire_copy(output), wire_in = wire_copy(input);
    return track(backend_->_allgather_base(wire_out, wire_in), record, true,
                 [output, wire_out, wire_in]() mutable { output.copy_(wire_out); });
  }
  return track(backend_->_allgather_base(output, input), record, true);
}

CommHandle Comm::issue_reduce_scatter(at::Tensor& output, at::Tensor& input, CommAlgorithm algorithm,
                                      const std::string& tag) {
  auto record = start_record("reduce_scatter", to_string(algorithm), input, static_cast<int64_t>(input.nbytes()), tag);
  if (algorithm == CommAlgorithm::ring) {  // on the ring thread
    return run_ring(record, [this, output, input]() mutable {
      if (!staged(input)) return ring_reduce_scatter(output, input);
      at::Tensor wire_out = wire_copy(output);
      ring_reduce_scatter(wire_out, wire_copy(input));
      output.copy_(wire_out);
    });
  }
  if (input.numel() != output.numel() * size_)
    throw std::invalid_argument("comm: backend reduce_scatter needs input numel (" + std::to_string(input.numel()) +
                                ") = world (" + std::to_string(size_) + ") * output numel (" +
                                std::to_string(output.numel()) + ")");
  // Gloo emulates this with an all-reduce and writes the output only inside wait(); its work has no
  // completion future, so the end time is stamped when wait() returns.
  MemoryScope staging(MemoryCategory::comm);  // the backend's own staging copies, if any
  if (staged(input)) {
    at::Tensor wire_out = wire_copy(output), wire_in = wire_copy(input);
    return track(backend_->_reduce_scatter_base(wire_out, wire_in), record, false,
                 [output, wire_out, wire_in]() mutable { output.copy_(wire_out); });
  }
  return track(backend_->_reduce_scatter_base(output, input), record, false);
}

CommHandle Comm::issue_all_to_all(at::Tensor& output, at::Tensor& input, const std::vector<int64_t>& output_splits,
                                  const std::vector<int64_t>& input_splits, const std::string& tag) {
  auto record = start_record("all_to_all", "backend", input, static_cast<int64_t>(input.nbytes()), tag);
  std::vector<int64_t> out_splits = output_splits, in_splits = input_splits;  // c10d takes them by reference
  MemoryScope staging(MemoryCategory::comm);  // the backend's own staging copies, if any
  if (staged(input)) {
    at::Tensor wire_out = wire_copy(output), wire_in = wire_copy(input);
    return track(backend_->alltoall_base(wire_out, wire_in, out_splits, in_splits), record, true,
                 [output, wire_out, wire_in]() mutable { output.copy_(wire_out); });
  }
  return track(backend_->alltoall_base(output, input, out_splits, in_splits), record, true);
}

void Comm::issue_barrier() {
  auto record = start_record("barrier", "backend", at::Tensor(), 0, "");
  track(backend_->barrier(), record, false).wait();
}

// --- the public collectives: the desync check (when on), then the collective --------------------------------------

bool Comm::agree_on_call(CollectiveStream stream, CollectiveOp op, at::Tensor* input, int64_t input_per_rank,
                         at::Tensor* output, int64_t output_per_rank, int64_t root, const std::string& tag, bool rows) {
  if (stream == CollectiveStream::backend) {
    const DesyncInjection injected = injected_desync(global_rank_, group_name_, backend_calls_made_++, tag);
    if (injected == DesyncInjection::skip) return false;
    if (injected == DesyncInjection::shape && !rows) {  // scratch of another shape, issued for real
      if (input) *input = at::zeros({input->numel() + input_per_rank}, input->options());
      if (output) *output = at::zeros({output->numel() + output_per_rank}, output->options());
    }
  }
  const int64_t seq = calls_issued_[static_cast<int>(stream)]++;
  if (!desync_check_) return true;
  std::vector<int64_t> sizes;
  if (input) sizes = input->sizes().vec();
  if (rows && !sizes.empty()) sizes.erase(sizes.begin());
  desync_check_->agree(make_signature(seq, stream, op, input ? static_cast<int64_t>(input->scalar_type()) : -1, sizes,
                                      output && !rows ? output->numel() : -1, root, tag));
  return true;
}

CommHandle Comm::all_reduce(at::Tensor& tensor, const std::string& tag) {
  if (!desync_check_ && !desync_injection_set()) return issue_all_reduce(tensor, tag);
  at::Tensor t = tensor;
  if (!agree_on_call(CollectiveStream::backend, CollectiveOp::all_reduce, &t, 1, nullptr, 0, -1, tag)) return {};
  return issue_all_reduce(t, tag);
}

CommHandle Comm::broadcast(at::Tensor& tensor, int root, const std::string& tag) {
  if (!desync_check_ && !desync_injection_set()) return issue_broadcast(tensor, root, tag);
  at::Tensor t = tensor;
  if (!agree_on_call(CollectiveStream::backend, CollectiveOp::broadcast, &t, 1, nullptr, 0, root, tag)) return {};
  return issue_broadcast(t, root, tag);
}

CommHandle Comm::all_gather(at::Tensor& output, at::Tensor& input, CommAlgorithm algorithm, const std::string& tag) {
  if (!output.is_contiguous() || !input.is_contiguous() || output.dim() != 1 || input.dim() != 1)
    throw std::invalid_argument("comm: all_gather needs 1-D contiguous tensors");
  if (algorithm == CommAlgorithm::ring) check_ring_chunk("all_gather", "input", output.numel(), input.numel());
  if (!desync_check_ && !desync_injection_set()) return issue_all_gather(output, input, algorithm, tag);
  const auto stream = algorithm == CommAlgorithm::ring ? CollectiveStream::ring : CollectiveStream::backend;
  at::Tensor out = output, in = input;
  if (!agree_on_call(stream, CollectiveOp::all_gather, &in, 1, &out, size_, -1, tag)) return {};
  return issue_all_gather(out, in, algorithm, tag);
}

CommHandle Comm::reduce_scatter(at::Tensor& output, at::Tensor& input, CommAlgorithm algorithm,
                                const std::string& tag) {
  if (!output.is_contiguous() || !input.is_contiguous() || output.dim() != 1 || input.dim() != 1)
    throw std::invalid_argument("comm: reduce_scatter needs 1-D contiguous tensors");
  if (algorithm == CommAlgorithm::ring) check_ring_chunk("reduce_scatter", "output", input.numel(), output.numel());
  if (!desync_check_ && !desync_injection_set()) return issue_reduce_scatter(output, input, algorithm, tag);
  const auto stream = algorithm == CommAlgorithm::ring ? CollectiveStream::ring : CollectiveStream::backend;
  at::Tensor out = output, in = input;
  if (!agree_on_call(stream, CollectiveOp::reduce_scatter, &in, size_, &out, 1, -1, tag)) return {};
  return issue_reduce_scatter(out, in, algorithm, tag);
}

namespace {
// Splits of `rows` rows over `parts` ranks for all_to_all: given ones must be `parts` non-negative sizes summing to
// `rows`; empty ones are equal parts, which `rows` must allow.
void check_splits(const char* which, const std::vector<int64_t>& splits, int64_t rows, int parts) {
  const std::string where = std::string("comm: all_to_all ") + which;
  if (splits.empty()) {
    if (rows % parts != 0)
      throw std::invalid_argument(where + " has " + std::to_string(rows) + " rows, not divisible by the group's " +
                                  std::to_string(parts) + " ranks: give its splits");
    return;
  }
  if (static_cast<int>(splits.size()) != parts)
    throw std::invalid_argument(where + " splits name " + std::to_string(splits.size()) + " ranks; the group has " +
                                std::to_string(parts));
  int64_t sum = 0;
  for (const int64_t n : splits) {
    if (n < 0) throw std::invalid_argument(where + " splits hold a negative size " + std::to_string(n));
    sum += n;
  }
  if (sum != rows)
    throw std::invalid_argument(where + " splits sum to " + std::to_string(sum) + " rows; the tensor has " +
                                std::to_string(rows));
}
}  // namespace

at::Tensor Comm::all_gather_along(const at::Tensor& input, int64_t dim, CommAlgorithm algorithm,
                                  const std::string& tag) {
  const int64_t d = at::maybe_wrap_dim(dim, input.dim());
  at::Tensor flat = input.contiguous().view({-1});
  at::Tensor gathered = at::empty({size_ * flat.numel()}, input.options());
  all_gather(gathered, flat, algorithm, tag).wait();
  std::vector<int64_t> parts = {size_};  // [p, ...input's shape]: rank r's input at index r
  for (const int64_t s : input.sizes()) parts.push_back(s);
  std::vector<int64_t> out_shape = input.sizes().vec();
  out_shape[static_cast<size_t>(d)] *= size_;
  return gathered.view(parts).movedim(0, d).reshape(out_shape);
}

at::Tensor Comm::reduce_scatter_along(const at::Tensor& input, int64_t dim, CommAlgorithm algorithm,
                                      const std::string& tag) {
  const int64_t d = at::maybe_wrap_dim(dim, input.dim());
  const int64_t whole = input.size(d);
  if (whole % size_ != 0)
    throw std::invalid_argument("comm " + group_name_ + ": reduce_scatter_along dim " + std::to_string(d) +
                                " of size " + std::to_string(whole) + " is not divisible by the group's " +
                                std::to_string(size_) + " ranks");
  std::vector<int64_t> split = input.sizes().vec();  // dim d cut into [p, whole / p], the p parts moved first
  split[static_cast<size_t>(d)] = whole / size_;
  split.insert(split.begin() + d, size_);
  at::Tensor in_rank_order = input.reshape(split).movedim(d, 0).contiguous().view({-1});
  std::vector<int64_t> out_shape = input.sizes().vec();
  out_shape[static_cast<size_t>(d)] = whole / size_;
  at::Tensor part = at::empty({in_rank_order.numel() / size_}, input.options());
  reduce_scatter(part, in_rank_order, algorithm, tag).wait();
  return part.view(out_shape);
}

CommHandle Comm::all_to_all(at::Tensor& output, at::Tensor& input, const std::vector<int64_t>& output_splits,
                            const std::vector<int64_t>& input_splits, const std::string& tag) {
  if (!output.is_contiguous() || !input.is_contiguous() || output.dim() < 1 || input.dim() < 1)
    throw std::invalid_argument("comm: all_to_all needs contiguous tensors of at least one dimension");
  if (output.scalar_type() != input.scalar_type() || output.sizes().slice(1) != input.sizes().slice(1))
    throw std::invalid_argument("comm: all_to_all output and input need the same dtype and row shape");
  check_splits("input", input_splits, input.size(0), size_);
  check_splits("output", output_splits, output.size(0), size_);
  if (!desync_check_ && !desync_injection_set())
    return issue_all_to_all(output, input, output_splits, input_splits, tag);
  at::Tensor out = output, in = input;
  if (!agree_on_call(CollectiveStream::backend, CollectiveOp::all_to_all, &in, 0, &out, 0, -1, tag, true)) return {};
  return issue_all_to_all(out, in, output_splits, input_splits, tag);
}

void Comm::barrier() {
  if (!desync_check_ && !desync_injection_set()) return issue_barrier();
  if (agree_on_call(CollectiveStream::backend, CollectiveOp::barrier, nullptr, 0, nullptr, 0, -1, "")) issue_barrier();
}

void Comm::exchange(at::Tensor& send_buf, int to, at::Tensor& recv_buf, int from, const std::string& tag) {
  auto record = start_record("send_recv", "backend", send_buf, static_cast<int64_t>(send_buf.nbytes()), tag);
  run_blocking(record, [&] {
    if (!staged(send_buf)) return send_recv(send_buf, to, recv_buf, from, 0);
    at::Tensor wire_send = wire_copy(send_buf), wire_recv = wire_copy(recv_buf);
    send_recv(wire_send, to, wire_recv, from, 0);
    recv_buf.copy_(wire_recv);
  });
}

CommHandle Comm::send(at::Tensor& tensor, int to, int p2p_tag, const std::string& tag) {
  auto record = start_record("send", "backend", tensor, static_cast<int64_t>(tensor.nbytes()), tag);
  at::Tensor wire = staged(tensor) ? wire_copy(tensor) : tensor;
  std::vector<at::Tensor> list{wire};
  try {
    return track(backend_->send(list, to, p2p_tag), record, /*has_completion_callback=*/false,
                 [wire] { (void)wire; });  // the staged copy lives until the send is done
  } catch (const std::exception& e) {
    rethrow_failure(record->record, e);
  }
}

CommHandle Comm::recv(at::Tensor& tensor, int from, int p2p_tag, const std::string& tag) {
  auto record = start_record("recv", "backend", tensor, static_cast<int64_t>(tensor.nbytes()), tag);
  const bool stage = staged(tensor);
  at::Tensor wire = stage ? wire_copy(tensor) : tensor;
  std::vector<at::Tensor> list{wire};
  try {
    return track(backend_->recv(list, from, p2p_tag), record, /*has_completion_callback=*/false,
                 [stage, wire, target = tensor]() mutable {
                   if (stage) target.copy_(wire);
                 });
  } catch (const std::exception& e) {
    rethrow_failure(record->record, e);
  }
}

bool Comm::coalesces_p2p() const { return backend_->supportsCoalescing(); }

std::vector<CommHandle> Comm::batch_isend_irecv(std::vector<P2pOp> ops) {
  const bool coalesce = ops.size() > 1 && coalesces_p2p();
  if (coalesce) backend_->startCoalescing();
  std::vector<CommHandle> handles;
  handles.reserve(ops.size());
  try {
    for (P2pOp& op : ops)
      handles.push_back(op.kind == P2pOp::Kind::send ? send(op.tensor, op.peer, op.p2p_tag, op.tag)
                                                     : recv(op.tensor, op.peer, op.p2p_tag, op.tag));
  } catch (...) {
    if (coalesce) backend_->endCoalescing();
    throw;
  }
  if (coalesce) {  // every op completes with the group: its handle waits for the group first
    c10::intrusive_ptr<c10d::Work> group = backend_->endCoalescing();
    for (CommHandle& handle : handles)
      handle = CommHandle::deferred([group, op = handle]() mutable {
        if (group) group->wait();
        op.wait();
      });
  }
  return handles;
}

std::vector<CollectiveRecord> Comm::records() const {
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<CollectiveRecord> out;
  for (const auto& live : records_) {
    out.push_back(live->record);
    out.back().end_us = live->end_us.load();
  }
  return out;
}

std::vector<CollectiveRecord> Comm::records_since(size_t first) const {
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<CollectiveRecord> out;
  for (size_t i = first; i < records_.size(); ++i) {
    out.push_back(records_[i]->record);
    out.back().end_us = records_[i]->end_us.load();
  }
  return out;
}

size_t Comm::record_count() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return records_.size();
}

}  // namespace dtlab
