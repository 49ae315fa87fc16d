// comm_rank.cpp: one rank of a `dtlab launch -n N build/bin/comm_rank` job that checks the comm layer
// against the backend on real processes (driven by dist_tests; also useful by hand).
//
// For every size in kSizes — including sizes that do not divide the world size and sizes below it —
//   * ring reduce_scatter == all_reduce of the whole buffer, this rank's chunk (bit-exact on
//     integer-valued fp32, whose sums are exact), == the closed-form sum, and == the backend's
//     reduce_scatter when the size divides (the backend needs that);
//   * ring all_gather == the expected concatenation (bit-exact) and == the backend's all_gather when
//     the size divides;
//   * ring reduce_scatter on random fp32 matches all_reduce within rtol 1e-6 (the ring adds in another
//     order than Gloo's all-reduce, so only rounding may differ);
// at world 4 (2 nodes x 2) and 6 (2 nodes x 3, uneven chunks) the hierarchical all-reduce (lab/comm/hierarchical.hpp)
//   == the flat all-reduce and the closed-form sum on integer-valued fp32 (bit-exact: those sums are exact in any
//   order), ~= the flat one on random fp32 (rtol 1e-6: it adds inside the node first, so only rounding differs),
//   and records each level's part on its own group: reduce_scatter and all_gather at level "intra" on node.<n>,
//   all_reduce of the 1/K chunk at level "inter" on cross.<l>; and a buffer over the pipeline's piece size (three
//   pieces, the last uneven) == the closed-form sum;
// ring calls are asynchronous: a reduce-scatter and an all-gather issued back to back on the last rank, which is
//   300 ms late, return before it joins (in under 150 ms), run in issue order (both results bit-exact), and the
//   wait covers the lateness;
// all_to_all with uneven and empty splits, the all-gather / reduce-scatter along a tensor dimension and batched
//   sends and receives (tests/dist/comm_shape_checks.cpp);
// then the recorded collectives (one record per call: op, algorithm, bytes, group size, times) and
// the replica check (identical tensors pass; one element changed on rank 1 fails on every rank,
// naming rank 1 and the parameter).
//
// `comm_rank --ring-failure` (a job of 2) checks instead what follows a failed ring: rank 1 leaves as soon as the
// job is up; rank 0 issues a ring reduce-scatter and a ring all-gather back to back. The reduce-scatter fails on the
// lost peer, naming itself; the all-gather is not run (its peers would be out of step) and fails naming the
// reduce-scatter that failed before it; neither wait hangs (the test bounds the job's time).
//
// Every rank issues the same collectives whatever its results, so a failing check never leaves a
// peer waiting; at the end the failure counts are summed, and every rank exits 1 if any rank failed.
// Output: one "ok"/"FAIL" verdict line per check, then "comm_rank: all checks passed" (exit 0).
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>
#include <thread>
#include <vector>

#include <ATen/ATen.h>

#include "lab/comm/comm.hpp"
#include "lab/comm/hierarchical.hpp"
#include "lab/dist/dist_world.hpp"
#include "lab/dist/rank_env.hpp"
#include "lab/dist/replica_check.hpp"
#include "tests/dist/comm_checks.hpp"

using dtlab::comm_checks::bit_difference;
using dtlab::comm_checks::Checks;

