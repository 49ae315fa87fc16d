// fit.cpp: robust least-squares fit of the α-β-γ communication model to comm-bench rows (see fit.hpp).
#include "analysis/cost/fit.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <set>
#include <stdexcept>
#include <vector>

#include "lab/stats.hpp"

namespace dtlab::analysis {

namespace {

constexpr double kBisquareTuning = 4.685;     // 95% efficiency for normal residuals
constexpr double kMinRelativeScale = 0.05;    // never treat residuals under ~5% as outliers
constexpr double kSplitMustGainFactor = 0.5;  // a second line must halve the summed |relative residual|
constexpr size_t kMinSizesPerRegime = 3;
constexpr double kOneLineIsEnough = 0.01;        // mean |relative residual| below which no split is tried
constexpr double kLargestSizesTolerance = 0.10;  // the fit must hold this well at the largest sizes (see below)

void require_same_length(std::span<const double> x, std::span<const double> y, std::span<const double> w,
                         size_t minimum) {
  if (x.size() != y.size() || x.size() != w.size())
    throw std::invalid_argument("linear fit: x, y and weights differ in length (" + std::to_string(x.size()) + ", " +
                                std::to_string(y.size()) + ", " + std::to_string(w.size()) + ")");
  if (x.size() < minimum)
    throw std::invalid_argument("linear fit: needs at least " + std::to_string(minimum) + " points, got " +
                                std::to_string(x.size()));
  for (double wi : w)
    if (!(wi > 0)) throw std::invalid_argument("linear fit: weights must be > 0");
}

void require_positive(std::span<const double> y) {
  for (double yi : y)
    if (!(yi > 0)) throw std::invalid_argument("relative linear fit: every y must be > 0");
}

// Weighted fit with the clamps intercept >= 0 and slope >= 0.
LinearFit clamped_fit(std::span<const double> x, std::span<const double> y, std::span<const double> w) {
  LinearFit fit = weighted_linear_fit(x, y, w);
  if (fit.intercept < 0) fit = weighted_fit_through_origin(x, y, w);
  if (fit.slope < 0) {
    double sw = 0, swy = 0;
    for (size_t i = 0; i < y.size(); ++i) sw += w[i], swy += w[i] * y[i];
    fit = {swy / sw, 0};
  }
  return fit;
}

double summed_relative_residual(std::span<const double> x, std::span<const double> y, const SizeRegimes& r) {
  double sum = 0;
  for (size_t i = 0; i < x.size(); ++i) sum += std::fabs(r.at(x[i]) - y[i]) / y[i];
  return sum;
}

size_t distinct_count(std::span<const double> x) { return std::set<double>(x.begin(), x.end()).size(); }

// The largest |relative residual| of `r` over the points at or above `from_x`.
double worst_relative_residual_from(std::span<const double> x, std::span<const double> y, const SizeRegimes& r,
                                    double from_x) {
  double worst = 0;
  for (size_t i = 0; i < x.size(); ++i)
    if (x[i] >= from_x) worst = std::max(worst, std::fabs(r.at(x[i]) - y[i]) / y[i]);
  return worst;
}

// `r` with the points at or above `from_x` on a line of their own (the others keep `r`'s lines below it).
SizeRegimes with_own_line_from(std::span<const double> x, std::span<const double> y, double from_x) {
  std::vector<double> below_x, below_y, from_xs, from_y;
  for (size_t i = 0; i < x.size(); ++i) {
    (x[i] < from_x ? below_x : from_xs).push_back(x[i]);
    (x[i] < from_x ? below_y : from_y).push_back(y[i]);
  }
  return {robust_relative_fit(below_x, below_y), from_x, robust_relative_fit(from_xs, from_y)};
}

// One op/algorithm's measured points.
struct Series {
  std::vector<double> bytes, time_us;
};

const nlohmann::json& field(const nlohmann::json& object, const std::string& key, const std::string& where) {
  if (!object.is_object() || !object.contains(key))
    throw std::invalid_argument("comm-bench document: " + where + ": missing key '" + key + "'");
  return object[key];
}

double number(const nlohmann::json& object, const std::string& key, const std::string& where) {
  const nlohmann::json& v = field(object, key, where);
  if (!v.is_number())
    throw std::invalid_argument("comm-bench document: " + where + "." + key + ": must be a number, got " + v.dump());
  return v.get<double>();
}

std::string text(const nlohmann::json& object, const std::string& key, const std::string& where) {
  const nlohmann::json& v = field(object, key, where);
  if (!v.is_string())
    throw std::invalid_argument("comm-bench document: " + where + "." + key + ": must be a string, got " + v.dump());
  return v.get<std::string>();
}

// The line of `regimes` that holds at x.
const LinearFit& line_at(const SizeRegimes& regimes, double x) {
  return regimes.from_x > 0 && x >= regimes.from_x ? regimes.from : regimes.below;
}

}  // namespace

LinearFit weighted_linear_fit(std::span<const double> x, std::span<const double> y, std::span<const double> w) {
  require_same_length(x, y, w, 2);
  // Normal equations on centred data (the weighted means first), which keeps 1e3..3e8 byte sizes well conditioned.
  double sw = 0, mx = 0, my = 0;
  for (size_t i = 0; i < x.size(); ++i) sw += w[i], mx += w[i] * x[i], my += w[i] * y[i];
  mx /= sw;
  my /= sw;
  double sxx = 0, sxy = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    sxx += w[i] * (x[i] - mx) * (x[i] - mx);
    sxy += w[i] * (x[i] - mx) * (y[i] - my);
  }
  if (!(sxx > 0)) throw std::invalid_argument("linear fit: needs at least two distinct x values");
  LinearFit fit;
  fit.slope = sxy / sxx;
  fit.intercept = my - fit.slope * mx;
  return fit;
}

