// schedule.cpp: learning-rate schedules (formulas in schedule.hpp).
#include "lab/train/schedule.hpp"

#include <algorithm>
#include <cmath>
#include <numbers>
#include <stdexcept>

namespace dtlab {

double learning_rate(const TrainConfig& t, int64_t step) {
  if (step < t.warmup_steps) return t.lr * static_cast<double>(step + 1) / static_cast<double>(t.warmup_steps);
  const int64_t since_warmup = step - t.warmup_steps;
  const double decay_steps = static_cast<double>(std::max<int64_t>(1, t.steps - t.warmup_steps));
  const double progress = std::min(1.0, static_cast<double>(since_warmup) / decay_steps);
  if (t.schedule == "constant") return t.lr;
  if (t.schedule == "linear") return t.lr + (t.min_lr - t.lr) * progress;
  if (t.schedule == "cosine") return t.min_lr + (t.lr - t.min_lr) * 0.5 * (1.0 + std::cos(std::numbers::pi * progress));
  if (t.schedule == "step")
    return std::max(t.min_lr, t.lr * std::pow(t.step_gamma, static_cast<double>(since_warmup / t.step_every)));
  throw std::invalid_argument("train.schedule='" + t.schedule + "' is not one of constant | linear | cosine | step");
}

}  // namespace dtlab