namespace {

using dtlab::Comm;
using dtlab::CommAlgorithm;
using dtlab::CommHandle;

const std::vector<int64_t> kSizes = {1, 2, 3, 7, 64, 1000, 4097, 65536 + 3};

// What one call must have recorded.
struct ExpectedRecord {
  std::string op, algorithm, dtype;
  int64_t bytes;
  std::string what;  // the check that issued it, for messages
};

std::string size_label(const char* op, int64_t n, int p) {
  return std::string(op) + " n=" + std::to_string(n) + (n % p == 0 ? " (divisible)" : n < p ? " (n < p)" : " (uneven)");
}

at::Tensor chunk_of(const at::Tensor& full, const std::pair<int64_t, int64_t>& bounds) {
  return full.narrow(0, bounds.first, bounds.second - bounds.first);
}

// Integer-valued fp32 inputs: rank r holds (r+1) * (i % 17); the sum over p ranks is
// (i % 17) * p(p+1)/2 <= 16 * 36 for p <= 8 — exact in fp32 in any order of addition.
at::Tensor integer_input(int rank, int64_t n) {
  return at::arange(n, at::kLong).remainder(17).to(at::kFloat).mul(static_cast<float>(rank + 1));
}
at::Tensor integer_sum(int p, int64_t n) {
  return at::arange(n, at::kLong).remainder(17).to(at::kFloat).mul(static_cast<float>(p * (p + 1) / 2));
}

// All-gather values: element i (owned by rank r) is (r + 1) * 100000 + i, exact in fp32 for these sizes
// and different on every rank, so a chunk landing in the wrong place shows.
at::Tensor gathered_values(const std::vector<std::pair<int64_t, int64_t>>& bounds, int64_t n) {
  at::Tensor out = at::arange(n, at::kLong).to(at::kFloat);
  for (size_t r = 0; r < bounds.size(); ++r) chunk_of(out, bounds[r]).add_(static_cast<float>((r + 1) * 100000));
  return out;
}

void check_size(Comm& comm, Checks& checks, int64_t n, std::vector<ExpectedRecord>& expected) {
  const int p = comm.size(), r = comm.rank();
  const auto bounds = Comm::chunk_bounds(n, p);
  const int64_t mine = bounds[r].second - bounds[r].first;
  const bool divisible = n % p == 0;
  const int64_t fp32 = 4;

  // --- reduce_scatter, integer-valued: ring vs all_reduce chunk vs closed form vs backend ---
  {
    at::Tensor input = integer_input(r, n);
    at::Tensor ring_out = at::empty({mine}, at::kFloat);
    comm.reduce_scatter(ring_out, input, CommAlgorithm::ring, "test.rs.ring").wait();
    expected.push_back({"reduce_scatter", "ring", "float32", n * fp32, size_label("reduce_scatter ring", n, p)});
    at::Tensor reduced = input.clone();
    comm.all_reduce(reduced, "test.rs.reference").wait();
    expected.push_back({"all_reduce", "backend", "float32", n * fp32, size_label("all_reduce reference", n, p)});

    const std::string label = size_label("reduce_scatter", n, p);
    std::string diff = bit_difference(ring_out, chunk_of(reduced, bounds[r]).contiguous());
    checks.verdict(diff.empty(), label + ": ring == all_reduce chunk (bit-exact)", diff);
    diff = bit_difference(ring_out, chunk_of(integer_sum(p, n), bounds[r]).contiguous());
    checks.verdict(diff.empty(), label + ": ring == closed-form sum (bit-exact)", diff);
    if (!input.equal(integer_input(r, n))) checks.verdict(false, label + ": ring modified its input");
    if (divisible) {
      at::Tensor backend_out = at::empty({mine}, at::kFloat);
      comm.reduce_scatter(backend_out, input, CommAlgorithm::backend, "test.rs.backend").wait();
      expected.push_back(
          {"reduce_scatter", "backend", "float32", n * fp32, size_label("reduce_scatter backend", n, p)});
      diff = bit_difference(ring_out, backend_out);
      checks.verdict(diff.empty(), label + ": ring == backend reduce_scatter (bit-exact)", diff);
    }
  }

  // --- all_gather: ring vs expected concatenation vs backend ---
  {
    const at::Tensor want = gathered_values(bounds, n);
    at::Tensor input = chunk_of(want, bounds[r]).clone();
    at::Tensor ring_out = at::full({n}, -1.0f, at::kFloat);
    comm.all_gather(ring_out, input, CommAlgorithm::ring, "test.ag.ring").wait();
    expected.push_back({"all_gather", "ring", "float32", n * fp32, size_label("all_gather ring", n, p)});
    const std::string label = size_label("all_gather", n, p);
    std::string diff = bit_difference(ring_out, want);
    checks.verdict(diff.empty(), label + ": ring == expected concatenation (bit-exact)", diff);
    if (divisible) {
      at::Tensor backend_out = at::full({n}, -1.0f, at::kFloat);
      comm.all_gather(backend_out, input, CommAlgorithm::backend, "test.ag.backend").wait();
      expected.push_back({"all_gather", "backend", "float32", n * fp32, size_label("all_gather backend", n, p)});
      diff = bit_difference(ring_out, backend_out);
      checks.verdict(diff.empty(), label + ": ring == backend all_gather (bit-exact)", diff);
    }
  }

  // --- reduce_scatter, random fp32: ring vs all_reduce chunk within rounding ---
  {
    at::manual_seed(1000 * n + r);  // different data on every rank
    at::Tensor input = at::randn({n}, at::kFloat);
    at::Tensor ring_out = at::empty({mine}, at::kFloat);
    comm.reduce_scatter(ring_out, input, CommAlgorithm::ring, "test.rs.random.ring").wait();
    expected.push_back({"reduce_scatter", "ring", "float32", n * fp32, size_label("reduce_scatter ring random", n, p)});
    at::Tensor reduced = input.clone();
    comm.all_reduce(reduced, "test.rs.random.reference").wait();
    expected.push_back({"all_reduce", "backend", "float32", n * fp32, size_label("all_reduce random reference", n, p)});
    const at::Tensor want = chunk_of(reduced, bounds[r]);
    // rtol 1e-6 as asked; atol 1e-6 because a sum of p ~N(0,1) values can cancel to ~0, where a
    // one-ulp difference of the addends (~1e-7 each) is all that remains.
    const bool close = at::allclose(ring_out, want, 1e-6, 1e-6);
    std::string detail;
    if (!close && mine > 0)
      detail = "max abs difference " + std::to_string((ring_out - want).abs().max().item<float>());
    checks.verdict(close, size_label("reduce_scatter random fp32", n, p) + ": ring ~= all_reduce chunk (rtol 1e-6)",
                   detail);
  }
}

// One record per call, in call order, with the fields the caller can predict.
void check_records(Comm& comm, Checks& checks, size_t first, const std::vector<ExpectedRecord>& expected) {
  const auto records = comm.records();
  const size_t issued = records.size() - first;
  checks.verdict(issued == expected.size(), "records: one per collective issued",
                 std::to_string(issued) + " records for " + std::to_string(expected.size()) + " collectives");
  int bad = 0;
  for (size_t i = 0; i < expected.size() && first + i < records.size(); ++i) {
    const auto& got = records[first + i];
    const auto& want = expected[i];
    std::string problem;
    if (got.op != want.op) problem += " op=" + got.op + " (expected " + want.op + ")";
    if (got.algorithm != want.algorithm)
      problem += " algorithm=" + got.algorithm + " (expected " + want.algorithm + ")";
    if (got.dtype != want.dtype) problem += " dtype=" + got.dtype + " (expected " + want.dtype + ")";
    if (got.bytes != want.bytes)
      problem += " bytes=" + std::to_string(got.bytes) + " (expected " + std::to_string(want.bytes) + ")";
    if (got.group_size != comm.size()) problem += " group_size=" + std::to_string(got.group_size);
    if (got.group != "world") problem += " group=" + got.group;
    if (i > 0 && got.seq != records[first + i - 1].seq + 1) problem += " seq not consecutive";
    if (!(got.start_us > 0)) problem += " start_us=" + std::to_string(got.start_us);
    if (!(got.end_us >= got.start_us)) problem += " end_us=" + std::to_string(got.end_us) + " < start_us";
    if (!problem.empty() && bad++ < 5)
      checks.verdict(false, "record " + std::to_string(got.seq) + " of " + want.what, problem);
  }
  checks.verdict(bad == 0, "records: op, algorithm, dtype, bytes, group, seq and times as issued",
                 bad ? std::to_string(bad) + " records wrong" : "");
}

void check_replicas(Comm& comm, Checks& checks) {
  at::manual_seed(7);  // the same "parameters" on every rank
  std::vector<std::pair<std::string, at::Tensor>> named = {{"blocks.0.attn.weight", at::randn({16, 16})},
                                                           {"blocks.0.attn.bias", at::randn({16})},
                                                           {"head.weight", at::randn({5, 16})}};
  try {
    dtlab::check_replicas_identical(comm, named, "after identical init");
    checks.verdict(true, "replica check: identical tensors pass");
  } catch (const std::exception& e) {
    checks.verdict(false, "replica check: identical tensors pass", e.what());
  }
  // The check is one recorded all_gather of one int64 hash per tensor from every rank.
  const auto last = comm.records().back();
  const int64_t gathered_bytes = static_cast<int64_t>(named.size()) * comm.size() * 8;
  checks.verdict(
      last.op == "all_gather" && last.algorithm == "backend" && last.dtype == "int64" && last.bytes == gathered_bytes &&
          last.tag == "replica_check" && last.end_us >= last.start_us,
      "replica check: recorded as one int64 all_gather of " + std::to_string(gathered_bytes) + " bytes",
      last.op + " " + last.algorithm + " " + last.dtype + " " + std::to_string(last.bytes) + " bytes, tag " + last.tag);

  if (comm.size() < 2) return;
  if (comm.rank() == 1) named[1].second[3] += 1.0f;  // one element off, on rank 1 only
  try {
    dtlab::check_replicas_identical(comm, named, "after corrupting rank 1");
    checks.verdict(false, "replica check: corruption on rank 1 detected on every rank", "no ReplicaMismatch thrown");
  } catch (const dtlab::ReplicaMismatch& e) {
    const std::string message = e.what();
    const bool names_both =
        message.find("rank 1") != std::string::npos && message.find("'blocks.0.attn.bias'") != std::string::npos;
    checks.verdict(names_both,
                   "replica check: corruption on rank 1 detected on every rank, naming rank 1 and "
                   "the parameter",
                   message);
  }
}

// The hierarchical all-reduce at `ranks_per_node` against the flat one, for every size; then its records.
void check_hierarchical(dtlab::DistWorld& world, Checks& checks, int ranks_per_node) {
  dtlab::HierarchicalComm two_level(world, ranks_per_node);
  Comm& flat = world.comm();
  const int p = flat.size(), r = flat.rank(), k = ranks_per_node;
  const std::string shape = std::to_string(p / k) + " nodes x " + std::to_string(k);
  const size_t intra_first = two_level.intra().record_count(), inter_first = two_level.inter().record_count();
  for (int64_t n : kSizes) {
    const std::string label = size_label("hierarchical all_reduce", n, p) + " on " + shape;
    at::Tensor mine = integer_input(r, n);
    two_level.all_reduce(mine, "test.hier").wait();
    at::Tensor reference = integer_input(r, n);
    flat.all_reduce(reference, "test.hier.reference").wait();
    std::string diff = bit_difference(mine, reference);
    checks.verdict(diff.empty(), label + ": == flat all_reduce (bit-exact)", diff);
    diff = bit_difference(mine, integer_sum(p, n));
    checks.verdict(diff.empty(), label + ": == closed-form sum (bit-exact)", diff);

    at::manual_seed(1000 + r);
    at::Tensor random = at::randn({n});
    at::Tensor random_reference = random.clone();
    two_level.all_reduce(random, "test.hier.random").wait();
    flat.all_reduce(random_reference, "test.hier.random.reference").wait();
    const bool close = at::allclose(random, random_reference, 1e-6, 1e-6);
    checks.verdict(
        close,
        size_label("hierarchical all_reduce random fp32", n, p) + " on " + shape + ": ~= flat all_reduce (rtol 1e-6)",
        close ? "" : "max abs difference " + std::to_string((random - random_reference).abs().max().item<float>()));
  }
  // Per call: reduce_scatter + all_gather inside the node, one all_reduce of this rank's chunk across nodes.
  const auto intra = two_level.intra().records_since(intra_first);
  const auto inter = two_level.inter().records_since(inter_first);
  const size_t calls = 2 * kSizes.size();
  checks.verdict(intra.size() == 2 * calls && inter.size() == calls, "hierarchical records: 2 intra + 1 inter per call",
                 std::to_string(intra.size()) + " intra, " + std::to_string(inter.size()) + " inter for " +
                     std::to_string(calls) + " calls");
  int bad = 0;
  const std::string node_group = "node." + std::to_string(r / k), cross_group = "cross." + std::to_string(r % k);
  for (size_t i = 0; i < intra.size() && i / 2 < calls; ++i) {
    const int64_t n = kSizes[i / 4];
    const bool scatter = i % 2 == 0;
    const auto& rec = intra[i];
    bad += rec.op != (scatter ? "reduce_scatter" : "all_gather") || rec.level != "intra" || rec.group != node_group ||
           rec.group_size != k || rec.bytes != n * 4 || rec.algorithm != "ring";
  }
  for (size_t i = 0; i < inter.size(); ++i) {
    const int64_t n = kSizes[i / 2];
    const auto bounds = Comm::chunk_bounds(n, k)[static_cast<size_t>(r % k)];
    const auto& rec = inter[i];
    bad += rec.op != "all_reduce" || rec.level != "inter" || rec.group != cross_group || rec.group_size != p / k ||
           rec.bytes != (bounds.second - bounds.first) * 4;
  }
  checks.verdict(bad == 0, "hierarchical records: op, level, group, size and bytes per level",
                 std::to_string(bad) + " records differ");

  // Over kPieceBytes the buffer goes in pipelined pieces: 2 whole pieces and an uneven rest, 3 of each record.
  const int64_t piece = dtlab::HierarchicalComm::kPieceBytes / 4, n = 2 * piece + 5;
  const size_t inter_before = two_level.inter().record_count();
  at::Tensor mine = integer_input(r, n);
  two_level.all_reduce(mine, "test.hier.pieces").wait();
  const std::string diff = bit_difference(mine, integer_sum(p, n));
  checks.verdict(
      diff.empty(),
      size_label("hierarchical all_reduce", n, p) + " in 3 pieces on " + shape + ": == closed-form sum (bit-exact)",
      diff);
  const auto piece_records = two_level.inter().records_since(inter_before);
  checks.verdict(piece_records.size() == 3, "hierarchical pieces: one inter-node all_reduce per piece",
                 std::to_string(piece_records.size()) + " records");
}

// The hierarchical reduce-scatter and all-gather at `ranks_per_node` (the sharded strategies' collectives): this
// rank's chunk is chunk_index() = l*M + m, whose sum the flat all-reduce gives too; the gathered buffer has chunk i
// from the rank whose chunk index is i. Then their records: two levels per call, each on its own group.
void check_hierarchical_shards(dtlab::DistWorld& world, Checks& checks, int ranks_per_node) {
  const std::string prefix = "shards" + std::to_string(ranks_per_node) + ".";  // beside check_hierarchical's groups
  dtlab::HierarchicalComm two_level(world, ranks_per_node, prefix);
  Comm& flat = world.comm();
  const int p = flat.size(), r = flat.rank(), k = ranks_per_node, m = p / k;
  const int chunk = two_level.chunk_index();
  const std::string shape = std::to_string(m) + " nodes x " + std::to_string(k);
  // Every rank holds a different chunk: the chunk indices of the world are a permutation of 0 .. p-1.
  at::Tensor indices = at::zeros({p}, at::kFloat);
  indices[r] = static_cast<float>(chunk);
  flat.all_reduce(indices, "test.hier.chunks").wait();
  const bool permutation = at::equal(std::get<0>(indices.sort()), at::arange(p, at::kFloat));
  checks.verdict(permutation && chunk == (r % k) * m + r / k, "hierarchical chunks on " + shape + ": l*M + m",
                 "rank " + std::to_string(r) + " holds chunk " + std::to_string(chunk));
  const size_t intra_first = two_level.intra().record_count(), inter_first = two_level.inter().record_count();
  const std::vector<int64_t> chunk_sizes = {1, 7, 1000, 16411};
  for (int64_t c : chunk_sizes) {
    const int64_t n = c * p;
    const std::string label = "hierarchical reduce_scatter n=" + std::to_string(n) + " on " + shape;
    at::Tensor input = integer_input(r, n), mine = at::full({c}, -1.0f);
    two_level.reduce_scatter(mine, input, "test.hier.rs").wait();
    std::string diff = bit_difference(mine, integer_sum(p, n).narrow(0, chunk * c, c));
    checks.verdict(diff.empty(), label + ": == closed-form sum of chunk l*M+m (bit-exact)", diff);

    at::manual_seed(2000 + r);
    at::Tensor random = at::randn({n}), summed = random.clone(), reduced = at::empty({c});
    two_level.reduce_scatter(reduced, random, "test.hier.rs.random").wait();
    flat.all_reduce(summed, "test.hier.rs.reference").wait();
    const at::Tensor want = summed.narrow(0, chunk * c, c);
    const bool close = at::allclose(reduced, want, 1e-6, 1e-6);
    checks.verdict(close, label + " random fp32: ~= flat all_reduce's chunk (rtol 1e-6)",
                   close ? "" : "max abs difference " + std::to_string((reduced - want).abs().max().item<float>()));

    // Element i of chunk j is (j + 1) * 100000 + i: a chunk in the wrong place shows.
    const at::Tensor expected = at::arange(n, at::kLong).to(at::kFloat) +
                                at::arange(n, at::kLong).div(c, "floor").add(1).mul(100000).to(at::kFloat);
    at::Tensor own = expected.narrow(0, chunk * c, c).clone(), gathered = at::full({n}, -1.0f);
    two_level.all_gather(gathered, own, "test.hier.ag").wait();
    diff = bit_difference(gathered, expected);
    checks.verdict(diff.empty(),
                   "hierarchical all_gather n=" + std::to_string(n) + " on " + shape + ": chunk i from chunk index i",
                   diff);
  }
  // Per reduce-scatter: a ring inside the node (the whole buffer) then across nodes (the node's block); per
  // all-gather: the backend's across nodes (the block) then inside the node (the whole buffer).
  const auto intra = two_level.intra().records_since(intra_first);
  const auto inter = two_level.inter().records_since(inter_first);
  const std::string node_group = prefix + "node." + std::to_string(r / k),
                    cross_group = prefix + "cross." + std::to_string(r % k);
  int bad = 0;
  size_t expected_calls = 0;
  for (size_t i = 0; i < chunk_sizes.size(); ++i) {
    const int64_t n = chunk_sizes[i] * p;
    for (int call = 0; call < 3; ++call, ++expected_calls) {
      const bool scatter = call < 2;
      const size_t at = expected_calls;
      if (at >= intra.size() || at >= inter.size()) {
        ++bad;
        continue;
      }
      const auto& in_node = intra[at];
      const auto& across = inter[at];
      const std::string op = scatter ? "reduce_scatter" : "all_gather";
      const std::string algorithm = scatter ? "ring" : "backend";
      bad += in_node.op != op || in_node.algorithm != algorithm || in_node.level != "intra" ||
             in_node.group != node_group || in_node.group_size != k || in_node.bytes != n * 4;
      bad += across.op != op || across.algorithm != algorithm || across.level != "inter" ||
             across.group != cross_group || across.group_size != m || across.bytes != n / k * 4;
    }
  }
  checks.verdict(bad == 0 && intra.size() == expected_calls && inter.size() == expected_calls,
                 "hierarchical shard records on " + shape + ": op, algorithm, level, group, size and bytes per level",
                 std::to_string(bad) + " records differ; " + std::to_string(intra.size()) + " intra and " +
                     std::to_string(inter.size()) + " inter for " + std::to_string(expected_calls) + " calls");
  // A buffer that is not M*K chunks is refused, naming the rule.
  at::Tensor odd = at::zeros({p * 3 + 1}), one = at::zeros({3});
  try {
    two_level.reduce_scatter(one, odd, "test.hier.bad");
    checks.verdict(false, "hierarchical reduce_scatter refuses a buffer of the wrong size", "accepted");
  } catch (const std::invalid_argument& e) {
    checks.verdict(std::string(e.what()).find("times the chunk") != std::string::npos,
                   "hierarchical reduce_scatter refuses a buffer of the wrong size", e.what());
  }
}

// Ring calls run on the Comm's ring thread: the caller is back at once, even when a peer is late.
void check_ring_async(Comm& comm, Checks& checks) {
  using clock = std::chrono::steady_clock;
  const int p = comm.size(), r = comm.rank();
  const int64_t n = 4099;  // uneven over every world size tested
  const auto bounds = Comm::chunk_bounds(n, p);
  const int64_t mine = bounds[r].second - bounds[r].first;
  const auto late = std::chrono::milliseconds(300);
  if (r == p - 1) std::this_thread::sleep_for(late);
  at::Tensor input = integer_input(r, n), reduced = at::empty({mine}, at::kFloat);
  at::Tensor gathered = at::full({n}, -1.0f, at::kFloat);
  at::Tensor own = chunk_of(gathered_values(bounds, n), bounds[r]).contiguous();
  const auto issued = clock::now();
  CommHandle rs = comm.reduce_scatter(reduced, input, CommAlgorithm::ring, "test.async.rs");
  CommHandle ag = comm.all_gather(gathered, own, CommAlgorithm::ring, "test.async.ag");
  const double return_ms = std::chrono::duration<double, std::milli>(clock::now() - issued).count();
  ag.wait();  // issue order: the reduce-scatter is done too
  rs.wait();
  const double waited_ms = std::chrono::duration<double, std::milli>(clock::now() - issued).count();
  if (r == 0) {
    checks.verdict(return_ms < 150.0,
                   "ring async: two ring calls return before the late rank joins (< 150 ms; it is 300 ms late)",
                   std::to_string(return_ms) + " ms to return");
    checks.verdict(waited_ms >= 200.0, "ring async: the wait covers the late rank (>= 200 ms)",
                   std::to_string(waited_ms) + " ms to the end of the waits");
  }
  std::string diff = bit_difference(reduced, chunk_of(integer_sum(p, n), bounds[r]).contiguous());
  checks.verdict(diff.empty(), "ring async: reduce_scatter issued without waiting == closed-form sum (bit-exact)",
                 diff);
  diff = bit_difference(gathered, gathered_values(bounds, n));
  checks.verdict(diff.empty(), "ring async: all_gather issued behind it == expected concatenation (bit-exact)", diff);
}

// The --ring-failure job (see the top of the file). Ends the process itself: the peer is gone, so the world's
// orderly shutdown is not what is being checked.
[[noreturn]] void run_ring_failure(Comm& comm) {
  using clock = std::chrono::steady_clock;
  if (comm.rank() != 0) {
    std::printf("comm_rank: rank %d leaves the job\n", comm.rank());
    std::fflush(stdout);
    std::_Exit(0);
  }
  Checks checks(0);
  const int64_t n = int64_t{1} << 20;
  at::Tensor input = at::ones({n}, at::kFloat), reduced = at::empty({n / 2}, at::kFloat);
  at::Tensor gathered = at::empty({n}, at::kFloat), own = at::ones({n / 2}, at::kFloat);
  CommHandle rs = comm.reduce_scatter(reduced, input, CommAlgorithm::ring, "test.lost.rs");
  CommHandle ag = comm.all_gather(gathered, own, CommAlgorithm::ring, "test.lost.ag");
  auto error_of = [](CommHandle& handle) -> std::string {
    try {
      handle.wait();
    } catch (const std::exception& e) {
      return e.what();
    }
    return "";
  };
  const auto issued = clock::now();
  const std::string first = error_of(rs);
  const auto first_failed = clock::now();
  const std::string second = error_of(ag);
  const double first_s = std::chrono::duration<double>(first_failed - issued).count();
  const double second_ms = std::chrono::duration<double, std::milli>(clock::now() - first_failed).count();
  std::printf("comm_rank: the reduce-scatter's error (%.2f s): %s\ncomm_rank: the all-gather's error (%.1f ms): %s\n",
              first_s, first.c_str(), second_ms, second.c_str());
  checks.verdict(first.find("reduce_scatter 'test.lost.rs'") != std::string::npos,
                 "ring failure: the reduce-scatter on the lost peer fails, naming itself", first);
  checks.verdict(
      second.find("all_gather 'test.lost.ag'") != std::string::npos &&
          second.find("not run: an earlier ring on this group, reduce_scatter 'test.lost.rs'") != std::string::npos,
      "ring failure: the all-gather queued behind it is not run and names the reduce-scatter", second);
  std::printf(checks.failures() == 0 ? "comm_rank: ring failure checks passed\n"
                                     : "comm_rank: ring failure checks failed\n");
  std::fflush(stdout);
  std::_Exit(checks.failures() == 0 ? 0 : 1);
}

// all_to_all with uneven splits, some of them empty: rank `from` sends (from + 2·to) mod 3 rows of 3 elements to rank
// `to`, each element encoding (from, to, row, column); every rank gets every sender's rows in rank order, bit-exact,
// and records one call with the bytes it sent. Splits that name the wrong number of ranks are refused on every rank
// before any issues the call.
int run(bool ring_failure) {
  const dtlab::RankEnv env = dtlab::discover_rank_env({}, dtlab::current_environment());
  if (env.world_size < 2) {
    std::fprintf(stderr,
                 "comm_rank: needs a job of >= 2 ranks (run: dtlab launch -n N comm_rank); got %s, "
                 "world size %d\n",
                 env.launcher.c_str(), env.world_size);
    return 1;
  }
  dtlab::RendezvousOptions options;
  options.timeout = std::chrono::seconds(30);
  dtlab::DistWorld world(env, options);
  Comm& comm = world.comm();
  if (ring_failure) run_ring_failure(comm);
  Checks checks(comm.rank());
  std::printf("comm_rank: rank %d of %d (launcher %s)\n", comm.rank(), comm.size(), env.launcher.c_str());

  const size_t first_record = comm.record_count();
  std::vector<ExpectedRecord> expected;
  for (int64_t n : kSizes) check_size(comm, checks, n, expected);
  check_records(comm, checks, first_record, expected);
  check_ring_async(comm, checks);
  dtlab::comm_checks::check_all_to_all(comm, checks);
  dtlab::comm_checks::check_along_a_dimension(comm, checks);
  dtlab::comm_checks::check_batch_isend_irecv(comm, checks);
  check_replicas(comm, checks);
  if (comm.size() == 4) check_hierarchical(world, checks, 2);         // 2 nodes x 2
  if (comm.size() == 6) check_hierarchical(world, checks, 3);         // 2 nodes x 3: uneven chunks
  if (comm.size() == 4) check_hierarchical_shards(world, checks, 2);  // 2 nodes x 2
  if (comm.size() == 6) {
    check_hierarchical_shards(world, checks, 3);  // 2 nodes x 3
    check_hierarchical_shards(world, checks, 2);  // 3 nodes x 2
  }

  // Agree on the verdict so every rank exits alike.
  const double failures_everywhere = world.all_reduce_sum(checks.failures());
  if (failures_everywhere > 0) {
    std::printf("comm_rank: %d check(s) failed on this rank, %.0f on all ranks\n", checks.failures(),
                failures_everywhere);
    return 1;
  }
  std::printf("comm_rank: all checks passed\n");
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const bool ring_failure = argc == 2 && std::string(argv[1]) == "--ring-failure";
  if (argc > 1 && !ring_failure) {
    std::fprintf(stderr, "comm_rank: unknown argument '%s' (the only one is --ring-failure)\n", argv[1]);
    return 2;
  }
  try {
    return run(ring_failure);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "comm_rank: error: %s\n", e.what());
    return 1;
  }
}
