// desync_rank.cpp: one rank of a `dtlab launch -n N build/bin/desync_rank [--check] [--ring-shape]` job that issues
// a fixed list of collectives on the world, to show the desync check (lab/comm/desync_check.hpp) on real processes
// (driven by dist_tests):
//   #0 all_reduce float32[1024] 'test.desync.a'      #1 broadcast root 0 float32[3,4] 'test.desync.b'
//   #2 all_gather float32[8] -> 8p 'test.desync.c'    ring #0 reduce_scatter float32[5p] -> 5 'test.desync.d'
//   #3 barrier                                        #4 all_reduce float64[1] 'test.desync.e'
//   #5 all_to_all float32[2] rows 'test.desync.f' (rank j sends j + 1 rows to each rank: the check compares the row
//      shape, so ranks that send different row counts agree)
// With --check the world checks every collective (instrument.check_collectives). A desync comes from
// DTLAB_INJECT_DESYNC (a rank skips or reshapes a backend call), or from --ring-shape: the last rank gives the ring
// reduce-scatter a buffer of 6p elements instead of 5p (the program's own bug). Without a desync every result is
// checked against its closed form and each rank prints "desync_rank: all collectives agreed"; with one, every rank
// throws from the collective where it was found, prints "desync_rank: error: <message>" and exits 1.
// `--time N` instead times N all-reduces of float32[1024] after 20 untimed ones and prints the mean per call (the
// check's cost per collective, docs/instrumentation.md).
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>
#include <vector>

#include <ATen/ATen.h>

#include "lab/comm/comm.hpp"
#include "lab/dist/dist_world.hpp"
#include "lab/dist/rank_env.hpp"

namespace {

using dtlab::Comm;
using dtlab::CommAlgorithm;

// Mean microseconds per all_reduce of float32[1024] over `calls` calls, after 20 untimed ones.
double time_all_reduce(Comm& comm, int calls) {
  at::Tensor t = at::ones({1024});
  for (int i = 0; i < 20; ++i) comm.all_reduce(t, "test.desync.warmup").wait();
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < calls; ++i) comm.all_reduce(t, "test.desync.timed").wait();
  return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count() / calls;
}

int run(bool check, bool ring_shape, int time_calls) {
  const dtlab::RankEnv env = dtlab::discover_rank_env({}, dtlab::current_environment());
  dtlab::RendezvousOptions options;
  options.timeout = std::chrono::seconds(20);
  options.check_collectives = check;
  dtlab::DistWorld world(env, options);
  Comm& comm = world.comm();
  const int p = comm.size(), r = comm.rank();
  std::printf("desync_rank: rank %d of %d, check %s\n", r, p, comm.checks_collectives() ? "on" : "off");
  std::fflush(stdout);
  if (time_calls > 0) {
    std::printf("desync_rank: %d all_reduce float32[1024], check %s: %.1f us per call\n", time_calls,
                check ? "on" : "off", time_all_reduce(comm, time_calls));
    return 0;
  }
  int failures = 0;
  auto verdict = [&](bool ok, const char* what) {
    if (!ok) ++failures;
    std::printf("%s %s\n", ok ? "ok  " : "FAIL", what);
  };

  at::Tensor a = at::full({1024}, static_cast<float>(r + 1));
  comm.all_reduce(a, "test.desync.a").wait();
  verdict(a.eq(p * (p + 1) / 2.0).all().item<bool>(), "all_reduce: the sum of every rank's r + 1");
  at::Tensor b = r == 0 ? at::arange(12, at::kFloat).reshape({3, 4}) : at::zeros({3, 4});
  comm.broadcast(b, 0, "test.desync.b").wait();
  verdict(at::equal(b, at::arange(12, at::kFloat).reshape({3, 4})), "broadcast: rank 0's tensor");
  at::Tensor mine = at::full({8}, static_cast<float>(r)), gathered = at::empty({8 * p});
  comm.all_gather(gathered, mine, CommAlgorithm::backend, "test.desync.c").wait();
  verdict(at::equal(gathered, at::arange(p, at::kFloat).repeat_interleave(8)), "all_gather: rank r's chunk is r");
  const int64_t per_rank = ring_shape && r == p - 1 ? 6 : 5;
  at::Tensor whole = at::ones({per_rank * p}), chunk = at::empty({per_rank});
  comm.reduce_scatter(chunk, whole, CommAlgorithm::ring, "test.desync.d").wait();
  verdict(chunk.eq(static_cast<float>(p)).all().item<bool>(), "ring reduce_scatter: p in every element");
  comm.barrier();
  at::Tensor e = at::full({1}, 1.0, at::kDouble);
  comm.all_reduce(e, "test.desync.e").wait();
  verdict(e.item<double>() == p, "all_reduce float64: p");
  std::vector<int64_t> sends(static_cast<size_t>(p), r + 1), receives;
  std::vector<at::Tensor> expected;
  for (int j = 0; j < p; ++j) {
    receives.push_back(j + 1);
    expected.push_back(at::full({j + 1, 2}, static_cast<float>(j)));
  }
  at::Tensor rows_out = at::empty({p * (p + 1) / 2, 2}), rows_in = at::full({p * (r + 1), 2}, static_cast<float>(r));
  comm.all_to_all(rows_out, rows_in, receives, sends, "test.desync.f").wait();
  verdict(at::equal(rows_out, at::cat(expected)), "all_to_all: rank j's j + 1 rows, in rank order");
  if (failures > 0) return 1;
  std::printf("desync_rank: all collectives agreed\n");
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  bool check = false, ring_shape = false;
  int time_calls = 0;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--check") {
      check = true;
    } else if (arg == "--ring-shape") {
      ring_shape = true;
    } else if (arg == "--time" && i + 1 < argc) {
      time_calls = std::atoi(argv[++i]);
    } else {
      std::fprintf(stderr, "desync_rank: unknown argument '%s' (--check, --ring-shape, --time N)\n", argv[i]);
      return 2;
    }
  }
  try {
    return run(check, ring_shape, time_calls);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "desync_rank: error: %s\n", e.what());
    return 1;
  }
}
