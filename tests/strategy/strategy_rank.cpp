// strategy_rank.cpp: one rank of a parity check (run under `dtlab launch -n W`).
//
// Each rank first trains the single-process reference locally (same seed, same global batch, same
// optimizer), keeping the loss and every parameter after each step; then it trains the requested
// strategy across the job and compares after every step: loss, gradient norm (before clipping) and every
// (gathered) parameter within fp32 tolerance (rtol 1.3e-6, atol 1e-5). The gradient norm is what catches a wrong
// scale (a missing 1/world or 1/accumulation, replicas summed instead of averaged): AdamW's update is nearly
// scale-invariant per element and clipping rescales large norms, so parameters alone can hide it; SGD without
// clipping (train.grad_clip=0) carries any scale error into the parameters too. At the end the parameters must
// have moved from their initial values. Prints one verdict line per step on rank 0; exits 1 naming the first
// mismatch.
//
//   dtlab launch -n 2 strategy_rank [--check-replicas] [--corrupt-step N] [--digest] [--] key=value...
// --check-replicas  A2: after each step all-gather parameter hashes; replicas must be identical
// --corrupt-step N  the control: rank 1 corrupts one element of the state it checks after step N
// --digest          print "digest <step> <hex>" of the loss and parameter bits (bit-identity tests)
// --no-reference    skip the reference (digest-only runs)
// --tolerance bf16  bf16 tolerance (rtol 1.6e-2, atol 1e-5, PyTorch's own): losses and gradient norms
//                   elementwise; each parameter tensor by relative norm, ||p - ref|| <= rtol ||ref|| + atol sqrt(n).
//                   Elementwise checks are meaningless here: AdamW normalises each element's update, so an
//                   element whose tiny gradient rounds differently in bf16 moves by ~lr either way. The strategy
//                   and the reference both compute in bf16; they differ by where partial sums are rounded to bf16
//                   (gathered vs local, reduce-scatter order), i.e. a few bf16 ulps (2^-8 = 3.9e-3 each).
// --tolerance fp16  the same with rtol 1e-3 (fp16 has 3 more mantissa bits than bf16).
// --params-norm-wise  fp32 tolerance, each parameter tensor by relative norm as above (losses and gradient norms
//                   still elementwise): tensor parallelism under AdamW, where the split matmuls sum in another order
//                   and an element whose gradient is near zero moves by a different fraction of lr (AdamW divides by
//                   its own tiny sqrt(v)); SGD cases check every element.
// --expect-dtype OP=DTYPE   every collective of OP issued by the strategy (tag "fsdp." / "ddp." /
//                   "zero1.") carried DTYPE (A4: intercepted from the comm records); repeatable
// --expect-skip N   dynamic loss scaling: step N is skipped on every rank, the scale halves and the
//                   parameters (hence optimizer state) are unchanged by it (use with DTLAB_INJECT_INF)
#include <cmath>
#include <cstdio>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "lab/comm/comm.hpp"
#include "lab/config.hpp"
#include "lab/dist/dist_world.hpp"
#include "lab/dist/rank_env.hpp"
#include "lab/dist/replica_check.hpp"
#include "lab/model.hpp"
#include "lab/train/tensor_parallel_plan.hpp"
#include "lab/train/trainer.hpp"
#include "strategies/catalog.hpp"
#include "strategies/registry.hpp"

