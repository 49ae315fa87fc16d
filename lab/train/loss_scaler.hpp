// loss_scaler.hpp: dynamic loss scaling for fp16 compute (torch.amp.GradScaler's rule), shared by every strategy.
//
// Per step: backward on loss * scale(); gradients are divided by scale() when they are final; then
// finish_step(found_nonfinite), with found_nonfinite agreed by every rank: a step with an inf/nan gradient anywhere is
// skipped (no update, optimizer state untouched) and the scale halves; after `growth_interval` good steps in a row it
// doubles. A power-of-two scale is exact in floating point, so scaling changes results only where it saves a gradient
// from underflow.
//   LossScaler scaler(config.precision);
//   (loss * scaler.scale()).backward();  ...  grads /= scaler.scale();
//   if (scaler.finish_step(any_rank_nonfinite)) return;  // skipped
#pragma once

#include <cstdint>

#include "lab/config.hpp"

namespace dtlab {

class LossScaler {
 public:
  explicit LossScaler(const PrecisionConfig& precision)
      : enabled_(precision.loss_scale == "dynamic"),
        scale_(enabled_ ? precision.loss_scale_init : 1.0),
        growth_interval_(precision.loss_scale_growth_interval) {}

  bool enabled() const { return enabled_; }
  // The scale of the step in progress: multiply the loss by it, divide the final gradients by it.
  double scale() const { return scale_; }
  // Closes the step: true when it must be skipped. Updates the scale for the next step.
  bool finish_step(bool found_nonfinite) {
    used_scale_ = scale_;
    skipped_ = enabled_ && found_nonfinite;
    if (!enabled_) return false;
    if (skipped_) {
      scale_ *= 0.5;
      good_steps_ = 0;
    } else if (++good_steps_ >= growth_interval_) {
      scale_ *= 2.0;
      good_steps_ = 0;
    }
    return skipped_;
  }
  double used_scale() const { return used_scale_; }   // the scale the last finished step used
  int64_t good_steps() const { return good_steps_; }  // good steps in a row since the scale last changed
  // Checkpoints: continue from a saved scale and run of good steps.
  void restore(double scale, int64_t good_steps) {
    scale_ = scale;
    good_steps_ = good_steps;
  }
  bool skipped() const { return skipped_; }  // whether the last finished step was skipped

 private:
  bool enabled_;
  double scale_;
  int64_t growth_interval_;
  double used_scale_ = 1.0;
  int64_t good_steps_ = 0;
  bool skipped_ = false;
};

}  // namespace dtlab
