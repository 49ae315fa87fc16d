// advise_test.cpp: the strategy advisor (analysis/cost/advise.hpp) on `tiny` with the calibrated profile of the
// prediction fixture, and on `7b` with the shipped H100 profile: a budget nothing fits, a budget everything fits,
// ties and folded settings, a config that cannot be searched, every exclusion reason, the explanation, max-batch.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <set>

#include "analysis/cost/advise.hpp"
#include "analysis/cost/max_batch.hpp"
#include "analysis/cost/predict.hpp"
#include "analysis/cost/profile.hpp"
#include "analysis/cost/topology.hpp"
#include "lab/config.hpp"
#include "strategies/catalog.hpp"
#include "strategies/spec.hpp"

namespace dtlab::analysis {
namespace {

constexpr int64_t kMiB = 1024 * 1024;

MachineProfile fixture_profile() {
  return load_profile(std::string(DTLAB_ANALYSIS_FIXTURES) + "/prediction/calibration/profile.json");
}

AdviseRequest tiny(int64_t budget, std::vector<std::string> overrides = {}) {
  overrides.insert(overrides.begin(), {"model.preset=tiny", "train.global_batch=8", "train.micro_batch=4"});
  return {.base = load_config_text("", overrides, 2), .profile = fixture_profile(), .budget_bytes = budget};
}

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

size_t searched(const Advice& a) {
  size_t n = a.excluded.size();
  for (const Candidate& c : a.ranked) n += 1 + c.equivalent.size();
  return n;
}

TEST(Advise, NothingFitsSaysTheSmallestBudgetThatWould) {
  const Advice a = advise(tiny(256 * 1024));
  EXPECT_EQ(a.winner(), nullptr);
  EXPECT_TRUE(a.explanation.empty());
  ASSERT_FALSE(a.if_nothing_fits.empty());
  // The smallest peak of all over-budget candidates, and that budget then fits exactly that candidate.
  int64_t smallest = INT64_MAX;
  for (const Candidate& c : a.excluded)
    if (c.exclusion == "over_budget") smallest = std::min(smallest, c.memory.device_peak);
  EXPECT_TRUE(contains(a.if_nothing_fits[0], "a budget of " + format_bytes(static_cast<double>(smallest))))
      << a.if_nothing_fits[0];
  const Advice at_smallest = advise(tiny(smallest));
  ASSERT_NE(at_smallest.winner(), nullptr);
  EXPECT_EQ(at_smallest.winner()->memory.device_peak, smallest);
  EXPECT_EQ(advise(tiny(smallest - 1)).winner(), nullptr);  // the budget is a hard line: one byte less, nothing fits
  EXPECT_TRUE(contains(format_advice(a, 5), "nothing fits 256.0 KiB per rank"));
}

AdviseRequest seven_b_on_eight(int64_t budget) {
  return {.base = load_config_text("", {"model.preset=7b", "train.global_batch=8", "train.micro_batch=1"}, 8),
          .profile = load_profile(std::string(DTLAB_SOURCE_DIR) + "/analysis/profiles/h100_sxm.json"),
          .budget_bytes = budget};
}

TEST(Advise, NothingFitsHereButMoreRanksWouldSaysHowMany) {
  // 7b on 8 ranks in 3 GiB of device memory: nothing fits, not even with offload, tensor parallelism and stages.
  const Advice a = advise(seven_b_on_eight(3LL << 30));
  ASSERT_EQ(a.winner(), nullptr);
  ASSERT_EQ(a.if_nothing_fits.size(), 2u);
  EXPECT_TRUE(contains(a.if_nothing_fits[1], " ranks (the same batch per rank) ")) << a.if_nothing_fits[1];
}

// 7b on 8 ranks in 6 GiB: no data-parallel layout fits, even sharded and offloaded, and tensor parallelism (with
// stages) is what brings the peak under; the explanation says what the layout without it would need.
TEST(Advise, TensorParallelismFitsWhatDataParallelismAloneCannot) {
  const Advice a = advise(seven_b_on_eight(6LL << 30));
  ASSERT_NE(a.winner(), nullptr);
  EXPECT_GT(a.winner()->settings.tp, 1) << a.winner()->describe();
  for (const Candidate& c : a.ranked)
    EXPECT_TRUE(c.settings.tp > 1 || c.settings.pp > 1) << c.describe() << " fits without model parallelism";
  std::string layout_line;
  for (const std::string& line : a.explanation)
    if (line.rfind("model parallelism ", 0) == 0) layout_line = line;
  EXPECT_TRUE(contains(layout_line, "instead none: peak ")) << format_advice(a, 3);
  EXPECT_TRUE(contains(layout_line, "over the budget")) << layout_line;
  // Dozens of layouts: the fastest fitting and the nearest to fitting are named, the rest counted.
  EXPECT_TRUE(contains(layout_line, " other layouts, slower or further over the budget (")) << layout_line;
}

// tp 2 at world 2 (one data-parallel rank left: micro-batch 1, 2, 4, 8), with and without sequence parallelism, for
// every strategy; the overrides set both keys, and sequence parallelism predicts fewer activations than its twin.
TEST(Advise, SearchesTensorParallelismWithAndWithoutSequenceParallelism) {
  const Advice a = advise(tiny(1LL << 40));
  std::vector<Candidate> all = a.excluded;
  all.insert(all.end(), a.ranked.begin(), a.ranked.end());
  size_t with_sp = 0, without_sp = 0;
  std::map<std::string, int64_t> activations;  // of the fitting candidates without sequence parallelism, by description
  for (const Candidate& c : all)
    if (c.settings.tp > 1 && !c.settings.sequence_parallel && c.exclusion.empty())
      activations[describe(c.settings)] = c.memory.activations;
  size_t compared = 0;
  for (const Candidate& c : all) {
    if (c.settings.tp == 1) continue;
    EXPECT_EQ(c.settings.tp, 2) << c.describe();
    EXPECT_TRUE(contains(c.overrides_text(), "parallel.tp=2 ")) << c.overrides_text();
    EXPECT_TRUE(contains(c.overrides_text(), std::string("parallel.sequence_parallel=") +
                                                 (c.settings.sequence_parallel ? "true" : "false")))
        << c.overrides_text();
    (c.settings.sequence_parallel ? with_sp : without_sp) += 1;
    if (!c.exclusion.empty()) continue;
    EXPECT_GT(c.step_ms, 0.0) << c.describe();
    CandidateSettings twin = c.settings;
    twin.sequence_parallel = false;
    const auto it = activations.find(describe(twin));
    if (!c.settings.sequence_parallel || it == activations.end()) continue;
    EXPECT_LT(c.memory.activations, it->second) << c.describe() << ": the sequence-split regions hold 1/tp";
    ++compared;
  }
  EXPECT_GT(compared, 100u);
  EXPECT_GT(with_sp, 0u);
  EXPECT_EQ(with_sp, without_sp);
}

TEST(Advise, EverythingFitsRanksEveryValidCandidateFastestFirst) {
  const Advice a = advise(tiny(1LL << 40));
  ASSERT_NE(a.winner(), nullptr);
  for (const Candidate& c : a.excluded) EXPECT_EQ(c.exclusion, "refused") << c.describe();
  for (size_t i = 1; i < a.ranked.size(); ++i) EXPECT_LE(a.ranked[i - 1].step_ms, a.ranked[i].step_ms);
  EXPECT_TRUE(a.rejected.empty());
  EXPECT_TRUE(a.if_nothing_fits.empty());
  // The search: strategies x AC 4 x precision 2 x offload (where read) x micro-batch 1, 2, 4 x granularity 4 (1080),
  // and under pp 2 (one data-parallel rank: micro-batch 1, 2, 4, 8; buckets and units not searched) 4 schedules x
  // AC 4 x precision 2 x micro-batch 4 for every data-parallel strategy (the next test counts them by strategy), and
  // 2880 under tp 2 with and without sequence parallelism (one data-parallel rank: micro-batch 1, 2, 4, 8).
  EXPECT_EQ(searched(a), 5368u);
}

TEST(Advise, SearchesPipelineStagesWithEachScheduleForTheStrategiesThatRunUnderThem) {
  const Advice a = advise(tiny(1LL << 40));
  std::vector<Candidate> all = a.excluded;
  all.insert(all.end(), a.ranked.begin(), a.ranked.end());
  std::set<std::string> schedules;
  std::map<std::string, size_t> by_strategy;
  size_t staged = 0;
  for (const Candidate& c : all) {
    if (c.settings.pp == 1) continue;
    ++staged;
    EXPECT_TRUE(strategy_spec(c.settings.strategy).runs_under_pipeline) << c.describe();
    EXPECT_TRUE(contains(c.overrides_text(), "parallel.pp=2 ")) << c.overrides_text();
    EXPECT_TRUE(contains(c.overrides_text(), "parallel.pp_schedule=" + c.settings.pp_schedule)) << c.overrides_text();
    EXPECT_TRUE(contains(c.describe(), c.settings.strategy + ", pp 2 " + c.settings.pp_schedule)) << c.describe();
    by_strategy[c.settings.strategy] += 1;
    schedules.insert(c.settings.pp_schedule);
    if (c.settings.pp_schedule == "zero_bubble" && c.settings.activation_checkpointing != "none") {
      EXPECT_EQ(c.exclusion, "refused") << c.describe();  // B and W would each recompute the checkpointed blocks
    }
    if (c.exclusion.empty()) {
      EXPECT_GT(c.step_ms, 0.0) << c.describe();  // the pipeline step model's time
    }
  }
  // Every data-parallel strategy runs under stages (the gathering ones keep their units through the flush).
  EXPECT_EQ(staged, 1160u);
  EXPECT_EQ(by_strategy, (std::map<std::string, size_t>{{"ddp", 128},
                                                        {"fsdp_full_shard", 256},
                                                        {"fsdp_hybrid", 132},
                                                        {"fsdp_no_shard", 256},
                                                        {"fsdp_shard_grad_op", 132},
                                                        {"zero1", 256}}));
  EXPECT_EQ(schedules, (std::set<std::string>{"1f1b", "interleaved_1f1b", "gpipe", "zero_bubble"}));
}

// A base that re-gathers per micro-batch under stages keeps that where a candidate can (stages, and a strategy that
// reads parallel.pp_reshard_after_forward) and sets it false elsewhere: no candidate is refused for it.
TEST(Advise, ABaseThatRegathersPerMicroBatchKeepsItOnlyWhereItApplies) {
  const Advice a = advise(tiny(1LL << 40, {"parallel.pp=2", "parallel.strategy=fsdp_full_shard",
                                           "parallel.pp_reshard_after_forward=true", "train.micro_batch=2"}));
  std::vector<Candidate> all = a.excluded;
  all.insert(all.end(), a.ranked.begin(), a.ranked.end());
  size_t kept = 0;
  for (const Candidate& c : all) {
    EXPECT_FALSE(contains(c.reason, "pp_reshard_after_forward")) << c.describe() << ": " << c.reason;
    const auto& keys = strategy_spec(c.settings.strategy).keys;
    const bool keeps =
        c.settings.pp > 1 && std::find(keys.begin(), keys.end(), "parallel.pp_reshard_after_forward") != keys.end();
    kept += keeps ? 1 : 0;
    EXPECT_EQ(contains(c.overrides_text(), "parallel.pp_reshard_after_forward=false"), !keeps) << c.overrides_text();
  }
  EXPECT_GT(kept, 0u);
}

TEST(Advise, PicksStagesAcrossASlowLinkAndExplainsThePick) {
  // tiny on 2 nodes of one rank joined by 1 Mbit/s: DDP all-reduces ~0.5 MB of gradients across the link every step,
  // a pipeline of 2 stages sends 8 x 64 tokens x 64 x 4 bytes of activations each way (256 KB in all).
  AdviseRequest r = tiny(1LL << 40);
  r.base.ranks_per_node = 1;
  r.profile = on_topology(fixture_profile(), Topology{.nodes = 2, .ranks_per_node = 1, .inter_link_bps = 1e6});
  const Advice a = advise(r);
  ASSERT_NE(a.winner(), nullptr);
  EXPECT_EQ(a.winner()->settings.pp, 2) << a.winner()->describe();
  std::string pipeline_line;
  for (const std::string& line : a.explanation)
    if (line.rfind("model parallelism pp 2 ", 0) == 0) pipeline_line = line;
  EXPECT_TRUE(contains(pipeline_line, "none: ")) << format_advice(a, 5);
  EXPECT_TRUE(contains(pipeline_line, "slower")) << pipeline_line;
  // The overrides reproduce the winner's prediction.
  std::vector<std::string> overrides = {"model.preset=tiny", "train.global_batch=8", "train.micro_batch=4"};
  overrides.insert(overrides.end(), a.winner()->settings.overrides.begin(), a.winner()->settings.overrides.end());
  Config c = load_config_text("", overrides, 2);
  c.ranks_per_node = 1;
  const nlohmann::json p = predict(c, &r.profile, 0);
  EXPECT_NEAR(p["step_ms"].get<double>(), a.winner()->step_ms, 1e-9);
}

TEST(Advise, TiesGoToLowerPeakThenFewerChangesAndIdenticalSettingsFold) {
  const Advice a = advise(tiny(1LL << 40));
  for (size_t i = 1; i < a.ranked.size(); ++i) {
    const Candidate &p = a.ranked[i - 1], &c = a.ranked[i];
    if (p.step_ms == c.step_ms) {
      EXPECT_LE(p.memory.device_peak, c.memory.device_peak);
      if (p.memory.device_peak == c.memory.device_peak) {
        EXPECT_LE(p.changes, c.changes);
      }
    }
    EXPECT_EQ(c.tie_with_previous, c.step_ms - p.step_ms <= kTieFraction * p.step_ms);
  }
  // tiny's gradients (~0.5 MiB) fit in one bucket at every cap: DDP's four caps are one candidate, and the base
  // config's own cap (25 MiB, no change) stands for the others.
  const auto ddp = std::find_if(a.ranked.begin(), a.ranked.end(),
                                [](const Candidate& c) { return c.settings.granularity.rfind("bucket", 0) == 0; });
  ASSERT_NE(ddp, a.ranked.end());
  EXPECT_EQ(ddp->settings.granularity, "bucket 25 MiB");
  EXPECT_EQ(std::set<std::string>(ddp->equivalent.begin(), ddp->equivalent.end()),
            (std::set<std::string>{"bucket 1 MiB", "bucket 4 MiB", "bucket 100 MiB"}));
  // At two ranks on one node HYBRID's shard group is the world: it is FULL_SHARD, folded into it, never ranked.
  size_t hybrid_folded = 0;
  for (const Candidate& c : a.ranked) {
    EXPECT_NE(c.settings.strategy, "fsdp_hybrid") << c.describe();
    if (c.settings.strategy == "fsdp_full_shard")
      for (const std::string& e : c.equivalent) hybrid_folded += e.rfind("fsdp_hybrid ", 0) == 0 ? 1 : 0;
  }
  EXPECT_GT(hybrid_folded, 0u);
}

TEST(Advise, AConfigThatCannotBeSearchedIsRefusedWithItsRule) {
  EXPECT_THROW(load_config_text("", {"model.preset=gpt9"}, 2), ConfigError);
  AdviseRequest r = tiny(kMiB);
  r.base.model.n_heads = 5;  // does not divide d_model=64
  try {
    advise(r);
    FAIL() << "advise accepted a model it cannot build";
  } catch (const ConfigError& e) {
    EXPECT_TRUE(contains(e.what(), "model.")) << e.what();
  }
  EXPECT_THROW(advise(tiny(0)), std::invalid_argument);
}

TEST(Advise, EveryExclusionNamesItsReason) {
  const Advice a = advise(tiny(2500 * 1024));
  std::set<std::string> kinds, largest;
  for (const Candidate& c : a.excluded) {
    kinds.insert(c.exclusion);
    if (c.exclusion == "over_budget") {
      // The amount over and the largest category, from the candidate's own prediction.
      EXPECT_GT(c.memory.device_peak, a.budget_bytes);
      EXPECT_TRUE(contains(
          c.reason, "over the budget by " + format_bytes(static_cast<double>(c.memory.device_peak - a.budget_bytes))))
          << c.reason;
      for (const char* category : {"activations", "buffers", "optimizer state", "params"})
        if (contains(c.reason, std::string("largest: ") + category)) largest.insert(category);
    } else {
      ASSERT_EQ(c.exclusion, "refused");
      EXPECT_FALSE(c.reason.empty());
    }
  }
  EXPECT_EQ(kinds, (std::set<std::string>{"over_budget", "refused"}));
  EXPECT_TRUE(largest.count("activations"));
  EXPECT_TRUE(largest.count("buffers"));
  // Refusals in the strategies' and the config's own words: single at two ranks, DDP with bf16 compute, a master
  // copy narrower than the parameters (base config with bf16 masters).
  const Advice bf16_masters = advise(tiny(
      kMiB * 64, {"parallel.strategy=fsdp_full_shard", "precision.param_dtype=bf16", "precision.master_dtype=bf16"}));
  std::set<std::string> refusals;
  for (const Candidate& c : bf16_masters.excluded)
    if (c.exclusion == "refused") refusals.insert(c.reason.substr(0, c.reason.find(':')));
  EXPECT_TRUE(
      refusals.count("parallel.strategy=single runs one process, but world_size=2; use ddp or an fsdp strategy"))
      << *refusals.begin();
  EXPECT_TRUE(refusals.count("parallel.strategy=ddp with precision.param_dtype=bf16"));
  EXPECT_TRUE(refusals.count("precision.master_dtype=bf16 with precision.param_dtype=fp32"));
}

TEST(Advise, ExplanationComparesTheWinnerWithEveryStrategyAndAxis) {
  // One block: no room for pipeline stages, whose zero-bubble schedule would otherwise win without checkpointing.
  const Advice a = advise(tiny(1450 * 1024, {"model.n_layers=1"}));
  ASSERT_NE(a.winner(), nullptr);
  const std::string all = [&] {
    std::string text;
    for (const std::string& line : a.explanation) text += line + "\n";
    return text;
  }();
  for (const char* strategy : {"fsdp_full_shard", "fsdp_shard_grad_op", "fsdp_hybrid", "zero1"}) {
    if (a.winner()->settings.strategy != strategy) {
      EXPECT_TRUE(contains(all, std::string("why not ") + strategy)) << all;
    }
  }
  for (const char* axis : {"activation checkpointing ", "precision ", "micro-batch "})
    EXPECT_TRUE(contains(all, axis)) << all;
  // At 1450 KiB the winner checkpoints (offload alone is not enough), because without it the same settings are over
  // the budget.
  EXPECT_EQ(a.winner()->settings.activation_checkpointing, "selective");
  EXPECT_TRUE(contains(all, "none: peak ")) << all;
  EXPECT_TRUE(contains(all, "of that peak")) << all;
  // The overrides reproduce the winner: loading the base with them gives the same prediction.
  std::vector<std::string> overrides = {"model.preset=tiny", "train.global_batch=8", "train.micro_batch=4",
                                        "model.n_layers=1"};
  overrides.insert(overrides.end(), a.winner()->settings.overrides.begin(), a.winner()->settings.overrides.end());
  const MachineProfile profile = fixture_profile();
  const nlohmann::json p = predict(load_config_text("", overrides, 2), &profile, 0);
  EXPECT_NEAR(p["step_ms"].get<double>(), a.winner()->step_ms, 1e-9);
}

TEST(Advise, HybridOverTheWholeWorldIsFoldedIntoFullShardAndSaidToBeTheSameJob) {
  // small at two ranks in 40 MiB of device memory: FULL_SHARD wins (with offload and bf16); HYBRID's shard group is the
  // world (one node), the same plan.
  const Advice a = advise(tiny(40 * kMiB, {"model.preset=small", "train.threads=1"}));
  ASSERT_NE(a.winner(), nullptr);
  EXPECT_EQ(a.winner()->settings.strategy, "fsdp_full_shard");
  EXPECT_NE(std::find(a.winner()->equivalent.begin(), a.winner()->equivalent.end(), "fsdp_hybrid wrap block"),
            a.winner()->equivalent.end());
  bool said = false;
  for (const std::string& line : a.explanation)
    said = said || contains(line, "why not fsdp_hybrid: here it is the same job");
  EXPECT_TRUE(said);
}

TEST(Advise, SevenBillionOnSixtyFourH100sIsAProjectionThatShardsTheOptimizer) {
  AdviseRequest r{
      .base = load_config_text(
          "", {"model.preset=7b", "train.global_batch=64", "train.micro_batch=1", "model.seq_len=4096"}, 64),
      .profile = load_profile(std::string(DTLAB_SOURCE_DIR) + "/analysis/profiles/h100_sxm.json"),
      .budget_bytes = 80LL << 30};
  r.base.ranks_per_node = 8;
  const Advice a = advise(r);
  EXPECT_EQ(a.label, "projection");
  ASSERT_NE(a.winner(), nullptr);
  EXPECT_NE(a.winner()->settings.strategy, "ddp");
  // DDP replicates 16 bytes per parameter of state (~112 GB): over 80 GiB without model parallelism; only stages or
  // tensor parallelism (a share of the layers or of each layer) bring it under, and slower than sharding (fp32: DDP
  // refuses bf16 compute).
  bool ddp_explained = false;
  for (const std::string& line : a.explanation)
    if (contains(line, "why not ddp: its best fitting setting is") && contains(line, "slower") &&
        (contains(line, "ddp, pp ") || contains(line, "ddp, tp ")))
      ddp_explained = true;
  EXPECT_TRUE(ddp_explained) << format_advice(a, 3);
  for (const Candidate& c : a.excluded)
    if (c.settings.strategy == "ddp" && c.settings.pp == 1 && c.settings.tp == 1 && c.exclusion == "over_budget") {
      EXPECT_TRUE(contains(c.reason, "largest: optimizer state")) << c.reason;
    }
}

TEST(MaxBatch, TheAnswerFitsAndTheNextSizeDoesNot) {
  const Config base = load_config_text("", {"model.preset=tiny", "parallel.strategy=ddp"}, 2);
  const int64_t budget = 8 * kMiB;
  const auto fit = max_batch(base, budget);
  ASSERT_TRUE(fit.has_value());
  EXPECT_GT(fit->value, 1);
  EXPECT_EQ(fit->next_value, fit->value + 1);
  EXPECT_LE(fit->peak_bytes, budget);
  EXPECT_GT(fit->next_peak_bytes, budget);
  const auto seq = max_batch(base, budget, /*seq_len=*/true);
  ASSERT_TRUE(seq.has_value());
  EXPECT_LE(seq->peak_bytes, budget);
  EXPECT_GT(seq->next_peak_bytes, budget);
  EXPECT_FALSE(max_batch(base, 64 * 1024).has_value());
  EXPECT_EQ(batch_overrides(base, 6, false),
            (std::vector<std::string>{"train.micro_batch=6", "train.accumulation=0", "train.global_batch=12"}));
}

}  // namespace
}  // namespace dtlab::analysis
