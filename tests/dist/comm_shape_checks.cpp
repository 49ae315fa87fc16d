// comm_shape_checks.cpp: comm_rank's checks of the collectives that move rows or dimensions of a tensor —
// all_to_all with uneven splits, all_gather_along and reduce_scatter_along, and batched sends and receives
// (see comm_checks.hpp).
#include <stdexcept>
#include <string>
#include <vector>

#include "tests/dist/comm_checks.hpp"

namespace dtlab::comm_checks {

void check_all_to_all(Comm& comm, Checks& checks) {
  const int p = comm.size(), r = comm.rank();
  constexpr int64_t kWidth = 3;
  const auto rows = [](int from, int to) -> int64_t { return (from + 2 * to) % 3; };
  const auto block = [&](int from, int to) {
    const at::Tensor row = at::arange(rows(from, to), at::kFloat).unsqueeze(1) * 10;
    return row + at::arange(kWidth, at::kFloat).unsqueeze(0) + (from * 1000 + to * 100);
  };
  std::vector<int64_t> in_splits, out_splits;
  std::vector<at::Tensor> in_parts, want_parts;
  for (int j = 0; j < p; ++j) {
    in_splits.push_back(rows(r, j));
    in_parts.push_back(block(r, j));
    out_splits.push_back(rows(j, r));
    want_parts.push_back(block(j, r));
  }
  at::Tensor input = at::cat(in_parts).contiguous();
  const at::Tensor want = at::cat(want_parts);
  at::Tensor output = at::full({want.size(0), kWidth}, 99.0f);
  const size_t first = comm.record_count();
  comm.all_to_all(output, input, out_splits, in_splits, "test.all_to_all").wait();
  checks.verdict(at::equal(output, want), "all_to_all, uneven and empty splits: every sender's rows in rank order",
                 bit_difference(output.flatten(), want.flatten()));
  const auto records = comm.records_since(first);
  checks.verdict(
      records.size() == 1 && records[0].op == "all_to_all" && records[0].bytes == static_cast<int64_t>(input.nbytes()),
      "all_to_all record: one call, the bytes this rank sent",
      records.empty() ? "none" : records[0].op + " " + std::to_string(records[0].bytes) + " B");
  std::string refusal;
  try {
    comm.all_to_all(output, input, out_splits, {input.size(0)}, "test.all_to_all.bad").wait();
  } catch (const std::invalid_argument& e) {
    refusal = e.what();
  }
  checks.verdict(refusal.find("splits name 1 ranks") != std::string::npos, "all_to_all refuses splits of 1 rank",
                 refusal);
}

namespace {

// Rank r's part of `shape`: integers that name the rank and the element, so their sums stay exact in fp32.
at::Tensor part_of(int rank, const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (const int64_t s : shape) n *= s;
  return (at::arange(n, at::kFloat) + 1000 * rank).view(shape);
}

}  // namespace

void check_along_a_dimension(Comm& comm, Checks& checks) {
  const int p = comm.size(), r = comm.rank();
  for (int64_t dim = 0; dim < 3; ++dim) {
    const std::string where = "dim " + std::to_string(dim);
    const std::vector<int64_t> shape = {2, 3, 4};
    std::vector<at::Tensor> parts;
    for (int j = 0; j < p; ++j) parts.push_back(part_of(j, shape));
    const size_t first = comm.record_count();
    const at::Tensor gathered = comm.all_gather_along(part_of(r, shape), dim, CommAlgorithm::backend, "test.along");
    checks.verdict(at::equal(gathered, at::cat(parts, dim)), "all_gather_along " + where + ": every rank's part",
                   bit_difference(gathered.flatten(), at::cat(parts, dim).flatten()));
    // The reduce-scatter of p copies of the gathered tensor, each scaled by its rank + 1, along the same dim.
    const at::Tensor whole = at::cat(parts, dim);
    const at::Tensor mine = comm.reduce_scatter_along(whole * (r + 1), dim, CommAlgorithm::ring, "test.along");
    const at::Tensor want = (whole * (p * (p + 1) / 2)).chunk(p, dim)[static_cast<size_t>(r)];
    checks.verdict(at::equal(mine, want), "reduce_scatter_along " + where + ": this rank's part of the sum",
                   bit_difference(mine.flatten(), want.contiguous().flatten()));
    const auto records = comm.records_since(first);
    const int64_t part_bytes = 2 * 3 * 4 * 4;
    checks.verdict(
        records.size() == 2 && records[0].op == "all_gather" && records[0].bytes == p * part_bytes &&
            records[1].op == "reduce_scatter" && records[1].bytes == p * part_bytes,
        "the along calls record as one flat all_gather and one reduce_scatter of the flat bytes (" + where + ")",
        records.size() == 2 ? records[0].op + " " + std::to_string(records[0].bytes) + " B, " + records[1].op + " " +
                                  std::to_string(records[1].bytes) + " B"
                            : std::to_string(records.size()) + " records");
  }
  std::string refusal;
  try {
    comm.reduce_scatter_along(at::zeros({2, p + 1}), 1, CommAlgorithm::ring, "test.along.bad");
  } catch (const std::invalid_argument& e) {
    refusal = e.what();
  }
  checks.verdict(refusal.find("reduce_scatter_along dim 1 of size " + std::to_string(p + 1) + " is not divisible") !=
                     std::string::npos,
                 "reduce_scatter_along refuses a dimension the ranks do not divide", refusal);
}

void check_batch_isend_irecv(Comm& comm, Checks& checks) {
  const int p = comm.size(), r = comm.rank();
  const int right = (r + 1) % p, left = (r + p - 1) % p;
  const int base = Comm::kPipelineP2pTagBase;
  // What `from` sends `to` under tag t: integers naming all three.
  const auto message = [](int from, int to, int t) { return at::arange(5, at::kFloat) + (from * 100 + to * 10 + t); };
  using Kind = Comm::P2pOp::Kind;
  // Receives posted before the sends, two messages each way to each neighbour, the second tag's receive before the
  // first's: the tags, not the order, pair them.
  std::vector<Comm::P2pOp> ops = {
      {.kind = Kind::recv, .tensor = at::zeros({5}), .peer = left, .p2p_tag = base + 2, .tag = "test.p2p.l2"},
      {.kind = Kind::recv, .tensor = at::zeros({5}), .peer = left, .p2p_tag = base + 1, .tag = "test.p2p.l1"},
      {.kind = Kind::send, .tensor = message(r, right, 1), .peer = right, .p2p_tag = base + 1, .tag = "test.p2p.r1"},
      {.kind = Kind::send, .tensor = message(r, right, 2), .peer = right, .p2p_tag = base + 2, .tag = "test.p2p.r2"},
  };
  std::vector<at::Tensor> received = {ops[0].tensor, ops[1].tensor};
  const size_t first = comm.record_count();
  std::vector<CommHandle> handles = comm.batch_isend_irecv(std::move(ops));
  for (CommHandle& h : handles) h.wait();
  checks.verdict(handles.size() == 4, "batch_isend_irecv: one handle per op", std::to_string(handles.size()));
  checks.verdict(at::equal(received[0], message(left, r, 2)) && at::equal(received[1], message(left, r, 1)),
                 "batch_isend_irecv: each receive holds the message of its tag",
                 bit_difference(received[0], message(left, r, 2)) + bit_difference(received[1], message(left, r, 1)));
  const auto records = comm.records_since(first);
  std::string ops_seen;
  for (const auto& rec : records) ops_seen += rec.op + ":" + std::to_string(rec.bytes) + " ";
  checks.verdict(ops_seen == "recv:20 recv:20 send:20 send:20 ", "batch_isend_irecv: one record per op, in order",
                 ops_seen);
}

}  // namespace dtlab::comm_checks
