// report_instrument.cpp: the report's instrumentation part -- one-step timelines (report_timeline.cpp), step time
// by phase (report_phases.cpp) and overlap of communication with compute (report_overlap.cpp), in that order.
//
// Everything here reads keys added with the instrumentation layer (result.json steps[].phases_ms,
// summary.phases_ms, comm; rank<r>/timeline.json, loaded by results_instrument.cpp) and contributes nothing for
// results that predate them. Unreadable files become report problems, never a failed report.
#include <sstream>

#include "analysis/report_instrument.hpp"

namespace dtlab::analysis {

std::string instrument_part(SectionContext& ctx) {
  std::ostringstream h;
  h << timeline_figure(ctx);
  h << chart_part("phases",
                  "Mean step time of each run split by phase (rank 0, timed steps): forward and backward compute, "
                  "time blocked on communication that compute did not hide, the optimizer step, and the rest "
                  "(data loading and everything unaccounted). Phases are exclusive, so the stack is the mean step.",
                  phase_chart)(ctx);
  h << overlap_table(ctx.scenario);
  return h.str();
}

}  // namespace dtlab::analysis
