// tensor_parallel_plan.hpp: the tensor-parallel model plan (parallel.tp = t > 1) — which slice of each parameter a
// rank of a tp group keeps, and the layers (lab/train/tensor_parallel.hpp) those slices need.
//
//   column-parallel (rows split, axis 0): wq, wk, wv (this rank's heads), w_gate, w_up (its ffn_hidden / t)
//   row-parallel (columns split, axis 1): wo, w_down (the matching inputs)
//   vocabulary-parallel (rows split, axis 0): tok_embedding, lm_head (V / t rows each)
//   replicated: attn_norm, mlp_norm, final_norm (every tp rank holds them; only tp rank 0 counts them in the norm)
// With parallel.sequence_parallel the layers also split the norm and residual regions along the sequence
// (lab/train/tensor_parallel.hpp); the parameters' slices are the same.
// Every rank builds the whole model from the seed first (the weights of `single`), then keeps its slices, so a tp
// run starts from exactly the reference's weights. Config validation has checked that t divides n_heads,
// n_kv_heads, ffn_hidden and vocab_size.
#pragma once

#include <string>
#include <vector>

#include "lab/train/model_plan.hpp"

namespace dtlab {

class Comm;

class TensorParallelPlan final : public ModelParallelPlan {
 public:
  explicit TensorParallelPlan(bool sequence_parallel) : sequence_parallel_(sequence_parallel) {}
  std::string id() const override {
    return sequence_parallel_ ? "tensor_parallel+sequence_parallel" : "tensor_parallel";
  }
  void apply(GPT& model, MeshComms& comms) override;
  std::vector<ParamSplit> splits(GPT& model) const override;
  double sum_over_model_parallel(double local) override;

 private:
  bool sequence_parallel_;
  Comm* tp_ = nullptr;
};

// The axis of the whole tensor the tensor-parallel plan splits for the parameter named `name` (its last component:
// "block.3.wq" -> wq), or -1 when it is replicated.
int tensor_parallel_axis(const std::string& name);

}  // namespace dtlab