LinearFit weighted_fit_through_origin(std::span<const double> x, std::span<const double> y, std::span<const double> w) {
  require_same_length(x, y, w, 1);
  double sxx = 0, sxy = 0;
  for (size_t i = 0; i < x.size(); ++i) sxx += w[i] * x[i] * x[i], sxy += w[i] * x[i] * y[i];
  if (!(sxx > 0)) throw std::invalid_argument("linear fit through the origin: needs some x != 0");
  return {0, sxy / sxx};
}

LinearFit relative_linear_fit(std::span<const double> x, std::span<const double> y) {
  require_positive(y);
  std::vector<double> w;
  for (double yi : y) w.push_back(1.0 / (yi * yi));  // residual / y, squared
  return clamped_fit(x, y, w);
}

LinearFit robust_relative_fit(std::span<const double> x, std::span<const double> y) {
  LinearFit fit = relative_linear_fit(x, y);
  for (int iteration = 0; iteration < 50; ++iteration) {
    std::vector<double> relative(x.size()), predicted(x.size());
    for (size_t i = 0; i < x.size(); ++i) {
      predicted[i] = std::max(fit.at(x[i]), 1e-12 * y[i]);
      relative[i] = (y[i] - predicted[i]) / predicted[i];
    }
    std::vector<double> magnitudes;
    for (double r : relative) magnitudes.push_back(std::fabs(r));
    const double scale = std::max(median(magnitudes) / 0.6745, kMinRelativeScale);
    std::vector<double> kept_x, kept_y, w;
    for (size_t i = 0; i < x.size(); ++i) {
      const double u = relative[i] / (kBisquareTuning * scale);
      if (std::fabs(u) >= 1) continue;  // weight 0: an outlier
      kept_x.push_back(x[i]);
      kept_y.push_back(y[i]);
      w.push_back((1 - u * u) * (1 - u * u) / (predicted[i] * predicted[i]));
    }
    if (distinct_count(kept_x) < 2) break;  // too few inliers to refit: keep the last line
    const LinearFit next = clamped_fit(kept_x, kept_y, w);
    const bool settled = std::fabs(next.intercept - fit.intercept) <= 1e-9 * std::max(1.0, std::fabs(fit.intercept)) &&
                         std::fabs(next.slope - fit.slope) <= 1e-9 * std::max(1e-30, std::fabs(fit.slope));
    fit = next;
    if (settled) break;
  }
  return fit;
}

