// advise_explain.cpp: the advisor's explanation of its pick — the winner in numbers, why not each other strategy,
// each other value of every searched axis — and the nearest candidates the budget rejected (see advise.hpp).
#include <algorithm>
#include <cmath>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "analysis/cost/advise.hpp"
#include "analysis/cost/advise_internal.hpp"
#include "analysis/html.hpp"
#include "strategies/catalog.hpp"

namespace dtlab::analysis {
namespace {

enum class Axis { pipeline, checkpointing, precision, offload, micro_batch, granularity };

std::string value_of(const CandidateSettings& s, Axis axis) {
  switch (axis) {
    case Axis::pipeline:
      return layout_text(s);
    case Axis::checkpointing:
      return s.activation_checkpointing;
    case Axis::precision:
      return s.precision;
    case Axis::offload:
      return s.offload ? "on" : "off";
    case Axis::micro_batch:
      return std::to_string(s.micro_batch);
    case Axis::granularity:
      return s.granularity;
  }
  return "";
}

const char* axis_name(Axis axis) {
  switch (axis) {
    case Axis::pipeline:
      return "model parallelism";
    case Axis::checkpointing:
      return "activation checkpointing";
    case Axis::precision:
      return "precision";
    case Axis::offload:
      return "offload";
    case Axis::micro_batch:
      return "micro-batch";
    case Axis::granularity:
      return "granularity";
  }
  return "";
}

// Whether b is a's settings with `axis` changed. Under stages the granularity is not searched (DDP's buckets all go
// after the flush), so across the pipeline axis it may differ too.
bool same_except(const CandidateSettings& a, const CandidateSettings& b, Axis axis) {
  if (a.strategy != b.strategy) return false;
  for (Axis other :
       {Axis::pipeline, Axis::checkpointing, Axis::precision, Axis::offload, Axis::micro_batch, Axis::granularity}) {
    if (axis == Axis::pipeline && other == Axis::granularity) continue;
    if (other != axis && value_of(a, other) != value_of(b, other)) return false;
  }
  return value_of(a, axis) != value_of(b, axis);
}

// The candidates that differ from the winner's settings on `axis` only, in search order; on the pipeline axis the
// best of each value (the granularities of pp 1 are one value there).
std::vector<const Candidate*> alternatives(const CandidateSettings& w, const std::vector<Candidate>& all, Axis axis) {
  std::vector<const Candidate*> out;
  for (const Candidate& c : all) {
    if (!same_except(w, c.settings, axis)) continue;
    const auto same_value = [&](const Candidate* o) {
      return value_of(o->settings, axis) == value_of(c.settings, axis);
    };
    const auto it = axis == Axis::pipeline ? std::find_if(out.begin(), out.end(), same_value) : out.end();
    if (it == out.end())
      out.push_back(&c);
    else if (c.exclusion.empty() && ((*it)->exclusion != "" || ranks_before(c, **it)))
      *it = &c;
  }
  return out;
}

// How `other` compares with the winner: slower / as fast / excluded (with the reason).
std::string versus(const Candidate& winner, const Candidate& other) {
  if (!other.exclusion.empty()) return other.reason;
  const double ratio = other.step_ms / winner.step_ms - 1;
  if (std::abs(ratio) < kTieFraction)
    return "as fast within " + percent(kTieFraction) + " (" + fmt_fixed(other.step_ms, 1) + " ms), peak " +
           format_bytes(static_cast<double>(other.memory.device_peak));
  return percent(std::abs(ratio)) + (ratio > 0 ? " slower" : " faster") + " (" + fmt_fixed(other.step_ms, 1) + " ms)";
}

// The model-parallelism axis holds dozens of layouts on a large world: "none", the fastest fitting ones and the ones
// nearest to fitting are named, in that order; the rest are counted by the caller.
std::vector<const Candidate*> named_layouts(const std::vector<const Candidate*>& alternatives) {
  constexpr size_t kFitting = 4, kOver = 3;
  if (alternatives.size() <= kFitting + kOver + 1) return alternatives;
  std::vector<const Candidate*> none, fitting, over;
  for (const Candidate* c : alternatives) {
    if (layout_text(c->settings) == "none")
      none.push_back(c);
    else if (c->exclusion.empty())
      fitting.push_back(c);
    else if (c->exclusion == "over_budget")
      over.push_back(c);
  }
  std::sort(fitting.begin(), fitting.end(),
            [](const Candidate* a, const Candidate* b) { return ranks_before(*a, *b); });
  std::sort(over.begin(), over.end(),
            [](const Candidate* a, const Candidate* b) { return a->memory.device_peak < b->memory.device_peak; });
  if (fitting.size() > kFitting) fitting.resize(kFitting);
  if (over.size() > kOver) over.resize(kOver);
  none.insert(none.end(), fitting.begin(), fitting.end());
  none.insert(none.end(), over.begin(), over.end());
  return none;
}

}  // namespace

// Equal in every searched setting but strategy and granularity, and predicted identically (times, bytes, memory by
// category): the same job under another name.
bool same_job(const Candidate& a, const Candidate& b) {
  for (Axis axis : {Axis::pipeline, Axis::checkpointing, Axis::precision, Axis::offload, Axis::micro_batch})
    if (value_of(a.settings, axis) != value_of(b.settings, axis)) return false;
  const MemoryPrediction &m = a.memory, &n = b.memory;
  return a.step_ms == b.step_ms && a.comm_ms == b.comm_ms && a.exposed_comm_ms == b.exposed_comm_ms &&
         m.params == n.params && m.grads == n.grads && m.optimizer == n.optimizer && m.buffers == n.buffers &&
         m.activations == n.activations && m.logits == n.logits && m.peak == n.peak;
}

std::vector<std::string> explain(const Advice& advice, const std::vector<Candidate>& all) {
  const Candidate& w = *advice.winner();
  std::vector<std::string> lines;
  lines.push_back(w.describe() + ": predicted " + fmt_fixed(w.step_ms, 1) + " ms per step (" +
                  fmt_fixed(w.tokens_per_s, 0) + " tokens/s), exposed communication " +
                  fmt_fixed(w.exposed_comm_ms, 1) + " ms, peak " +
                  format_bytes(static_cast<double>(w.memory.device_peak)) + " per rank (" +
                  percent(static_cast<double>(w.memory.device_peak) / static_cast<double>(advice.budget_bytes)) +
                  " of the budget).");
  // Strategy: each other strategy's best fitting candidate, or why none fits.
  std::map<std::string, const Candidate*> best_fit, smallest;
  for (const Candidate& c : all) {
    if (c.exclusion == "refused") continue;
    const std::string& s = c.settings.strategy;
    if (c.exclusion.empty() && (!best_fit.count(s) || ranks_before(c, *best_fit[s]))) best_fit[s] = &c;
    if (!smallest.count(s) || c.memory.device_peak < smallest[s]->memory.device_peak) smallest[s] = &c;
  }
  for (const StrategySpec* spec : strategy_specs()) {
    const std::string id(spec->id);
    if (id == w.settings.strategy || !smallest.count(id)) continue;
    if (best_fit.count(id) && same_job(w, *best_fit[id])) {
      lines.push_back("why not " + id +
                      ": here it is the same job as the winner (an identical plan: " + best_fit[id]->describe() + ").");
    } else if (best_fit.count(id)) {
      lines.push_back("why not " + id + ": its best fitting setting is " + versus(w, *best_fit[id]) + ": " +
                      best_fit[id]->describe() + ".");
    } else {
      const Candidate& s = *smallest[id];
      lines.push_back("why not " + id + ": nothing fits, not even its smallest setting (" + s.describe() +
                      "): " + s.reason + ".");
    }
  }
  // Every other axis: the winner's settings with one value changed.
  for (Axis axis :
       {Axis::pipeline, Axis::checkpointing, Axis::precision, Axis::micro_batch, Axis::offload, Axis::granularity}) {
    std::vector<std::string> parts;
    const std::vector<const Candidate*> others = alternatives(w.settings, all, axis);
    const std::vector<const Candidate*> named = axis == Axis::pipeline ? named_layouts(others) : others;
    for (const Candidate* alternative : named) {
      const Candidate& c = *alternative;
      if (std::find(w.equivalent.begin(), w.equivalent.end(), c.settings.granularity) != w.equivalent.end() &&
          axis == Axis::granularity)
        continue;  // folded into the winner: the same prediction
      std::string part = value_of(c.settings, axis) + ": " + versus(w, c);
      if (axis == Axis::checkpointing && c.exclusion == "over_budget" && c.memory.device_peak > 0)
        part += " — activations and logits are " +
                percent(static_cast<double>(c.memory.activations + c.memory.logits) /
                        static_cast<double>(c.memory.device_peak)) +
                " of that peak";
      parts.push_back(std::move(part));
    }
    if (parts.empty()) continue;
    std::string line = std::string(axis_name(axis)) + " " + value_of(w.settings, axis) + " — instead ";
    for (size_t i = 0; i < parts.size(); ++i) line += (i ? "; " : "") + parts[i];
    if (named.size() < others.size()) {
      size_t refused = 0;
      for (const Candidate* c : others) refused += c->exclusion == "refused" ? 1 : 0;
      line += "; and " + std::to_string(others.size() - named.size()) +
              " other layouts, slower or further over the "
              "budget (" +
              std::to_string(refused) + " of them refused: `--json` lists each)";
    }
    lines.push_back(line + ".");
  }
  return lines;
}

// As fast as the winner (within kTieFraction) or faster, but over the budget: nearest first.
std::vector<Candidate> nearest_rejected(const Candidate& w, const std::vector<Candidate>& excluded, size_t count) {
  std::vector<const Candidate*> faster;
  for (const Candidate& c : excluded)
    if (c.exclusion == "over_budget" && c.step_ms < (1 + kTieFraction) * w.step_ms) faster.push_back(&c);
  std::sort(faster.begin(), faster.end(),
            [](const Candidate* a, const Candidate* b) { return a->step_ms > b->step_ms; });
  std::vector<Candidate> out;
  for (size_t i = 0; i < faster.size() && i < count; ++i) out.push_back(*faster[i]);
  return out;
}

std::string rejected_text(const Candidate& w, const Candidate& r) {
  return r.describe() + ": " + fmt_fixed(r.step_ms, 1) + " ms (" +
         (r.step_ms > (1 - kTieFraction) * w.step_ms ? "as fast within " + percent(kTieFraction)
                                                     : percent(1 - r.step_ms / w.step_ms) + " faster") +
         "), but " + r.reason + ".";
}

}  // namespace dtlab::analysis
