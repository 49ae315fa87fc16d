// schedule.hpp: learning-rate schedules with linear warmup (torch-free).
//
// Step s counts from 0. Warmup: lr * (s+1) / warmup_steps for s < warmup_steps. After warmup, with
// progress q = (s - warmup) / (steps - warmup) in [0, 1):
//   constant: lr
//   linear:   lr + (min_lr - lr) * q
//   cosine:   min_lr + (lr - min_lr) * (1 + cos(pi q)) / 2
//   step:     max(min_lr, lr * step_gamma^floor((s - warmup) / step_every))
#pragma once

#include <cstdint>

#include "lab/config.hpp"

namespace dtlab {

double learning_rate(const TrainConfig& train, int64_t step);

}  // namespace dtlab