SizeRegimes fit_size_regimes(std::span<const double> x, std::span<const double> y) {
  SizeRegimes best;
  best.below = robust_relative_fit(x, y);
  const double single = summed_relative_residual(x, y, best);
  std::vector<double> sizes(x.begin(), x.end());
  std::sort(sizes.begin(), sizes.end());
  sizes.erase(std::unique(sizes.begin(), sizes.end()), sizes.end());
  if (sizes.size() < 2 * kMinSizesPerRegime || single <= kOneLineIsEnough * static_cast<double>(x.size())) return best;
  double best_residual = single;
  for (size_t split = kMinSizesPerRegime; split + kMinSizesPerRegime <= sizes.size(); ++split) {
    const SizeRegimes candidate = with_own_line_from(x, y, sizes[split]);
    const double residual = summed_relative_residual(x, y, candidate);
    if (residual <= kSplitMustGainFactor * single && residual < best_residual) {
      best = candidate;
      best_residual = residual;
    }
  }
  // The fit must also hold at the largest sizes, where a training step's buckets and shards lie. Relative residuals
  // weigh every size alike, so small sizes that scatter (a shaped link's per-call jitter) can pull one line off the
  // large ones without a second line halving the summed residual. When the fit misses one of the
  // kMinSizesPerRegime largest sizes by more than kLargestSizesTolerance, those sizes get a line of their own if
  // it fits them better.
  const double largest_from = sizes[sizes.size() - kMinSizesPerRegime];
  const double worst = worst_relative_residual_from(x, y, best, largest_from);
  if (worst > kLargestSizesTolerance && !(best.from_x > 0 && best.from_x >= largest_from)) {
    const SizeRegimes own = with_own_line_from(x, y, largest_from);
    if (worst_relative_residual_from(x, y, own, largest_from) < worst) best = own;
  }
  return best;
}

const char* fitted_placement(const std::string& op) {
  return op == "all_reduce" || op == "broadcast" ? "in_place" : "out_of_place";
}

