// comm_checks.hpp: the verdict lines of the comm layer's rank programs (comm_rank and the checks it runs from other
// files), and the checks that live outside comm_rank.cpp.
#pragma once

#include <cstdio>
#include <string>

#include <ATen/ATen.h>

#include "lab/comm/comm.hpp"

namespace dtlab::comm_checks {

class Checks {
 public:
  explicit Checks(int rank) : rank_(rank) {}

  void verdict(bool ok, const std::string& what, const std::string& detail = "") {
    if (!ok) ++failures_;
    std::printf("%s %s%s%s\n", ok ? "ok  " : "FAIL", what.c_str(), detail.empty() ? "" : ": ", detail.c_str());
    std::fflush(stdout);
  }
  int failures() const { return failures_; }
  int rank() const { return rank_; }

 private:
  int rank_;
  int failures_ = 0;
};

// "" when equal bit for bit; else the first differing index and both values.
inline std::string bit_difference(const at::Tensor& got, const at::Tensor& want) {
  if (got.sizes() != want.sizes())
    return "shape " + std::to_string(got.numel()) + " vs expected " + std::to_string(want.numel());
  if (at::equal(got, want)) return "";
  const at::Tensor differs = got.ne(want).nonzero();
  const int64_t i = differs[0][0].item<int64_t>();
  return "first difference at element " + std::to_string(i) + ": got " + std::to_string(got[i].item<float>()) +
         ", expected " + std::to_string(want[i].item<float>()) + " (" + std::to_string(differs.size(0)) +
         " elements differ)";
}

// all_to_all with uneven and empty splits == each sender's rows in rank order (bit-exact), one record of the bytes
// sent, and splits of the wrong length refused (comm_shape_checks.cpp).
void check_all_to_all(Comm& comm, Checks& checks);
// all_gather_along / reduce_scatter_along on dims 0, 1 and 2 of [2, 3, 4] parts == at::cat of every rank's part and
// this rank's part of the closed-form sum (bit-exact on integers), recorded as one flat call with the flat call's
// bytes; a dimension that does not divide refused, naming it (comm_shape_checks.cpp).
void check_along_a_dimension(Comm& comm, Checks& checks);
// batch_isend_irecv: receives posted before the sends and in the other tag order, two each way between neighbours of
// a ring, each holding the message of its tag (bit-exact), one handle and one record per op (comm_shape_checks.cpp).
void check_batch_isend_irecv(Comm& comm, Checks& checks);

}  // namespace dtlab::comm_checks
