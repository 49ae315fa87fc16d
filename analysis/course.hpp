// course.hpp: the report's learning order — the questions a learner asks, in order, and the study that answers each.
//
// The order lives here and nowhere else: a new study joins the course with one line in course.cpp (a test checks
// that every study in scenarios/studies/ has one). The report renders its sections in this order; a result directory
// of a study not in the course (an old or a user's own) follows the course's, by name.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "analysis/results.hpp"

namespace dtlab::analysis {

struct CourseStop {
  std::string study;  // the study's name (scenarios/studies/<study>.yaml, its result directory)
  std::string topic;  // the learner's step, a few words: "Sharding the state"
  // true: the study's own part closes its section with the answer; otherwise answer_part (report_answer.cpp) does
  bool answers_itself = false;
};

// Every stop, in learning order: one process -> DDP -> sharding -> what fits -> precision -> activation
// checkpointing -> offload -> accumulation -> granularity -> crossover -> later dimensions -> saving the run.
const std::vector<CourseStop>& course();

// The 1-based place of `study` in the course, or nullopt when it is not in it.
std::optional<int> course_place(const std::string& study);

// `scenarios` in course order (stable: two result dirs of one study keep their order); those not in it after, by name.
std::vector<Scenario> in_course_order(std::vector<Scenario> scenarios);

}  // namespace dtlab::analysis
