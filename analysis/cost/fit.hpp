// fit.hpp: fits the communication cost model (α, β, γ per op/algorithm) to a `dtlab comm-bench --json`
// document, by least squares over message sizes (torch-free).
//
//   nlohmann::json bench = nlohmann::json::parse(std::ifstream("comm_bench.json"));
//   CommModel m = fit_comm_model(bench);                     // analysis/cost/comm_model.hpp
//
// Per op/algorithm key the time is linear in the message size at one world size p:
//   t(S) = a·α + S·(b·β + c·γ)     (a, b, c from cost_shape; b and c are per byte)
// so a fit of t = intercept + slope·S gives α = intercept / a exactly, and one number for b·β + c·γ.
//
// How the line is fitted (robust_relative_fit):
//   * relative error: every residual is divided by the time (weight 1/t²), so 1 KiB messages count as much as
//     256 MiB ones — the target is per-collective time within 10% (median) over that range;
//   * robust: iteratively reweighted least squares with Tukey's bisquare on the relative residuals (scale from
//     their median absolute deviation, at least 5%). On a shared CPU a collective that waits for a core pays a
//     scheduler tick (~2 ms) per call; those rows are many times the quiet figure and would drag a plain mean
//     line away from every other row, so they get weight 0;
//   * clamps: a negative intercept is refitted through the origin (α = 0), a negative slope becomes 0.
// Size regimes (fit_size_regimes): when one line misses by more than 1% on average and two lines split at one of
// the measured sizes (>= 3 sizes each side) halve its summed |relative residual|, the key gets a large-message
// regime (comm_model.hpp). And when the fit still misses one of the 3 largest sizes by more than 10% (small sizes
// that scatter can pull one line off the large ones), those 3 sizes get the large-message line if it fits them
// better: a training step's collectives are that large.
//
// β and γ cannot be separated from one op at one world size. We resolve it this way, per regime:
//   * all_gather/<alg> has no reduction: β = slope / ((p-1)/p);
//   * a reducing op (all_reduce, reduce_scatter) takes the β of the all_gather of its algorithm family at the
//     same size (the other family's when absent) and puts the rest of its slope into γ; when the rest is
//     negative (the reducing op moves bytes faster than that all-gather), γ = 0 and β = slope / b — the fitted
//     world size is always reproduced exactly, only extrapolation to other p depends on the split;
//   * broadcast: β = slope / ⌈log2 p⌉, γ = 0;
//   * send_recv/backend from the document's single point-to-point figure ("p2p"): α is the all_gather/ring α
//     per step (one ring step is one exchange), β = (t - α) / S, at every size.
// Which figure: the one that matches how lab/comm is called — in-place for all_reduce and broadcast (c10d's
// calls are in place; comm-bench's out-of-place variant adds a copy the lab never makes), out-of-place for
// all_gather and reduce_scatter (the lab passes separate input and output buffers, as FSDP does).
#pragma once

#include <span>
#include <string>

#include <nlohmann/json.hpp>

#include "analysis/cost/comm_model.hpp"

namespace dtlab::analysis {

struct LinearFit {
  double intercept = 0, slope = 0;
  double at(double x) const { return intercept + slope * x; }
};

// Weighted least squares of y ≈ intercept + slope·x: minimises Σ w_i (y_i - intercept - slope·x_i)².
// REQUIRES: equal lengths >= 2, weights > 0, at least two distinct x. Throws std::invalid_argument otherwise.
LinearFit weighted_linear_fit(std::span<const double> x, std::span<const double> y, std::span<const double> w);
// The same through the origin (intercept = 0). REQUIRES: lengths >= 1 and some x != 0.
LinearFit weighted_fit_through_origin(std::span<const double> x, std::span<const double> y, std::span<const double> w);
// The fit of the relative error with the clamps: weights 1/y², intercept >= 0, slope >= 0. REQUIRES: every y > 0.
LinearFit relative_linear_fit(std::span<const double> x, std::span<const double> y);
// relative_linear_fit, then bisquare reweighting until it settles (see above). REQUIRES: as relative_linear_fit.
LinearFit robust_relative_fit(std::span<const double> x, std::span<const double> y);

struct SizeRegimes {
  LinearFit below;    // the only line when from_x == 0
  double from_x = 0;  // 0 = one regime; else points with x >= from_x follow `from`
  LinearFit from;
  double at(double x) const { return from_x > 0 && x >= from_x ? from.at(x) : below.at(x); }
};
// One robust line, or two split at a measured x, as described above. REQUIRES: as relative_linear_fit.
SizeRegimes fit_size_regimes(std::span<const double> x, std::span<const double> y);

// "in_place" for all_reduce and broadcast, "out_of_place" for all_gather and reduce_scatter: the comm-bench
// figure the model is fitted to (and should be compared with).
const char* fitted_placement(const std::string& op);

// Fits every op/algorithm present in `comm_bench["results"]` (at least two message sizes each).
// Throws std::invalid_argument naming the key when the document lacks results, world_size, a row's field, or
// has a key with fewer than two sizes. The document's optional "overlap" line becomes the model's overlap_hidden.
CommModel fit_comm_model(const nlohmann::json& comm_bench);

}  // namespace dtlab::analysis