CommModel fit_comm_model(const nlohmann::json& comm_bench) {
  const nlohmann::json& results = field(comm_bench, "results", "top level");
  if (!results.is_array() || results.empty())
    throw std::invalid_argument(
        "comm-bench document: results: no rows to fit (run `dtlab comm-bench --json FILE` with a size sweep, "
        "e.g. -b 1K -e 256M -f 4)");
  // The ranks every row ran over: the group's (comm-bench --group node|cross), else the whole job's.
  const char* size_key = comm_bench.contains("group_size") ? "group_size" : "world_size";
  const double world = number(comm_bench, size_key, "top level");
  if (world < 2 || world != std::floor(world))
    throw std::invalid_argument(std::string("comm-bench document: ") + size_key + " = " +
                                field(comm_bench, size_key, "").dump() + ": a fit needs a whole number >= 2 of ranks");
  const int p = static_cast<int>(world);

  std::map<std::string, Series> series;  // "<op>/<algorithm>" -> points
  for (size_t i = 0; i < results.size(); ++i) {
    const nlohmann::json& row = results[i];
    const std::string where = "results[" + std::to_string(i) + "]";
    const std::string op = text(row, "op", where), algorithm = text(row, "algorithm", where);
    const std::string placement = fitted_placement(op);
    const double time_us = number(field(row, placement, where), "time_us", where + "." + placement);
    const double bytes = number(row, "bytes", where);
    if (!(time_us > 0))
      throw std::invalid_argument("comm-bench document: " + where + "." + placement + ".time_us must be > 0");
    cost_shape(op, algorithm, static_cast<int64_t>(bytes), p);  // rejects unknown op/algorithm pairs by name
    series[op + "/" + algorithm].bytes.push_back(bytes);
    series[op + "/" + algorithm].time_us.push_back(time_us);
  }

  // First pass: the time lines per key.
  std::map<std::string, SizeRegimes> lines;
  for (const auto& [key, points] : series) {
    if (distinct_count(points.bytes) < 2)
      throw std::invalid_argument("comm-bench document: " + key +
                                  " has fewer than two message sizes; a fit of α and β needs a size sweep");
    lines[key] = fit_size_regimes(points.bytes, points.time_us);
  }

  // β of an all-gather of `algorithm` (else the other family's) at message size x.
  auto all_gather_beta = [&](const std::string& algorithm, double x) -> std::optional<double> {
    for (const std::string& alg : {algorithm, std::string(algorithm == "ring" ? "backend" : "ring")}) {
      const auto it = lines.find("all_gather/" + alg);
      if (it != lines.end()) return line_at(it->second, x).slope / cost_shape("all_gather", alg, 1, p).beta;
    }
    return std::nullopt;
  };

  // Second pass: α from the intercepts; β from the all-gathers; γ from the reducing ops' extra slope (fit.hpp).
  CommModel model;
  model.backend = comm_bench.value("backend", std::string("gloo"));
  for (const auto& [key, regimes] : lines) {
    const auto slash = key.find('/');
    const std::string op = key.substr(0, slash), algorithm = key.substr(slash + 1);
    const CostShape unit = cost_shape(op, algorithm, 1, p);  // per-byte multipliers
    const std::vector<double>& sizes = series[key].bytes;
    // α, β, γ of one line, whose sizes run from lo to hi.
    auto coefficients = [&](const LinearFit& line, double lo, double hi) {
      CollectiveCost c;
      c.alpha_us = unit.alpha > 0 ? line.intercept / unit.alpha : 0;
      if (unit.gamma == 0) {
        c.beta_us_per_byte = unit.beta > 0 ? line.slope / unit.beta : 0;
        return c;
      }
      const std::optional<double> beta = all_gather_beta(algorithm, std::sqrt(lo * hi));
      const double rest = beta ? line.slope - unit.beta * *beta : -1;
      if (beta && rest >= 0) {
        c.beta_us_per_byte = *beta;
        c.gamma_us_per_byte = rest / unit.gamma;
      } else {
        c.beta_us_per_byte = line.slope / unit.beta;
      }
      return c;
    };
    const double smallest = *std::min_element(sizes.begin(), sizes.end());
    const double largest = *std::max_element(sizes.begin(), sizes.end());
    if (regimes.from_x == 0) {
      model.ops[key] = coefficients(regimes.below, smallest, largest);
      continue;
    }
    double below_largest = smallest;
    for (double s : sizes)
      if (s < regimes.from_x) below_largest = std::max(below_largest, s);
    CollectiveCost c = coefficients(regimes.below, smallest, below_largest);
    const CollectiveCost large = coefficients(regimes.from, regimes.from_x, largest);
    c.large_from_bytes = static_cast<int64_t>(regimes.from_x);
    c.large_alpha_us = large.alpha_us;
    c.large_beta_us_per_byte = large.beta_us_per_byte;
    c.large_gamma_us_per_byte = large.gamma_us_per_byte;
    model.ops[key] = c;
  }

  // The point-to-point figure: one exchange of `bytes` in both directions at once.
  if (comm_bench.contains("p2p") && comm_bench["p2p"].is_object()) {
    const double bytes = number(comm_bench["p2p"], "bytes", "p2p");
    const double time_us = number(comm_bench["p2p"], "time_us", "p2p");
    const auto ring_gather = model.ops.find("all_gather/ring");
    const double alpha = ring_gather != model.ops.end() ? ring_gather->second.alpha_us : 0;
    if (bytes > 0 && time_us > alpha) model.ops["send_recv/backend"] = {alpha, (time_us - alpha) / bytes, 0};
  }
  // The overlap line: how much of a collective compute running at once hid (lab/tools/comm_bench.hpp).
  if (comm_bench.contains("overlap") && comm_bench["overlap"].is_object()) {
    const double hidden = number(comm_bench["overlap"], "hidden_fraction", "overlap");
    if (!(hidden >= -1 && hidden <= 1))
      throw std::invalid_argument("comm-bench document: overlap.hidden_fraction must be in [-1, 1], got " +
                                  std::to_string(hidden));
    model.overlap_hidden = hidden;
    const double bytes = number(comm_bench["overlap"], "bytes", "overlap");
    if (!(bytes >= 1) || bytes != std::floor(bytes))
      throw std::invalid_argument("comm-bench document: overlap.bytes must be a whole number >= 1, got " +
                                  std::to_string(bytes));
    model.overlap_bytes = static_cast<int64_t>(bytes);
    model.overlap_ranks = p;  // the line runs over the rows' group
  }
  return model;
}

}  // namespace dtlab::analysis
