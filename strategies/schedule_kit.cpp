// schedule_kit.cpp: the shared schedule pieces (see schedule_kit.hpp).
#include "strategies/schedule_kit.hpp"

#include <algorithm>
#include <stdexcept>
#include <string>

namespace dtlab {

double Stream::run(double issued_at, double duration) {
  free_at = std::max(free_at, issued_at) + duration;
  return free_at;
}

double overlapped_tail(const std::vector<double>& ready, const std::vector<double>& duration, double backward_ms) {
  Stream stream;
  for (size_t i = 0; i < ready.size(); ++i) stream.run(ready[i], duration[i]);
  return std::max(0.0, stream.free_at - backward_ms);
}

bool runs_after_backward(const PlannedCollective& c) {
  return (c.bytes <= 8 && c.op == "all_reduce") || c.phase == "after-backward";
}

CallsByRole calls_by_role(const ScheduleInput& in) {
  CallsByRole roles;
  const PlannedCollective* previous = nullptr;  // the last call kept, to join a unit's second level to its first
  for (size_t i = 0; i < in.plan.collectives.size(); ++i) {
    const PlannedCollective& c = in.plan.collectives[i];
    if (c.phase == "setup" || runs_after_backward(c)) continue;
    std::vector<double>* role = nullptr;
    if (c.op == "all_gather" && c.phase == "forward") {
      role = &roles.gather_forward;
    } else if (c.op == "all_gather" && c.phase == "backward") {
      role = &roles.gather_backward;
    } else if (c.op == "all_gather" && c.phase == "optimizer") {
      role = &roles.gather_after_optimizer;
    } else if (c.op == "reduce_scatter") {
      role = &roles.reduce_scatter;
    } else if (c.op == "all_reduce") {
      role = &roles.all_reduce;
    }
    if (role == nullptr) continue;
    // A hierarchical gather or reduce-scatter: its two levels run back to back, as one call of the unit.
    const bool second_level = previous != nullptr && c.unit >= 0 && previous->unit == c.unit && previous->op == c.op &&
                              previous->phase == c.phase && !role->empty();
    if (second_level) {
      role->back() += in.call_ms[i];
    } else {
      role->push_back(in.call_ms[i]);
    }
    previous = &c;
  }
  return roles;
}

double fsdp_unit_pipeline(const ScheduleInput& in, bool regather) {
  const CallsByRole calls = calls_by_role(in);
  const size_t n = in.unit_forward_ms.size();
  const std::vector<double>& gather_fwd = calls.gather_forward;
  const std::vector<double>& reduce_scatter = calls.reduce_scatter;
  if ((!gather_fwd.empty() && gather_fwd.size() != n) || (!reduce_scatter.empty() && reduce_scatter.size() != n))
    throw std::logic_error("step model: " + in.plan.strategy + " plan has " + std::to_string(gather_fwd.size()) +
                           " forward gathers and " + std::to_string(reduce_scatter.size()) + " reduce-scatters for " +
                           std::to_string(n) + " units");
  const bool prefetch = in.config.parallel.prefetch;
  Stream stream;
  double t = 0;
  std::vector<double> ready(n, -1.0);
  auto issue = [&](size_t u, double at, const std::vector<double>& times) {
    if (ready[u] >= 0 || times.empty() || u >= times.size()) return;
    ready[u] = stream.run(at, times[u]);
  };
  for (size_t u = 0; u < n; ++u) {  // forward
    issue(u, t, gather_fwd);
    if (ready[u] >= 0) t = std::max(t, ready[u]);
    if (prefetch && u + 1 < n) issue(u + 1, t, gather_fwd);
    t += in.unit_forward_ms[u];
  }
  std::fill(ready.begin(), ready.end(), -1.0);
  if (!regather) std::fill(ready.begin(), ready.end(), 0.0);  // shard_grad_op keeps every unit gathered
  if (n > 0) ready[n - 1] = 0.0;                              // the last unit stays gathered into backward
  std::vector<double> bwd(n, 0.0);  // backward re-gathers by unit (the plan lists units 0 .. n-2)
  for (size_t u = 0; u < calls.gather_backward.size() && u < n; ++u) bwd[u] = calls.gather_backward[u];
  for (size_t k = n; k-- > 0;) {  // backward, last unit first
    if (ready[k] < 0) ready[k] = stream.run(t, bwd[k]);
    t = std::max(t, ready[k]);
    if (prefetch && k > 0 && ready[k - 1] < 0) ready[k - 1] = stream.run(t, bwd[k - 1]);
    t += in.unit_backward_ms[k];
    if (!reduce_scatter.empty()) {
      t = std::max(t, stream.free_at);   // the previous unit's reduce-scatter and the pending gathers are waited for
      stream.run(t, reduce_scatter[k]);  // in flight through the next unit's backward
    }
  }
  if (!reduce_scatter.empty()) t = std::max(t, stream.free_at);  // the end of backward waits for the last one
  const double micro_total = t;
  const auto A = static_cast<double>(std::max<int64_t>(1, in.config.train.accumulation));
  return A * (micro_total - in.forward_ms - in.backward_ms);
}

}  // namespace dtlab