namespace {

using NamedTensors = std::vector<std::pair<std::string, at::Tensor>>;

// Under tensor parallelism (parallel.tp = t) a rank holds a slice of each split parameter
// (lab/train/tensor_parallel_plan.hpp): the part of the reference's whole tensor it is compared with.
at::Tensor tp_slice(const std::string& name, const at::Tensor& whole, int64_t t, int64_t tp_rank) {
  const int axis = dtlab::tensor_parallel_axis(name);
  if (t == 1 || axis < 0) return whole;
  const int64_t part = whole.size(axis) / t;
  return whole.narrow(axis, tp_rank * part, part);
}

struct Args {
  bool check_replicas = false, digest = false, reference = true;
  int corrupt_step = -1, expect_skip = -1;
  double rtol = 1.3e-6, atol = 1e-5;
  bool norm_wise = false;
  std::vector<std::pair<std::string, std::string>> expect_dtypes;
  std::vector<std::string> overrides;
};

Args parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    const std::string s = argv[i];
    if (s == "--check-replicas")
      a.check_replicas = true;
    else if (s == "--digest")
      a.digest = true;
    else if (s == "--no-reference")
      a.reference = false;
    else if (s == "--corrupt-step" && i + 1 < argc)
      a.corrupt_step = std::atoi(argv[++i]);
    else if (s == "--expect-skip" && i + 1 < argc)
      a.expect_skip = std::atoi(argv[++i]);
    else if (s == "--tolerance" && i + 1 < argc && std::string(argv[i + 1]) == "bf16")
      a.rtol = 1.6e-2, a.norm_wise = true, ++i;
    else if (s == "--tolerance" && i + 1 < argc && std::string(argv[i + 1]) == "fp16")
      a.rtol = 1e-3, a.norm_wise = true, ++i;
    else if (s == "--params-norm-wise")
      a.norm_wise = true;
    else if (s == "--expect-dtype" && i + 1 < argc) {
      const std::string spec = argv[++i];
      a.expect_dtypes.emplace_back(spec.substr(0, spec.find('=')), spec.substr(spec.find('=') + 1));
    } else if (s == "--")
      continue;
    else
      a.overrides.push_back(s);
  }
  return a;
}

std::vector<std::string> with_defaults(const std::vector<std::string>& overrides) {
  std::vector<std::string> all = {"model.preset=tiny",        "train.steps=10",  "train.global_batch=8",
                                  "train.warmup_steps=2",     "train.threads=1", "train.lr=3e-3",
                                  "instrument.log_every=1000"};
  all.insert(all.end(), overrides.begin(), overrides.end());
  return all;
}

bool close(double got, double want, double rtol, double atol) {
  return std::abs(got - want) <= atol + rtol * std::abs(want);
}

}  // namespace

