// memory_model_test.cpp: the memory model against hand counts — ZeRO closed forms (the paper's 7.5B example),
// FSDP's peak parameter memory, the activations of `tiny` tensor by tensor, the backward walk's peak, and the
// state categories against the cost plans.
#include <gtest/gtest.h>

#include "analysis/cost/memory_model.hpp"
#include "lab/config.hpp"
#include "lab/model_shape.hpp"
#include "strategies/cost_plan.hpp"

namespace dtlab::analysis {
namespace {

Config tiny(std::vector<std::string> overrides = {}, int64_t world = 1) {
  overrides.insert(overrides.begin(), {"train.micro_batch=4", "train.global_batch=" + std::to_string(4 * world)});
  return load_config_text("", overrides, world);
}

TEST(ZeroClosedForms, PaperExample7p5BOn64Ranks) {
  // Rajbhandari et al. 2020, Fig. 1: 7.5B parameters, N = 64, mixed-precision Adam (K = 12).
  const double psi = 7.5e9;
  EXPECT_DOUBLE_EQ(zero_bytes_per_rank(psi, 64, ZeroStage::ddp).total(), 120e9);
  EXPECT_NEAR(zero_bytes_per_rank(psi, 64, ZeroStage::zero1).total() / 1e9, 31.4, 0.05);
  EXPECT_NEAR(zero_bytes_per_rank(psi, 64, ZeroStage::zero2).total() / 1e9, 16.6, 0.05);
  EXPECT_NEAR(zero_bytes_per_rank(psi, 64, ZeroStage::zero3).total() / 1e9, 1.9, 0.05);
  // Term by term: ZeRO-2 keeps 2Ψ parameters, 2Ψ/N gradients, 12Ψ/N optimizer state.
  const ZeroBytes z2 = zero_bytes_per_rank(psi, 64, ZeroStage::zero2);
  EXPECT_DOUBLE_EQ(z2.params, 15e9);
  EXPECT_DOUBLE_EQ(z2.grads, 2 * psi / 64);
  EXPECT_DOUBLE_EQ(z2.optimizer, 12 * psi / 64);
  EXPECT_THROW(zero_bytes_per_rank(psi, 0, ZeroStage::zero1), std::invalid_argument);
}

TEST(ZeroClosedForms, FsdpPeakParameterMemoryIsShardsPlusLargestUnit) {
  EXPECT_DOUBLE_EQ(fsdp_peak_param_elements({10, 20, 30}, 2), 30.0 + 30.0);  // (10+20+30)/2 + 30
  EXPECT_DOUBLE_EQ(fsdp_peak_param_elements({10, 20, 30}, 1), 90.0);
}

// tiny: d 64, 4 heads (head_dim 16), 2 KV heads, ffn 172, vocab 256, seq 64; micro_batch 4 -> T = 256 tokens.
constexpr int64_t T = 256, d = 64, f = 172, H = 4, V = 256, S = 64, hd = 16;

TEST(Activations, TinyBlockTensorByTensorFp32) {
  const BlockActivationBytes b = block_activation_bytes(tiny());
  // RMSNorm (composite, fp32): its input x, rstd [T], x*rstd, the weighted output h (saved by the next linear).
  EXPECT_EQ(b.norm, 4 * T * d + 4 * T + 4 * T * d + 4 * T * d);
  // Attention: q after RoPE, K and V expanded to 4 heads, the SDPA output, the wo input; log-sum-exp [B, H, S].
  EXPECT_EQ(b.attention, 5 * 4 * T * d + 4 * T * H);
  // SwiGLU: gate output, up output, silu(gate), the product.
  EXPECT_EQ(b.mlp, 4 * 4 * T * f);
  EXPECT_EQ(b.block(), 1431552);
}

TEST(Activations, Bf16KeepsNormsInFp32) {
  const BlockActivationBytes b = block_activation_bytes(tiny({"precision.param_dtype=bf16"}));
  EXPECT_EQ(b.norm, 4 * T * d /*fp32 copy of x*/ + 4 * T + 4 * T * d + 2 * T * d /*bf16 output*/);
  EXPECT_EQ(b.attention, 5 * 2 * T * d + 4 * T * H);
  EXPECT_EQ(b.mlp, 4 * 2 * T * f);
}

TEST(Activations, CheckpointingKeepsTheBlockInput) {
  const int64_t full_block = block_activation_bytes(tiny()).block();
  EXPECT_EQ(block_saved_bytes(tiny(), 1), full_block);
  EXPECT_EQ(block_saved_bytes(tiny({"parallel.activation_checkpointing=full"}), 1), 4 * T * d);
  // checkpoint_every=2: blocks 0, 2, ... are checkpointed, block 1 is not.
  const Config every2 = tiny({"parallel.activation_checkpointing=full", "parallel.checkpoint_every=2"});
  EXPECT_EQ(block_saved_bytes(every2, 0), 4 * T * d);
  EXPECT_EQ(block_saved_bytes(every2, 1), full_block);
  const BlockActivationBytes b = block_activation_bytes(tiny());
  EXPECT_EQ(block_saved_bytes(tiny({"parallel.activation_checkpointing=selective"}), 0), 4 * T * d + b.norm + b.mlp);
}

TEST(Activations, TinyPeakIsTheLossBackwardByHand) {
  const int64_t block = 1431552, norm = 4 * T * d * 3 + 4 * T;
  const int64_t constant = 2 * T * 8 /*tokens, targets*/ + 4 * S * hd /*RoPE cos + sin*/;
  const int64_t log_probs = 4 * T * V;
  const ActivationPeak p = activation_peak(tiny());
  EXPECT_EQ(p.forward_end, constant + 2 * block + norm + log_probs);
  // nll_loss's and log_softmax's gradients, [T, V] fp32 each, next to everything the forward saved.
  EXPECT_EQ(p.phase, "loss backward");
  EXPECT_EQ(p.logits, log_probs + 2 * 4 * T * V);
  EXPECT_EQ(p.activations, constant + 2 * block + norm);
  // Measured by the counting allocator (dtlab train, tiny, micro_batch 4, single, fp32):
  // tensor_peak_bytes - state = 3 855 368 bytes; the model says 3 855 360.
  EXPECT_EQ(p.activations + p.logits, 3855360);
}

TEST(Activations, FullRecomputePeakIsTheLastBlockRecomputed) {
  const ActivationPeak p = activation_peak(tiny({"parallel.activation_checkpointing=full"}));
  const int64_t block = 1431552, input = 4 * T * d, constant = 2 * T * 8 + 4 * S * hd;
  // Block 0's input, then block 1's recompute: its tensors (sharing its input), its output, the incoming
  // gradient, and the SwiGLU backward's two [T, ffn] gradients.
  EXPECT_EQ(p.phase, "block 1 backward (recomputed)");
  EXPECT_EQ(p.activations, constant + input + block + 2 * input + 2 * 4 * T * f);
  EXPECT_EQ(p.logits, 0);
  EXPECT_EQ(p.activations, 1988608);  // counting allocator: 1 988 616
}

TEST(Activations, ShardedStrategiesHoldOneMoreUnitOutputGradient) {
  const Config c = tiny();
  EXPECT_EQ(activation_peak(c, /*sharded=*/true).activations - activation_peak(c).activations, 4 * T * d);
}

TEST(MemoryPrediction, StateCategoriesAreTheCostPlansExactly) {
  for (const std::string strategy : {"ddp", "fsdp_full_shard", "fsdp_shard_grad_op", "fsdp_no_shard", "zero1"}) {
    const Config c = tiny({"parallel.strategy=" + strategy}, 2);
    for (int rank : {0, 1}) {
      const CostPlan plan = cost_plan(c, rank);
      const MemoryPrediction m = predict_memory(c, plan);
      EXPECT_EQ(m.params, plan.state.params) << strategy;
      EXPECT_EQ(m.grads, plan.state.grads) << strategy;
      EXPECT_EQ(m.optimizer, plan.state.optimizer) << strategy;
      EXPECT_EQ(m.buffers, plan.state.buffers) << strategy;
      EXPECT_EQ(m.peak, m.params + m.grads + m.optimizer + m.buffers + m.activations + m.logits + m.comm_staging);
    }
  }
  // DDP, fp32 AdamW: 4 + 4 + 8 bytes per parameter, by hand from the parameter count.
  const Config ddp = tiny({"parallel.strategy=ddp"}, 2);
  const int64_t numel = model_counts(ddp.model).params;
  const MemoryPrediction m = predict_memory(ddp, cost_plan(ddp, 0));
  EXPECT_EQ(m.params, 4 * numel);
  EXPECT_EQ(m.grads, 4 * numel);
  EXPECT_EQ(m.optimizer, 8 * numel);
}

TEST(MemoryPrediction, GlooStagingOnlyForPrefetchingFullShard) {
  const Config c = tiny({"parallel.strategy=fsdp_full_shard"}, 2);
  const CostPlan plan = cost_plan(c, 0);
  int64_t largest_gather = 0;
  for (const auto& col : plan.collectives)
    if (col.op == "all_gather") largest_gather = std::max(largest_gather, col.bytes);
  EXPECT_EQ(predict_memory(c, plan, "gloo").comm_staging, largest_gather);
  EXPECT_EQ(predict_memory(c, plan, "nccl").comm_staging, 0);
  const Config no_prefetch = tiny({"parallel.strategy=fsdp_full_shard", "parallel.prefetch=false"}, 2);
  EXPECT_EQ(predict_memory(no_prefetch, cost_plan(no_prefetch, 0), "gloo").comm_staging, 0);
}

}  // namespace
}  // namespace dtlab::analysis
