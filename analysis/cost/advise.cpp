// advise.cpp: the strategy advisor's search, ranking and explanation (see advise.hpp).
#include "analysis/cost/advise.hpp"
#include "analysis/cost/advise_internal.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <map>
#include <stdexcept>
#include <string_view>
#include <utility>

#include "analysis/cost/pipeline_model.hpp"
#include "analysis/cost/predict.hpp"
#include "analysis/cost/step_model.hpp"
#include "analysis/html.hpp"
#include "strategies/catalog.hpp"
#include "strategies/cost_plan.hpp"

namespace dtlab::analysis {
namespace {

constexpr std::array<const char*, 4> kCheckpointing = {"none", "selective", "full", "full/2"};
constexpr std::array<double, 4> kBucketCapsMb = {1, 4, 25, 100};
constexpr std::array<const char*, 4> kWraps = {"block", "every_2", "every_4", "model"};
constexpr std::array<const char*, 4> kPipeSchedules = {"1f1b", "interleaved_1f1b", "gpipe", "zero_bubble"};

// Sequences per rank per optimizer step; 0 when the global batch does not divide among the data-parallel ranks.
int64_t per_rank_batch(const Config& c) {
  const int64_t dp = data_parallel_size(c);
  return dp > 0 && c.train.global_batch % dp == 0 ? c.train.global_batch / dp : 0;
}

bool reads(const StrategySpec& spec, std::string_view key) {
  return std::find(spec.keys.begin(), spec.keys.end(), key) != spec.keys.end();
}

// Power-of-two divisors of the per-rank batch, and the per-rank batch itself.
std::vector<int64_t> micro_batches(int64_t per_rank) {
  std::vector<int64_t> out;
  for (int64_t m = 1; m <= per_rank; m *= 2)
    if (per_rank % m == 0) out.push_back(m);
  if (out.empty() || out.back() != per_rank) out.push_back(per_rank);
  return out;
}

std::string bucket_text(double mb) { return "bucket " + fmt_fixed(mb, mb == std::floor(mb) ? 0 : 1) + " MiB"; }

// The base config with `s`'s settings; fills s.overrides and returns how many settings differ from the base.
int apply(const Config& base, CandidateSettings& s, Config& out) {
  out = base;
  int changes = 0;
  auto set = [&](const std::string& key, const std::string& value, bool differs) {
    s.overrides.push_back(key + "=" + value);
    if (differs) ++changes;
  };
  out.parallel.strategy = s.strategy;
  set("parallel.strategy", s.strategy, base.parallel.strategy != s.strategy);

  // Pipeline stages; the base's own split only where its stages are kept (a split names blocks per stage).
  const int64_t virtual_stages = s.pp_schedule == "interleaved_1f1b" ? 2 : 1;
  const bool same_stages = s.pp == base.parallel.pp && virtual_stages == base.parallel.pp_virtual_stages;
  out.parallel.pp = s.pp;
  out.parallel.pp_virtual_stages = virtual_stages;
  if (!same_stages) out.parallel.pp_split.clear();
  set("parallel.pp", std::to_string(s.pp), base.parallel.pp != s.pp);
  if (s.pp > 1) {
    out.parallel.pp_schedule = s.pp_schedule;
    set("parallel.pp_schedule", s.pp_schedule, base.parallel.pp_schedule != s.pp_schedule);
    s.overrides.push_back("parallel.pp_virtual_stages=" + std::to_string(virtual_stages));
  }
  if (!same_stages && !base.parallel.pp_split.empty()) s.overrides.emplace_back("parallel.pp_split=");
  // The base's re-gathering per micro-batch only where the candidate still has stages and a strategy that reads it.
  const bool regathers = s.pp > 1 && base.parallel.pp_reshard_after_forward &&
                         reads(strategy_spec(s.strategy), "parallel.pp_reshard_after_forward");
  if (base.parallel.pp_reshard_after_forward && !regathers) {
    out.parallel.pp_reshard_after_forward = false;
    s.overrides.emplace_back("parallel.pp_reshard_after_forward=false");
  }
  out.parallel.tp = s.tp;
  set("parallel.tp", std::to_string(s.tp), base.parallel.tp != s.tp);
  out.parallel.sequence_parallel = s.sequence_parallel;
  if (s.tp > 1 || base.parallel.sequence_parallel)
    set("parallel.sequence_parallel", s.sequence_parallel ? "true" : "false",
        base.parallel.sequence_parallel != s.sequence_parallel);

  const bool full = s.activation_checkpointing.rfind("full", 0) == 0;
  out.parallel.activation_checkpointing = full ? "full" : s.activation_checkpointing;
  out.parallel.checkpoint_every = s.activation_checkpointing == "full/2" ? 2 : 1;
  const bool ac_differs = out.parallel.activation_checkpointing != base.parallel.activation_checkpointing ||
                          (full && out.parallel.checkpoint_every != base.parallel.checkpoint_every);
  set("parallel.activation_checkpointing", out.parallel.activation_checkpointing, ac_differs);
  if (full) s.overrides.push_back("parallel.checkpoint_every=" + std::to_string(out.parallel.checkpoint_every));

  out.precision.param_dtype = out.precision.reduce_dtype = s.precision;
  set("precision.param_dtype", s.precision,
      base.precision.param_dtype != s.precision || base.precision.reduce_dtype != s.precision);
  s.overrides.push_back("precision.reduce_dtype=" + s.precision);
  if (s.precision != "fp16") {  // fp16 keeps the base's loss scaler; fp32 and bf16 need none
    out.precision.loss_scale = "none";
    if (base.precision.loss_scale != "none") s.overrides.push_back("precision.loss_scale=none");
  }

  out.parallel.offload = s.offload;
  set("parallel.offload", s.offload ? "true" : "false", base.parallel.offload != s.offload);

  out.train.micro_batch = s.micro_batch;
  // What `train.accumulation=0` derives when the config is loaded (validation refuses a batch that does not divide).
  const int64_t per_micro_step = s.micro_batch * data_parallel_size(out);
  out.train.accumulation = out.train.global_batch % per_micro_step == 0 ? out.train.global_batch / per_micro_step : 0;
  set("train.micro_batch", std::to_string(s.micro_batch), base.train.micro_batch != s.micro_batch);
  s.overrides.push_back("train.accumulation=0");

  if (s.granularity.rfind("bucket ", 0) == 0) {
    const double mb = std::stod(s.granularity.substr(7));
    out.parallel.bucket_cap_mb = mb;
    set("parallel.bucket_cap_mb", fmt_fixed(mb, 0), base.parallel.bucket_cap_mb != mb);
  } else if (s.granularity.rfind("wrap ", 0) == 0) {
    out.parallel.wrap = s.granularity.substr(5);
    set("parallel.wrap", out.parallel.wrap, base.parallel.wrap != out.parallel.wrap);
  }
  return changes;
}

// One model-parallel layout: pipeline stages and their schedule, tensor parallelism and sequence parallelism.
struct Layout {
  int64_t pp = 1;
  std::string schedule;  // "" at pp 1
  int64_t tp = 1;
  bool sequence_parallel = false;
};

// The layouts a strategy is searched under: pp 1, and where it runs under stages, pp 2 and 4 (those the world and the
// blocks allow) with each schedule; each times tp 1, 2, 4 (with and without sequence parallelism) where pp·tp divides
// the world. Whether the model splits by tp is validation's to say (a refusal names the key).
std::vector<Layout> layouts(const Config& base, const StrategySpec& spec) {
  std::vector<std::pair<int64_t, std::string>> pipelines = {{1, ""}};
  if (spec.runs_under_pipeline)
    for (int64_t pp : {2, 4}) {
      if (base.world_size % pp != 0 || base.model.n_layers < pp) continue;
      for (const char* schedule : kPipeSchedules) pipelines.emplace_back(pp, schedule);
    }
  std::vector<Layout> out;
  for (const auto& [pp, schedule] : pipelines)
    for (int64_t tp : {1, 2, 4}) {
      if (base.world_size % (pp * tp) != 0) continue;
      out.push_back({pp, schedule, tp, false});
      if (tp > 1) out.push_back({pp, schedule, tp, true});
    }
  return out;
}

// The candidates of one strategy under one layout: every setting combination it reads, in a fixed order.
void add_candidates(const Config& base, const StrategySpec& spec, const Layout& layout,
                    std::vector<CandidateSettings>& out) {
  const int64_t pp = layout.pp;
  Config probe = base;
  probe.parallel.strategy = std::string(spec.id);
  probe.parallel.pp = pp;
  probe.parallel.tp = layout.tp;
  const int64_t per_rank = per_rank_batch(probe);
  // Under stages the buckets or units are all reduced after the flush: their size does not change the step (nothing
  // overlaps); not searched.
  std::vector<std::string> granularities = {""};
  if (reads(spec, "parallel.bucket_cap_mb") && pp == 1) {
    granularities.clear();
    for (double mb : kBucketCapsMb) granularities.push_back(bucket_text(mb));
  } else if (reads(spec, "parallel.wrap") && pp == 1) {
    granularities.clear();
    for (const char* w : kWraps) granularities.push_back(std::string("wrap ") + w);
  }
  const std::vector<bool> offloads =
      reads(spec, "parallel.offload") ? std::vector<bool>{false, true} : std::vector<bool>{false};
  // A per-rank batch that does not divide still gets one candidate, which validation refuses with its rule.
  const std::vector<int64_t> micro =
      per_rank > 0 ? micro_batches(per_rank) : std::vector<int64_t>{base.train.micro_batch};
  // fp32 and bf16; fp16 too when the base config trains in it (with its loss scaler).
  std::vector<std::string> precisions = {"fp32", "bf16"};
  if (base.precision.param_dtype == "fp16") precisions.push_back("fp16");
  for (const char* ac : kCheckpointing) {
    if (std::string_view(ac) == "full/2" && base.model.n_layers < 2) continue;
    for (const std::string& precision : precisions)
      for (bool offload : offloads)
        for (int64_t m : micro)
          for (const std::string& g : granularities) {
            CandidateSettings s;
            s.strategy = std::string(spec.id);
            s.activation_checkpointing = ac;
            s.precision = precision;
            s.offload = offload;
            s.micro_batch = m;
            s.accumulation = per_rank > 0 ? per_rank / m : 0;
            s.pp = pp;
            s.pp_schedule = layout.schedule;
            s.tp = layout.tp;
            s.sequence_parallel = layout.sequence_parallel;
            s.granularity = g;
            out.push_back(std::move(s));
          }
  }
}

// Every setting combination the catalogue's strategies read, in a fixed order.
std::vector<CandidateSettings> search_space(const Config& base) {
  std::vector<CandidateSettings> out;
  for (const StrategySpec* spec : strategy_specs()) {
    if (spec->plan == nullptr) continue;
    for (const Layout& layout : layouts(base, *spec)) add_candidates(base, *spec, layout, out);
  }
  return out;
}

struct Category {
  const char* name;
  int64_t bytes;
};

Category largest_category(const MemoryPrediction& m) {
  const std::array<Category, 6> all = {{{"params", m.params},
                                        {"grads", m.grads},
                                        {"optimizer state", m.optimizer},
                                        {"buffers", m.buffers},
                                        {"activations", m.activations},
                                        {"logits", m.logits}}};
  return *std::max_element(all.begin(), all.end(),
                           [](const Category& a, const Category& b) { return a.bytes < b.bytes; });
}

std::string over_budget_reason(const MemoryPrediction& m, int64_t budget) {
  const Category top = largest_category(m);
  return "peak " + format_bytes(static_cast<double>(m.device_peak)) + " is over the budget by " +
         format_bytes(static_cast<double>(m.device_peak - budget)) + "; largest: " + top.name + " " +
         format_bytes(static_cast<double>(top.bytes)) + " (" +
         percent(static_cast<double>(top.bytes) / static_cast<double>(m.device_peak)) + " of the peak)";
}

// Config validation and the strategy's own check; "" when both accept.
std::string refusal(const Config& c) {
  try {
    validate(c);
  } catch (const ConfigError& e) {
    std::string text = e.what();
    return text.rfind("config: ", 0) == 0 ? text.substr(8) : text;
  }
  const StrategySpec& spec = strategy_spec(c.parallel.strategy);
  if (spec.check != nullptr) {
    try {
      spec.check(c);
    } catch (const std::invalid_argument& e) {
      return e.what();
    }
  }
  return "";
}

Candidate evaluate(const AdviseRequest& r, CandidateSettings settings, int order) {
  Candidate cand;
  Config c;
  cand.changes = apply(r.base, settings, c);
  cand.settings = std::move(settings);
  cand.order = order;
  if (std::string why = refusal(c); !why.empty()) {
    cand.exclusion = "refused";
    cand.reason = std::move(why);
    return cand;
  }
  // DDP's parallel.collectives=auto across nodes: the model's choice, as `dtlab train` makes it with a profile.
  if (const auto choice = choose_collectives(c, r.profile)) c.parallel.collectives = choice->collectives;
  cand.memory = largest_rank_peak_memory(c, r.profile.comm.intra_node.backend);
  const StepPrediction step = c.parallel.pp > 1 ? predict_pipeline_step(c, cost_plan(c, 0), r.profile, 0)
                                                : predict_step(c, cost_plan(c, 0), r.profile);
  cand.step_ms = step.step_ms;
  cand.tokens_per_s = step.tokens_per_s;
  cand.compute_ms = step.compute_ms;
  cand.comm_ms = step.comm_ms;
  cand.exposed_comm_ms = step.exposed_comm_ms;
  if (cand.memory.device_peak > r.budget_bytes) {
    cand.exclusion = "over_budget";
    cand.reason = over_budget_reason(cand.memory, r.budget_bytes);
  }
  return cand;
}

// What would fit when nothing does: the smallest peak (a budget that fits it), and the fewest ranks that would
// bring some candidate under this budget with the same per-rank batch.
std::vector<std::string> what_would_fit(const AdviseRequest& r, const std::vector<Candidate>& excluded) {
  std::vector<std::string> out;
  const Candidate* smallest = nullptr;
  for (const Candidate& c : excluded)
    if (c.exclusion == "over_budget" && (smallest == nullptr || c.memory.device_peak < smallest->memory.device_peak))
      smallest = &c;
  if (smallest == nullptr) {
    out.push_back("no candidate is valid for this config and world size: see the exclusions");
    return out;
  }
  out.push_back("the smallest predicted peak is " + format_bytes(static_cast<double>(smallest->memory.device_peak)) +
                " (" + smallest->describe() + "): a budget of " +
                format_bytes(static_cast<double>(smallest->memory.device_peak)) + " per rank fits it.");
  const std::string backend = r.profile.comm.intra_node.backend;
  for (int64_t world = r.base.world_size * 2; world <= 1024; world *= 2) {
    Config base = r.base;
    base.world_size = world;
    base.train.global_batch = r.base.train.global_batch * world / r.base.world_size;
    if (r.base.ranks_per_node > 0) base.ranks_per_node = std::min<int64_t>(r.base.ranks_per_node, world);
    for (CandidateSettings s : search_space(base)) {
      Config c;
      apply(base, s, c);
      if (!refusal(c).empty()) continue;
      const MemoryPrediction m = largest_rank_peak_memory(c, backend);
      if (m.device_peak <= r.budget_bytes) {
        out.push_back("with " + std::to_string(world) + " ranks (the same batch per rank) " + describe(s) +
                      " fits, at a peak of " + format_bytes(static_cast<double>(m.device_peak)) + ".");
        return out;
      }
    }
  }
  out.push_back("no candidate fits this budget at up to 1024 ranks either");
  return out;
}

nlohmann::json memory_json(const MemoryPrediction& m) {
  return {{"params", m.params},           {"grads", m.grads},   {"optimizer", m.optimizer}, {"buffers", m.buffers},
          {"activations", m.activations}, {"logits", m.logits}, {"peak", m.peak},           {"host", m.host},
          {"device_peak", m.device_peak}};
}

}  // namespace

std::string percent(double fraction) { return fmt_fixed(100 * fraction, fraction < 0.1 ? 1 : 0) + "%"; }

bool ranks_before(const Candidate& a, const Candidate& b) {
  if (a.step_ms != b.step_ms) return a.step_ms < b.step_ms;
  if (a.memory.device_peak != b.memory.device_peak) return a.memory.device_peak < b.memory.device_peak;
  if (a.changes != b.changes) return a.changes < b.changes;
  return a.order < b.order;
}

std::string format_bytes(double bytes) {
  const double a = std::abs(bytes);
  if (a >= 1024.0 * 1024 * 1024) return fmt_fixed(bytes / (1024.0 * 1024 * 1024), 2) + " GiB";
  if (a >= 1024.0 * 1024) return fmt_fixed(bytes / (1024.0 * 1024), 1) + " MiB";
  if (a >= 1024.0) return fmt_fixed(bytes / 1024.0, 1) + " KiB";
  return fmt_fixed(bytes, 0) + " B";
}

std::string layout_text(const CandidateSettings& s) {
  std::string text = s.pp > 1 ? "pp " + std::to_string(s.pp) + " " + s.pp_schedule : "";
  if (s.tp > 1)
    text += (text.empty() ? "" : ", ") + std::string("tp ") + std::to_string(s.tp) + (s.sequence_parallel ? " sp" : "");
  return text.empty() ? "none" : text;
}

std::string describe(const CandidateSettings& s) {
  std::string text = s.strategy;
  if (s.pp > 1 || s.tp > 1) text += ", " + layout_text(s);
  text += s.activation_checkpointing == "none" ? ", no AC" : ", AC " + s.activation_checkpointing;
  text += ", " + s.precision;
  if (s.offload) text += ", offload";
  text += ", micro-batch " + std::to_string(s.micro_batch) + " x " + std::to_string(s.accumulation);
  if (!s.granularity.empty()) text += ", " + s.granularity;
  return text;
}

std::string Candidate::describe() const {
  std::string text = analysis::describe(settings);
  for (size_t i = 0; i < equivalent.size(); ++i) text += (i ? ", " : " (the same as ") + equivalent[i];
  return equivalent.empty() ? text : text + ")";
}

std::string Candidate::overrides_text() const {
  std::string text;
  for (const std::string& o : settings.overrides) text += (text.empty() ? "" : " ") + o;
  return text;
}

int64_t starting_micro_batch(const Config& base) {
  const int64_t per_rank = per_rank_batch(base), written = base.train.micro_batch;
  if (per_rank <= 0 || written < 1) return written;
  for (int64_t m = std::min(written, per_rank); m > 1; --m)
    if (per_rank % m == 0) return m;
  return 1;
}

Config at_starting_micro_batch(const Config& base) {
  Config c = base;
  c.train.micro_batch = starting_micro_batch(base);
  const int64_t per_rank = per_rank_batch(base);
  c.train.accumulation = per_rank > 0 && c.train.micro_batch > 0 ? per_rank / c.train.micro_batch : 0;
  return c;
}

Advice advise(const AdviseRequest& r) {
  if (r.budget_bytes <= 0) throw std::invalid_argument("advise: the memory budget must be positive");
  // An unknown model, a batch that does not divide among the ranks: the config's own error, before any search. The
  // micro-batch is the search's to choose, so it is checked at the one the search starts from.
  const Config start = at_starting_micro_batch(r.base);
  validate(start);
  Advice advice;
  advice.budget_bytes = r.budget_bytes;
  advice.world_size = r.base.world_size;
  advice.nodes = r.base.ranks_per_node > 0 ? std::max<int64_t>(1, r.base.world_size / r.base.ranks_per_node) : 1;
  advice.profile = r.profile.name;
  advice.notes = r.profile.adjustments;
  advice.notes.push_back(
      "the budget is the device's memory, as memory.limit is: offload's host buffers (master shards, their "
      "gradients, the optimizer state) are outside it, and every peak shown is the device's");
  if (r.base.precision.param_dtype != "fp16")
    advice.notes.push_back(
        "fp16 is searched only when the config trains in it: it has bf16's bytes and needs a loss "
        "scaler");

  std::vector<Candidate> all;
  int order = 0;
  for (CandidateSettings& s : search_space(r.base)) all.push_back(evaluate(r, std::move(s), order++));
  for (const Candidate& c : all) (c.exclusion.empty() ? advice.ranked : advice.excluded).push_back(c);
  std::sort(advice.ranked.begin(), advice.ranked.end(), ranks_before);
  // The same job under other names is one candidate, the first in rank order standing for the others: settings that
  // differ only in granularity (a bucket cap above the model's gradient bytes, wraps that build the same units) or
  // strategy (HYBRID whose shard group is the whole world is FULL_SHARD) with identical predictions.
  std::vector<Candidate> distinct;
  for (Candidate& c : advice.ranked) {
    auto same = [&](const Candidate& d) { return same_job(d, c); };
    if (auto it = std::find_if(distinct.begin(), distinct.end(), same); it != distinct.end())
      it->equivalent.push_back(
          c.settings.strategy == it->settings.strategy
              ? c.settings.granularity
              : c.settings.strategy + (c.settings.granularity.empty() ? std::string() : " " + c.settings.granularity));
    else
      distinct.push_back(std::move(c));
  }
  advice.ranked = std::move(distinct);
  for (size_t i = 1; i < advice.ranked.size(); ++i)
    advice.ranked[i].tie_with_previous =
        advice.ranked[i].step_ms - advice.ranked[i - 1].step_ms <= kTieFraction * advice.ranked[i - 1].step_ms;

  // The label of the winner's prediction (or the base config's): projection beyond this machine.
  Config labelled = start;
  if (const Candidate* w = advice.winner()) {
    CandidateSettings settings = w->settings;
    settings.overrides.clear();
    apply(r.base, settings, labelled);
  }
  advice.label = predict(labelled, &r.profile, 0)["label"].get<std::string>();

  if (advice.winner()) {
    advice.explanation = explain(advice, all);
    advice.rejected = nearest_rejected(*advice.winner(), advice.excluded, 3);
  } else {
    advice.if_nothing_fits = what_would_fit(r, advice.excluded);
  }
  return advice;
}

nlohmann::json to_json(const Candidate& c) {
  const CandidateSettings& s = c.settings;
  nlohmann::json j;
  j["settings"] = {{"strategy", s.strategy},
                   {"activation_checkpointing", s.activation_checkpointing},
                   {"precision", s.precision},
                   {"offload", s.offload},
                   {"micro_batch", s.micro_batch},
                   {"accumulation", s.accumulation},
                   {"pp", s.pp},
                   {"pp_schedule", s.pp_schedule},
                   {"tp", s.tp},
                   {"sequence_parallel", s.sequence_parallel},
                   {"granularity", s.granularity}};
  j["description"] = c.describe();
  j["overrides"] = s.overrides;
  j["exclusion"] = c.exclusion;
  j["reason"] = c.reason;
  const bool predicted = c.exclusion != "refused";
  j["memory_bytes"] = predicted ? memory_json(c.memory) : nlohmann::json(nullptr);
  for (const auto& [key, value] : {std::pair<const char*, double>{"step_ms", c.step_ms},
                                   {"tokens_per_s", c.tokens_per_s},
                                   {"compute_ms", c.compute_ms},
                                   {"comm_ms", c.comm_ms},
                                   {"exposed_comm_ms", c.exposed_comm_ms}})
    j[key] = predicted ? nlohmann::json(value) : nlohmann::json(nullptr);
  j["equivalent"] = c.equivalent;
  j["changes"] = c.changes;
  j["tie_with_previous"] = c.tie_with_previous;
  return j;
}

nlohmann::json to_json(const Advice& a) {
  nlohmann::json j;
  j["budget_bytes"] = a.budget_bytes;
  j["world_size"] = a.world_size;
  j["nodes"] = a.nodes;
  j["profile"] = a.profile;
  j["label"] = a.label;
  j["ranked"] = nlohmann::json::array();
  for (const Candidate& c : a.ranked) j["ranked"].push_back(to_json(c));
  j["excluded"] = nlohmann::json::array();
  for (const Candidate& c : a.excluded) j["excluded"].push_back(to_json(c));
  j["explanation"] = a.explanation;
  j["rejected"] = nlohmann::json::array();
  for (const Candidate& c : a.rejected) {
    j["rejected"].push_back(to_json(c));
    j["rejected"].back()["text"] = rejected_text(a.ranked.front(), c);
  }
  j["if_nothing_fits"] = a.if_nothing_fits;
  j["notes"] = a.notes;
  return j;
}

std::string format_advice(const Advice& a, int top) {
  std::string out;
  out += "advice (" + a.label + ") for " + std::to_string(a.world_size) + " ranks" +
         (a.nodes > 1 ? " on " + std::to_string(a.nodes) + " nodes" : std::string()) + ", budget " +
         format_bytes(static_cast<double>(a.budget_bytes)) + " per rank, profile " + a.profile + "\n";
  std::map<std::string, int> by_reason;
  for (const Candidate& c : a.excluded) ++by_reason[c.exclusion];
  size_t folded = 0;
  for (const Candidate& c : a.ranked) folded += c.equivalent.size();
  out += std::to_string(a.ranked.size() + folded + a.excluded.size()) +
         " candidates: " + std::to_string(a.ranked.size() + folded) + " fit (" + std::to_string(a.ranked.size()) +
         " distinct)";
  for (const auto& [reason, n] : by_reason) out += ", " + std::to_string(n) + " " + reason;
  out += "\n\n";
  if (!a.ranked.empty()) {
    char row[512];
    std::snprintf(row, sizeof row, "%4s %10s %10s %9s %11s %10s %10s %10s  %s\n", "#", "step ms", "tokens/s", "exposed",
                  "peak", "optimizer", "activ.", "params", "settings (= : a tie with the row above)");
    out += row;
    for (size_t i = 0; i < a.ranked.size() && static_cast<int>(i) < top; ++i) {
      const Candidate& c = a.ranked[i];
      std::snprintf(row, sizeof row, "%3zu%s %10.1f %10.0f %9.1f %11s %10s %10s %10s  %s\n", i + 1,
                    c.tie_with_previous ? "=" : " ", c.step_ms, c.tokens_per_s, c.exposed_comm_ms,
                    format_bytes(static_cast<double>(c.memory.device_peak)).c_str(),
                    format_bytes(static_cast<double>(c.memory.optimizer)).c_str(),
                    format_bytes(static_cast<double>(c.memory.activations + c.memory.logits)).c_str(),
                    format_bytes(static_cast<double>(c.memory.params)).c_str(), c.describe().c_str());
      out += row;
    }
    out += "\nwhy:\n";
    for (const std::string& line : a.explanation) out += "  - " + line + "\n";
    if (!a.rejected.empty()) {
      out += "as fast or faster, but over the budget:\n";
      for (const Candidate& c : a.rejected) out += "  - " + rejected_text(a.ranked.front(), c) + "\n";
    }
    out += "run it: dtlab train ... " + a.ranked.front().overrides_text() + "\n";
  } else {
    out += "nothing fits " + format_bytes(static_cast<double>(a.budget_bytes)) + " per rank:\n";
    for (const std::string& line : a.if_nothing_fits) out += "  - " + line + "\n";
  }
  if (!a.notes.empty()) {
    out += "notes:\n";
    for (const std::string& note : a.notes) out += "  - " + note + "\n";
  }
  return out;
}

}  // namespace dtlab::analysis
