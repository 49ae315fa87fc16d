// ring.cpp: the lab's ring reduce-scatter and all-gather over send/recv (Gloo has no real
// reduce-scatter). p ranks in a ring, p - 1 exchange steps, each rank sends to rank+1 and receives
// from rank-1; chunk boundaries from Comm::chunk_bounds, so sizes need not divide p.
//
// Reduce-scatter, step s (0 <= s < p-1): send the partial sum of chunk (r - s - 1) mod p, receive
// chunk (r - s - 2) mod p and add it into the local partial; after p - 1 steps rank r holds chunk r
// summed over every rank. Bytes sent per rank: (p-1)/p of the buffer (vs 2(p-1)/p for all-reduce).
// All-gather, step s: send chunk (r - s) mod p, receive chunk (r - s - 1) mod p into place.
// Both run on the Comm's ring thread (comm.cpp), which sets the memory category (comm) and checked the sizes.
#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <torch/csrc/distributed/c10d/Work.hpp>

#include "lab/comm/comm.hpp"
#include "lab/instrument/fault_injection.hpp"

namespace dtlab {

namespace {
int mod(int a, int p) { return ((a % p) + p) % p; }
}  // namespace

void Comm::send_recv(at::Tensor& send_buf, int to, at::Tensor& recv_buf, int from, int tag) {
  // Both sides know both sizes, so an empty chunk (n < p) is skipped consistently.
  std::vector<at::Tensor> recv_list{recv_buf};
  std::vector<at::Tensor> send_list{send_buf};
  c10::intrusive_ptr<c10d::Work> recv_work, send_work;
  if (recv_buf.numel() > 0) recv_work = backend_->recv(recv_list, from, tag);  // post the receive first
  if (send_buf.numel() > 0) send_work = backend_->send(send_list, to, tag);
  if (send_work) send_work->wait();
  if (recv_work) recv_work->wait();
}

void Comm::ring_reduce_scatter(at::Tensor& output, const at::Tensor& input) {
  const int p = size_, r = rank_;
  const auto bounds = chunk_bounds(input.numel(), p);
  if (p == 1) {
    output.copy_(input);
    return;
  }
  // Scratch is two chunks, not a copy of the input: the running sum passed on (the chunk received last step plus
  // this rank's own part of it) and the receive buffer. Sums are added in the same order as before (own + incoming).
  auto own = [&](int c) { return input.narrow(0, bounds[c].first, bounds[c].second - bounds[c].first); };
  int64_t max_len = 0;
  for (const auto& b : bounds) max_len = std::max(max_len, b.second - b.first);
  at::Tensor running = at::empty({max_len}, input.options());
  at::Tensor incoming = at::empty({max_len}, input.options());
  const int base_tag = next_p2p_tag_;
  next_p2p_tag_ += p;
  for (int s = 0; s < p - 1; ++s) {
    const int send_c = mod(r - s - 1, p), recv_c = mod(r - s - 2, p);
    const int64_t send_len = bounds[send_c].second - bounds[send_c].first;
    const int64_t recv_len = bounds[recv_c].second - bounds[recv_c].first;
    // Step 0 sends this rank's own chunk; later steps the sum built in the step before (chunk send_c's).
    at::Tensor send_buf = s == 0 ? own(send_c) : running.narrow(0, 0, send_len);
    at::Tensor recv_buf = incoming.narrow(0, 0, recv_len);
    send_recv(send_buf, mod(r + 1, p), recv_buf, mod(r - 1, p), base_tag + s);
    at::Tensor sum = running.narrow(0, 0, recv_len);  // the send has completed: its buffer is free
    at::add_out(sum, own(recv_c), recv_buf);
    inject_fault("mid_ring", global_rank_);
  }
  output.copy_(running.narrow(0, 0, bounds[r].second - bounds[r].first));
}

void Comm::ring_all_gather(at::Tensor& output, const at::Tensor& input) {
  const int p = size_, r = rank_;
  const auto bounds = chunk_bounds(output.numel(), p);
  auto chunk = [&](int c) { return output.narrow(0, bounds[c].first, bounds[c].second - bounds[c].first); };
  chunk(r).copy_(input);
  const int base_tag = next_p2p_tag_;
  next_p2p_tag_ += p;
  for (int s = 0; s < p - 1; ++s) {
    const int send_c = mod(r - s, p), recv_c = mod(r - s - 1, p);
    at::Tensor send_buf = chunk(send_c);
    at::Tensor recv_buf = chunk(recv_c);
    send_recv(send_buf, mod(r + 1, p), recv_buf, mod(r - 1, p), base_tag + s);
    inject_fault("mid_ring", global_rank_);
  }
}

}  // namespace dtlab