int main(int argc, char** argv) {
  const Args args = parse(argc, argv);
  try {
    const dtlab::RankEnv env = dtlab::discover_rank_env({}, dtlab::current_environment());
    dtlab::Config config = dtlab::load_config("", with_defaults(args.overrides), env.world_size);
    config.ranks_per_node = env.local_world_size;
    const bool main_rank = env.rank == 0;
    const int64_t tp = config.parallel.tp;
    const int64_t tp_rank = dtlab::device_mesh(config).coord(env.rank, dtlab::MeshDim::tp);

    // 1. The single-process reference, trained locally on every rank.
    std::vector<double> ref_loss, ref_grad_norm;
    std::vector<bool> ref_skipped;
    std::vector<NamedTensors> ref_state;
    if (args.reference) {
      std::vector<std::string> ref_overrides = args.overrides;
      for (const char* o :
           {"parallel.strategy=single", "parallel.offload=false", "parallel.activation_checkpointing=none",
            "precision.reduce_dtype=fp32", "parallel.shard_size=0", "precision.master_dtype=fp32",
            "precision.stochastic_rounding=false", "parallel.tp=1", "parallel.sequence_parallel=false", "parallel.pp=1",
            "parallel.pp_virtual_stages=1", "parallel.pp_split=", "parallel.pp_reshard_after_forward=false",
            "parallel.tp_placement=intra_node"})
        ref_overrides.push_back(o);
      const dtlab::Config ref_config = dtlab::load_config("", with_defaults(ref_overrides), 1);
      auto reference = dtlab::make_strategy("single");
      dtlab::SingleProcessWorld single;
      dtlab::TrainOptions ref_options;
      ref_options.print_steps = ref_options.print_config = false;
      ref_options.after_step = [&](int64_t, dtlab::Strategy& s) { ref_state.push_back(s.full_state()); };
      for (const auto& r :
           dtlab::train(ref_config, *reference, single, dtlab::device_mesh(ref_config), ref_options).steps) {
        ref_loss.push_back(r.loss);
        ref_grad_norm.push_back(r.grad_norm);
        ref_skipped.push_back(r.skipped);
      }
    }

    // 2. The strategy under test, across the job.
    dtlab::RendezvousOptions rendezvous;
    rendezvous.timeout = std::chrono::seconds(60);
    dtlab::DistWorld world(env, rendezvous);
    auto strategy = dtlab::make_strategy(config.parallel.strategy);
    dtlab::TrainOptions options;
    options.print_steps = options.print_config = false;
    int failures = 0;
    NamedTensors previous_state;
    double previous_scale = 0;
    options.after_step = [&](int64_t step, dtlab::Strategy& s) {
      NamedTensors state = s.full_state();
      if (args.expect_skip > 0) {
        if (step == args.expect_skip) {
          bool unchanged = s.step_skipped();
          for (size_t i = 0; i < state.size() && unchanged; ++i)
            unchanged = at::equal(state[i].second, previous_state[i].second);
          const double scale_now = s.loss_scale();
          std::printf("rank %d step %lld: skipped=%d, parameters %s, loss scale %g (before %g)\n", env.rank,
                      static_cast<long long>(step), s.step_skipped() ? 1 : 0, unchanged ? "unchanged" : "CHANGED",
                      scale_now, previous_scale);
          if (!unchanged) ++failures;
        } else if (s.step_skipped()) {
          ++failures;
          std::printf("rank %d step %lld: skipped unexpectedly\n", env.rank, static_cast<long long>(step));
        }
        if (step == args.expect_skip + 1 && !(s.loss_scale() == previous_scale * 0.5)) {
          ++failures;
          std::printf("rank %d: loss scale after the skip is %g, expected half of %g\n", env.rank, s.loss_scale(),
                      previous_scale);
        }
        previous_scale = step == args.expect_skip + 1 ? s.loss_scale() * 2 : s.loss_scale();
        previous_state = state;
      }
      if (args.reference) {
        // By name: a pipeline stage holds only its chunks' parameters (the reference's others have no partner).
        std::map<std::string, at::Tensor> want;
        for (const auto& [name, tensor] : ref_state[static_cast<size_t>(step - 1)]) want[name] = tensor;
        double worst = 0;
        std::string worst_name;
        for (size_t i = 0; i < state.size(); ++i) {
          const at::Tensor expected = tp_slice(state[i].first, want.at(state[i].first), tp, tp_rank);
          const bool ok = args.norm_wise ? (state[i].second - expected).norm().item<double>() <=
                                               args.rtol * expected.norm().item<double>() +
                                                   args.atol * std::sqrt(static_cast<double>(expected.numel()))
                                         : at::allclose(state[i].second, expected, args.rtol, args.atol);
          const double diff = (state[i].second - expected).abs().max().item<double>();
          if (diff > worst) worst = diff, worst_name = state[i].first;
          if (!ok) {
            ++failures;
            std::printf("rank %d step %lld: parameter %s differs from the reference: max |diff| %.3g\n", env.rank,
                        static_cast<long long>(step), state[i].first.c_str(), diff);
          }
        }
        if (main_rank)
          std::printf("step %lld: parameters max |diff| %.3g (%s)\n", static_cast<long long>(step), worst,
                      worst == 0 ? "bit-identical" : worst_name.c_str());
      }
      if (args.check_replicas) {
        if (env.rank == 1 && step == args.corrupt_step) {
          state[0].second.view({-1})[0] += 1e-3f;  // the control: one element on rank 1
        }
        dtlab::check_replicas_identical(world.comm(), state, "after step " + std::to_string(step));
      }
      if (args.digest && main_rank) {
        uint64_t h = 0;
        for (const auto& [name, t] : state) h = h * 1099511628211ULL ^ dtlab::tensor_hash(t);
        std::printf("digest %lld %016llx\n", static_cast<long long>(step), static_cast<unsigned long long>(h));
      }
      std::fflush(stdout);
    };
    const auto outcome = dtlab::train(config, *strategy, world, dtlab::device_mesh(config), options);

    if (args.reference) {
      for (size_t i = 0; i < outcome.steps.size(); ++i) {
        const auto& step = outcome.steps[i];
        if (step.skipped || ref_skipped[i]) {  // the reference scales its loss alike: both skip, or it is a bug
          const bool same = step.skipped == ref_skipped[i];
          if (!same) ++failures;
          std::printf("rank %d step %zu: skipped by the loss scaler (reference: %s) %s\n", env.rank, i + 1,
                      ref_skipped[i] ? "skipped too" : "not skipped", same ? "ok" : "MISMATCH");
          continue;
        }
        const bool loss_ok = close(step.loss, ref_loss[i], args.rtol, args.atol);
        const bool norm_ok = close(step.grad_norm, ref_grad_norm[i], args.rtol, args.atol);
        if (!loss_ok) ++failures;
        if (!norm_ok) ++failures;
        if (main_rank || !loss_ok || !norm_ok)
          std::printf("rank %d step %zu: loss %.8f vs reference %.8f %s | grad norm %.8g vs reference %.8g %s\n",
                      env.rank, i + 1, step.loss, ref_loss[i], loss_ok ? "ok" : "MISMATCH", step.grad_norm,
                      ref_grad_norm[i], norm_ok ? "ok" : "MISMATCH");
      }
      // The parameters moved from their initial values (a frozen model cannot pass).
      dtlab::GPT initial(config.model, config.train.seed);
      const NamedTensors final_state = strategy->full_state();
      std::map<std::string, at::Tensor> init_params;
      for (const dtlab::ParamRef& p : initial.parameters()) init_params[p.name] = *p.tensor;
      size_t moved = 0;
      for (const auto& [name, tensor] : final_state)
        moved += !at::equal(tensor, tp_slice(name, init_params.at(name), tp, tp_rank));
      if (moved < final_state.size()) {
        ++failures;
        std::printf("rank %d: only %zu of %zu parameters moved from their initial values\n", env.rank, moved,
                    final_state.size());
      }
    }
    if (args.digest && main_rank)
      for (const auto& r : outcome.steps) {
        uint64_t bits;
        std::memcpy(&bits, &r.loss, sizeof bits);
        std::printf("loss-bits %lld %016llx\n", static_cast<long long>(r.step), static_cast<unsigned long long>(bits));
      }
    // A4: the dtype of every collective the strategy issued, intercepted from the comm records.
    for (const auto& [op, dtype] : args.expect_dtypes) {
      int seen = 0;
      std::vector<dtlab::CollectiveRecord> records;
      for (dtlab::Comm* c : world.all_comms())
        for (auto& r : c->records()) records.push_back(r);
      for (const auto& r : records) {
        const bool strategy_tag =
            r.tag.rfind("fsdp.", 0) == 0 || r.tag.rfind("ddp.", 0) == 0 || r.tag.rfind("zero1.", 0) == 0;
        if (!strategy_tag || r.op != op) continue;
        ++seen;
        if (r.dtype != dtype) {
          ++failures;
          std::printf("rank %d: %s '%s' carried %s, expected %s\n", env.rank, op.c_str(), r.tag.c_str(),
                      r.dtype.c_str(), dtype.c_str());
        }
      }
      if (seen == 0) {
        ++failures;
        std::printf("rank %d: no %s was issued by the strategy\n", env.rank, op.c_str());
      } else if (main_rank) {
        std::printf("dtype check: %d %s collectives, all %s\n", seen, op.c_str(), dtype.c_str());
      }
    }
    // Which links the strategy's gradient and parameter collectives crossed: the records' levels (world = flat; intra
    // and inter = the two levels of a hierarchical collective, lab/comm/hierarchical.hpp).
    if (main_rank) {
      std::map<std::string, int> by_level = {{"world", 0}, {"intra", 0}, {"inter", 0}};
      for (dtlab::Comm* c : world.all_comms())
        for (const auto& r : c->records())
          if (r.op != "broadcast" &&  // DDP's initial broadcast of the parameters is flat in every form
              (r.tag.rfind("fsdp.", 0) == 0 || r.tag.rfind("ddp.", 0) == 0 || r.tag.rfind("zero1.", 0) == 0))
            ++by_level[r.level];
      std::printf("strategy collectives by level: world %d intra %d inter %d\n", by_level["world"], by_level["intra"],
                  by_level["inter"]);
    }
    // The seam: the strategy's data-parallel layout agrees with its spec and covers the world.
    const dtlab::ParallelLayout layout = strategy->layout();
    const int64_t model_parallel = dtlab::device_mesh(config).dims().model_parallel();
    if (layout.dp_size != dtlab::data_parallel_size(config) || layout.dp_size * model_parallel != env.world_size) {
      ++failures;
      std::printf("rank %d: layout() reports dp %d beside %lld model-parallel ranks, the spec says dp %lld, world %d\n",
                  env.rank, layout.dp_size, static_cast<long long>(model_parallel),
                  static_cast<long long>(dtlab::data_parallel_size(config)), env.world_size);
    }
    const double all_failures = world.all_reduce_sum(failures);
    if (all_failures > 0) {
      std::printf("rank %d: parity FAILED (%d mismatches here, %g in the job)\n", env.rank, failures, all_failures);
      return 1;
    }
    if (main_rank)
      std::printf("%s: %s, world %d, %zu steps\n", args.reference ? "parity OK" : "checks OK (no reference run)",
                  config.parallel.strategy.c_str(), env.world_size, outcome.steps.size());
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "strategy_rank: %s\n", e.what());
    return 1;
  }
}
