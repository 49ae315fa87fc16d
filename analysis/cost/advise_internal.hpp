// advise_internal.hpp: what advise.cpp (the search and ranking) and advise_explain.cpp (the explanation) share;
// not part of the advisor's interface (advise.hpp).
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "analysis/cost/advise.hpp"

namespace dtlab::analysis {

std::string percent(double fraction);  // "12%", "3.5%" below 10%

// The ranking: predicted step time; equal times by lower peak, then fewer changes, then search order.
bool ranks_before(const Candidate& a, const Candidate& b);

// Equal in every searched setting but strategy and granularity, and predicted identically: the same job under
// another name (folded into one ranked row).
bool same_job(const Candidate& a, const Candidate& b);

// The explanation lines of advice.winner() against every candidate searched (`all`).
std::vector<std::string> explain(const Advice& advice, const std::vector<Candidate>& all);

// As fast as the winner (within kTieFraction) or faster, but over the budget: nearest first, at most `count`.
std::vector<Candidate> nearest_rejected(const Candidate& w, const std::vector<Candidate>& excluded, size_t count);
// One line for such a candidate: its settings, time against the winner's, and why it was rejected.
std::string rejected_text(const Candidate& w, const Candidate& r);

}  // namespace dtlab::analysis
