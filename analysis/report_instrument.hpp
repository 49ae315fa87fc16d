// report_instrument.hpp: the parts instrument_part() (report.hpp) is made of, one file each: the one-step
// timeline (report_timeline.cpp), step time by phase (report_phases.cpp) and communication overlap
// (report_overlap.cpp). Internal to analysis/; the data comes from results_instrument.hpp.
#pragma once

#include <optional>
#include <string>

#include "analysis/report.hpp"

namespace dtlab::analysis {

// The one-step timeline figure (SVG written to <out>/timeline_<slug>.svg and inlined); "" without timelines.
std::string timeline_figure(SectionContext& ctx);

// Mean step time per run stacked by phase; nullopt when no run recorded phases.
std::optional<Chart> phase_chart(const Scenario& sc);

// Communication overlap per run (comm ms, exposed ms, overlap %); "" for single-rank scenarios without comm.
std::string overlap_table(const Scenario& sc);

}  // namespace dtlab::analysis
