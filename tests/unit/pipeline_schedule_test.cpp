// pipeline_schedule_test.cpp: the pipeline schedules' action lists (lab/pipeline_schedule.hpp) replayed on unit
// times against the published formulas — the bubble (P - 1)/m of GPipe and 1F1B (Narayanan et al. 2021),
// (P - 1)/(v·m) of the interleaved 1F1B, ZB-H1's (P - 1)(F + B - W) (Qi et al. 2023) — and the activations each
// rank keeps in flight (m for GPipe, P - r for 1F1B, Megatron-Core's interleaved count on rank 0, at most 1F1B's
// peak P for ZB-H1); that every
// action runs once and every transfer has its partner; and the refusals.
#include <gtest/gtest.h>

#include <map>
#include <stdexcept>
#include <string>
#include <tuple>

#include "lab/pipeline_schedule.hpp"
#include "lab/pipeline_split.hpp"

namespace dtlab {
namespace {

struct Case {
  PipeSchedule schedule;
  int stages, micro_batches, virtual_stages;
};

std::string name(const Case& c) {
  return std::string(pipe_schedule_name(c.schedule)) + " P" + std::to_string(c.stages) + " m" +
         std::to_string(c.micro_batches) + " v" + std::to_string(c.virtual_stages);
}

PipeTimes times_for(PipeSchedule schedule) {
  if (schedule == PipeSchedule::zero_bubble) return {.forward = 1, .backward = 1, .weight = 1};
  return {.forward = 1, .backward = 2};
}

std::vector<Case> cases() {
  std::vector<Case> out;
  for (int P : {2, 4})
    for (int factor : {1, 2, 4}) {
      out.push_back({PipeSchedule::gpipe, P, factor * P, 1});
      out.push_back({PipeSchedule::one_f_one_b, P, factor * P, 1});
      out.push_back({PipeSchedule::interleaved_1f1b, P, factor * P, 2});
      out.push_back({PipeSchedule::zero_bubble, P, factor * P, 1});
    }
  out.push_back({PipeSchedule::interleaved_1f1b, 4, 8, 4});
  out.push_back({PipeSchedule::gpipe, 4, 2, 1});  // gpipe takes fewer micro-batches than stages
  return out;
}

TEST(PipelineSchedule, ReplayedBubbleIsTheFormulas) {
  for (const Case& c : cases()) {
    const PipeShape shape{c.stages, c.micro_batches, c.virtual_stages};
    const PipeTimes times = times_for(c.schedule);
    const PipeReplay replay = replay_pipe_program(pipe_program(c.schedule, shape), shape, times);
    EXPECT_NEAR(replay.bubble_fraction(), predicted_bubble_fraction(c.schedule, shape, times), 1e-12) << name(c);
  }
}

TEST(PipelineSchedule, ActivationsInFlightPerRank) {
  for (const Case& c : cases()) {
    const PipeShape shape{c.stages, c.micro_batches, c.virtual_stages};
    const PipeReplay replay = replay_pipe_program(pipe_program(c.schedule, shape), shape, times_for(c.schedule));
    const int P = c.stages, m = c.micro_batches, v = c.virtual_stages;
    for (int r = 0; r < P; ++r) {
      const double peak = replay.peak_in_flight[static_cast<size_t>(r)];
      switch (c.schedule) {
        case PipeSchedule::gpipe:
          EXPECT_EQ(peak, m) << name(c) << " rank " << r;
          break;
        case PipeSchedule::one_f_one_b:
          EXPECT_EQ(peak, std::min(P - r, m)) << name(c) << " rank " << r;
          break;
        case PipeSchedule::interleaved_1f1b:
          // Megatron-Core: rank 0 warms up (P - 1)·2 + (v - 1)·P chunks and holds one more, i.e.
          // P·(1 + (P - 1)/(P·v)) micro-batches when every micro-batch group fills the warm-up.
          if (r == 0 && m * v > (P - 1) * 2 + (v - 1) * P) {
            EXPECT_DOUBLE_EQ(peak, P * (1.0 + (P - 1.0) / (P * v))) << name(c);
          }
          break;
        case PipeSchedule::zero_bubble:  // ZB-H1 keeps 1F1B's peak (P, the first stage's) on every rank
          EXPECT_LE(peak, P) << name(c) << " rank " << r;
          if (r == 0) {
            EXPECT_EQ(peak, P) << name(c);
          }
          break;
      }
    }
  }
}

// peak_kept_bytes: activations kept from F to the end of B, what B files for W from B to W (new gradients S from
// B's start, inputs I of its own activations past B's end). Schedules without W keep their in-flight peak and file
// nothing; zero bubble's first stage holds its P micro-batches' activations and the first B's gradients at once (the
// inputs are still inside the activations then), and no rank more than P stores (ZB-H1 runs no F while P
// micro-batches await their W).
TEST(PipelineSchedule, PeakKeptBytesCountsActivationsUntilBAndWhatBFilesUntilW) {
  const double A = 10, S = 1, I = 2;
  for (const Case& c : cases()) {
    const PipeShape shape{c.stages, c.micro_batches, c.virtual_stages};
    const PipeReplay replay = replay_pipe_program(pipe_program(c.schedule, shape), shape, times_for(c.schedule));
    const std::vector<double> kept = peak_kept_bytes(replay, A, S, I);
    for (int r = 0; r < c.stages; ++r) {
      const auto ru = static_cast<size_t>(r);
      if (c.schedule != PipeSchedule::zero_bubble) {
        EXPECT_DOUBLE_EQ(kept[ru], A * replay.peak_in_flight[ru] * c.virtual_stages) << name(c) << " rank " << r;
        continue;
      }
      const double held = peak_kept_bytes(replay, 1, 0)[ru];  // micro-batches whose B has not ended
      EXPECT_GE(kept[ru], A * held + S) << name(c) << " rank " << r;
      EXPECT_LE(kept[ru], A * held + (S + I) * c.stages) << name(c) << " rank " << r;  // ZB-H1: at most P un-W'd
      if (r == 0) {
        EXPECT_DOUBLE_EQ(kept[ru], A * c.stages + S) << name(c);
      }
    }
  }
  // P 2, m 4, the last stage: F0 B0 F1 B1 W0 F2 B2 W1 ...: at B1, micro-batch 1's activations and gradients beside
  // micro-batch 0's gradients and inputs.
  const PipeShape shape{2, 4, 1};
  const PipeReplay replay =
      replay_pipe_program(pipe_program(PipeSchedule::zero_bubble, shape), shape, times_for(PipeSchedule::zero_bubble));
  EXPECT_DOUBLE_EQ(peak_kept_bytes(replay, A, S, I)[1], A + 2 * S + I);
}

// Every F sends to the rank whose next virtual stage receives it, and every B back; the first stage receives no
// activation and the last no gradient.
TEST(PipelineSchedule, EveryTransferHasItsPartner) {
  for (const Case& c : cases()) {
    const PipeShape shape{c.stages, c.micro_batches, c.virtual_stages};
    const PipeProgram program = pipe_program(c.schedule, shape);
    const int P = c.stages, K = P * c.virtual_stages;
    std::map<std::tuple<int, int, PipeOp>, PipeAction> by_stage;  // virtual stage, micro-batch, op
    for (int r = 0; r < P; ++r)
      for (const PipeAction& a : program[static_cast<size_t>(r)]) by_stage[{a.chunk * P + r, a.micro_batch, a.op}] = a;
    for (const auto& [key, a] : by_stage) {
      const auto [k, mb, op] = key;
      if (op == PipeOp::weight) {
        EXPECT_EQ(a.recv_from, -1);
        EXPECT_EQ(a.send_to, -1);
        continue;
      }
      const int upstream = op == PipeOp::forward ? k - 1 : k + 1, downstream = op == PipeOp::forward ? k + 1 : k - 1;
      EXPECT_EQ(a.recv_from, upstream >= 0 && upstream < K ? upstream % P : -1) << name(c) << " stage " << k;
      EXPECT_EQ(a.send_to, downstream >= 0 && downstream < K ? downstream % P : -1) << name(c) << " stage " << k;
      if (downstream >= 0 && downstream < K) {
        const PipeAction& next = by_stage.at({downstream, mb, op});
        EXPECT_EQ(next.recv_from, k % P) << name(c) << " stage " << k;
      }
    }
  }
}

TEST(PipelineSchedule, ZeroBubbleFillsTheBubblesWithWeightGradients) {
  const PipeShape shape{4, 8, 1};
  const PipeTimes split{.forward = 1, .backward = 1, .weight = 1};
  const double zero_bubble =
      replay_pipe_program(pipe_program(PipeSchedule::zero_bubble, shape), shape, split).bubble_fraction();
  // 1F1B with the same work per micro-batch (its backward is B + W): (P - 1)/m = 37.5%; ZB-H1 a third of it.
  const double one_f_one_b =
      replay_pipe_program(pipe_program(PipeSchedule::one_f_one_b, shape), shape, {.forward = 1, .backward = 2})
          .bubble_fraction();
  EXPECT_DOUBLE_EQ(one_f_one_b, 3.0 / 8.0);
  EXPECT_DOUBLE_EQ(zero_bubble, 3.0 / 24.0);
}

TEST(PipelineSchedule, RefusalsNameTheRule) {
  const auto error = [](PipeSchedule s, PipeShape shape) -> std::string {
    try {
      pipe_program(s, shape);
    } catch (const std::invalid_argument& e) {
      return e.what();
    }
    return "(no error)";
  };
  EXPECT_NE(error(PipeSchedule::one_f_one_b, {4, 3, 1}).find("at least as many micro-batches as stages (3 < 4)"),
            std::string::npos);
  EXPECT_NE(error(PipeSchedule::interleaved_1f1b, {4, 6, 2}).find("a multiple of the stages (4)"), std::string::npos);
  EXPECT_NE(error(PipeSchedule::interleaved_1f1b, {4, 8, 1}).find("at least 2 virtual stages"), std::string::npos);
  EXPECT_NE(error(PipeSchedule::one_f_one_b, {4, 8, 2}).find("only interleaved_1f1b interleaves"), std::string::npos);
  EXPECT_EQ(error(PipeSchedule::gpipe, {4, 2, 1}), "(no error)");
  EXPECT_FALSE(parse_pipe_schedule("2f2b").has_value());
  EXPECT_EQ(parse_pipe_schedule("interleaved_1f1b"), PipeSchedule::interleaved_1f1b);
}

// A program whose last stage runs a backward before the forward it needs never finishes: the replay names it, as
// it does an action that runs twice or not at all.
TEST(PipelineSchedule, ReplayRefusesBrokenPrograms) {
  const PipeShape shape{2, 2, 1};
  PipeProgram program = pipe_program(PipeSchedule::one_f_one_b, shape);
  std::swap(program[1][0], program[1][1]);  // rank 1: B0 before F0
  try {
    replay_pipe_program(program, shape, {});
    ADD_FAILURE() << "a deadlocked program replayed";
  } catch (const std::logic_error& e) {
    EXPECT_NE(std::string(e.what()).find("rank 1 waits forever at B of chunk 0, micro-batch 0"), std::string::npos)
        << e.what();
  }
  PipeProgram missing = pipe_program(PipeSchedule::gpipe, shape);
  missing[0].pop_back();
  EXPECT_THROW(replay_pipe_program(missing, shape, {}), std::logic_error);
  PipeProgram twice = pipe_program(PipeSchedule::gpipe, shape);
  twice[0].push_back(twice[0].front());
  EXPECT_THROW(replay_pipe_program(twice, shape, {}), std::logic_error);
}

// The blocks cut into virtual stages: balanced (the first L % K stages one block more), or where pp_split says; the
// embedding with the first stage, the head with the last. A bad split names its rule.
TEST(PipelineSplit, BalancedOrGivenBoundariesEmbeddingFirstHeadLast) {
  using Units = std::vector<std::vector<int>>;
  EXPECT_EQ(pipeline_stage_units(4, 2, ""), (Units{{0, 1, 2}, {3, 4, 5}}));
  EXPECT_EQ(pipeline_stage_units(8, 3, ""), (Units{{0, 1, 2, 3}, {4, 5, 6}, {7, 8, 9}}));
  EXPECT_EQ(pipeline_stage_units(2, 2, ""), (Units{{0, 1}, {2, 3}}));
  EXPECT_EQ(pipeline_stage_units(4, 2, "1"), (Units{{0, 1}, {2, 3, 4, 5}}));
  EXPECT_EQ(pipeline_stage_units(8, 3, "3,6"), (Units{{0, 1, 2, 3}, {4, 5, 6}, {7, 8, 9}}));
  EXPECT_EQ(describe_pipeline_split(pipeline_stage_units(8, 3, ""), 8), "3,3,2");
  const auto error = [](int layers, int stages, const std::string& split) -> std::string {
    try {
      pipeline_stage_units(layers, stages, split);
      return "(no error)";
    } catch (const std::invalid_argument& e) {
      return e.what();
    }
  };
  EXPECT_NE(error(2, 4, "").find("model.n_layers=2 < 4 pipeline virtual stages"), std::string::npos);
  EXPECT_NE(error(8, 3, "3").find("names 1 boundaries; 3 virtual stages need 2"), std::string::npos);
  EXPECT_NE(error(8, 3, "6,3").find("boundary 3 must be greater than the one before"), std::string::npos);
  EXPECT_NE(error(8, 2, "8").find("below model.n_layers=8"), std::string::npos);
  EXPECT_NE(error(8, 2, "0").find("boundary 0 must be greater"), std::string::npos);
  EXPECT_NE(error(8, 2, "x").find("'x' is not a block index"), std::string::npos);
  EXPECT_NE(error(8, 2, "3x").find("'3x' is not a block index"), std::string::npos);
}

}  // namespace
}  // namespace dtlab
