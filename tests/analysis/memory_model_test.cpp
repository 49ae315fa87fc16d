// memory_model_test.cpp: the memory model against hand counts — ZeRO closed forms (the paper's 7.5B example),
// FSDP's peak parameter memory, the activations of `tiny` tensor by tensor, the backward walk's peak, and each
// state category and the peak per rank counted by hand from tiny's shape (ddp, zero1, full_shard with padding).
#include <gtest/gtest.h>

#include "analysis/cost/memory_model.hpp"
#include "lab/config.hpp"
#include "strategies/catalog.hpp"
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

// tiny's parameters by hand (d 64, 2 layers, 4 heads of 16, 2 KV heads, ffn 172, vocab 256, untied head):
//   embedding 256·64 = 16 384; per block: norms 2·64 = 128, wq + wo 2·64·64 = 8 192, wk + wv 2·(2·16)·64 = 4 096,
//   w_gate + w_up + w_down 3·172·64 = 33 024 -> 45 440; final norm 64; head 256·64 = 16 384.
//   Ψ = 16 384 + 2·45 440 + 64 + 16 384 = 123 712.
// FSDP units (wrap=block): embedding 16 384, block.0 45 440, block.1 45 440, head 64 + 16 384 = 16 448.
// Activations + logits at the peak (hand count in TinyPeakIsTheLossBackwardByHand): 3 068 928 + 786 432
// = 3 855 360; sharded strategies keep one more [T, d] fp32 gradient: + 4·256·64 = 65 536 -> 3 920 896.
constexpr int64_t kTinyPeakActivations = 3068928, kTinyPeakLogits = 786432, kShardedExtra = 65536;

// What a memory cap per rank must hold is the largest peak over every class of rank (each pipeline stage's first and
// last rank), equal to the largest over every rank. With most blocks on the second of four stages that stage is the
// largest, which the first and the last rank alone would miss; under pp 2 x FULL_SHARD over 3 padded ranks, the
// largest is still found among the classes.
TEST(MemoryPrediction, LargestRankPeakLooksAtEveryClassOfRank) {
  const auto largest_of_every_rank = [](const Config& c, int* argmax) {
    int64_t most = -1;
    for (int r = 0; r < c.world_size; ++r)
      if (const int64_t peak = rank_memory(c, r).device_peak; peak > most) {
        most = peak;
        *argmax = r;
      }
    return most;
  };
  const Config middle = load_config_text("",
                                         {"parallel.strategy=ddp", "parallel.pp=4", "model.n_layers=8",
                                          "parallel.pp_split=1,6,7", "train.micro_batch=1", "train.global_batch=4"},
                                         4);
  int argmax = -1;
  const int64_t most = largest_of_every_rank(middle, &argmax);
  EXPECT_EQ(argmax, 1) << "the stage with five of the eight blocks";
  EXPECT_EQ(largest_rank_peak_memory(middle).device_peak, most);
  const Config sharded =
      load_config_text("",
                       {"parallel.strategy=fsdp_full_shard", "parallel.pp=2", "model.d_model=42", "model.n_heads=3",
                        "model.n_kv_heads=1", "model.ffn_hidden=113", "train.micro_batch=1", "train.global_batch=6"},
                       6);
  EXPECT_EQ(largest_rank_peak_memory(sharded).device_peak, largest_of_every_rank(sharded, &argmax));
}

TEST(MemoryPrediction, DdpByHandFromTheParameterCount) {
  // fp32 AdamW, world 2: every rank holds 4Ψ params, 4Ψ grads, 8Ψ moments; fp32 reduce needs no wire buffer.
  const Config c = tiny({"parallel.strategy=ddp"}, 2);
  const MemoryPrediction m = predict_memory(c, cost_plan(c, 1));
  EXPECT_EQ(m.params, 494848);     // 4 · 123 712
  EXPECT_EQ(m.grads, 494848);      // 4 · 123 712
  EXPECT_EQ(m.optimizer, 989696);  // 8 · 123 712
  EXPECT_EQ(m.buffers, 0);
  EXPECT_EQ(m.activations, kTinyPeakActivations);
  EXPECT_EQ(m.logits, kTinyPeakLogits);
  EXPECT_EQ(m.comm_staging, 0);
  EXPECT_EQ(m.peak, 5834752);  // 494 848 + 494 848 + 989 696 + 0 + 3 855 360
}

TEST(MemoryPrediction, Zero1ByHandAtWorldTwo) {
  // Every unit splits evenly in two (16 384, 45 440, 45 440, 16 448 are even): shards 8 192 + 22 720 + 22 720
  // + 8 224 = 61 856 = Ψ/2. zero1 keeps full fp32 params and grads; buffers: the fp32 gradient shard and the
  // reduce-scatter output shard (4 B each per shard element) and the source buffer of the all-gathers after the
  // optimizer step (the largest shard, a block's: 4 · 22 720 = 90 880); AdamW moments only for its shard.
  const Config c = tiny({"parallel.strategy=zero1"}, 2);
  for (int rank : {0, 1}) {
    const MemoryPrediction m = predict_memory(c, cost_plan(c, rank));
    EXPECT_EQ(m.params, 494848) << rank;     // 4 · 123 712
    EXPECT_EQ(m.grads, 494848) << rank;      // 4 · 123 712
    EXPECT_EQ(m.buffers, 585728) << rank;    // (4 + 4) · 61 856 + 90 880
    EXPECT_EQ(m.optimizer, 494848) << rank;  // 8 · 61 856
    EXPECT_EQ(m.activations, kTinyPeakActivations + kShardedExtra) << rank;
    EXPECT_EQ(m.comm_staging, 0) << rank;
    EXPECT_EQ(m.peak, 5991168) << rank;  // 3 · 494 848 + 585 728 + 3 920 896
  }
}

TEST(MemoryPrediction, FullShardByHandWithPaddingAtWorldThree) {
  // World 3 pads every unit to a multiple of 3: 16 384 -> 16 386 (shard 5 462), 45 440 -> 45 441 (15 147),
  // 16 448 -> 16 449 (5 483). Shards: 5 462 + 2·15 147 + 5 483 = 41 239 elements per rank, padding included.
  // Padding sits at the end of the last shard: rank 2 has 2 + 1 + 1 + 1 = 5 padding elements (41 234 real).
  const Config c = tiny({"parallel.strategy=fsdp_full_shard"}, 3);
  const int64_t params = 164956;  // fp32 master shards: 4 · 41 239
  const int64_t grads = 164956;   // fp32 gradient shards: 4 · 41 239
  // Reduce-scatter output shards 4 · 41 239 = 164 956, plus the worst moment, block.1's backward: its gathered
  // parameters and gradient, block.0 prefetched (3 · 45 441) and the head's gradient, its reduce-scatter still in
  // flight (16 449): 4 · 152 772 = 611 088.
  const int64_t buffers = 776044;
  const MemoryPrediction r0 = predict_memory(c, cost_plan(c, 0), "gloo");
  EXPECT_EQ(r0.params, params);
  EXPECT_EQ(r0.grads, grads);
  EXPECT_EQ(r0.buffers, buffers);
  EXPECT_EQ(r0.optimizer, 329912);  // 8 · 41 239: rank 0's shards have no padding
  EXPECT_EQ(r0.activations, kTinyPeakActivations + kShardedExtra);
  EXPECT_EQ(r0.logits, kTinyPeakLogits);
  // Gloo stages the largest unit re-gathered in backward (the head is not): 45 441 · 4 = 181 764.
  EXPECT_EQ(r0.comm_staging, 181764);
  EXPECT_EQ(r0.peak, 5538528);  // 164 956 + 164 956 + 329 912 + 776 044 + 3 920 896 + 181 764

  const MemoryPrediction r2 = predict_memory(c, cost_plan(c, 2), "gloo");
  EXPECT_EQ(r2.params, params);  // padding is held like any other element
  EXPECT_EQ(r2.buffers, buffers);
  EXPECT_EQ(r2.optimizer, 329872);  // 8 · 41 234: the optimizer never sees padding
  EXPECT_EQ(r2.peak, 5538488);      // rank 0's peak - 8 · 5

  EXPECT_EQ(predict_memory(c, cost_plan(c, 0), "nccl").peak, 5356764);  // no staging: 5 538 528 - 181 764
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

// The ring reduce-scatter's scratch (two chunks of the unit's gradient) is alive beside the backward of the blocks
// before that unit. tiny widened to d 256 (4 heads of 64, 2 KV heads), ffn 688, so a block's unit is large:
//   block: norms 2·256, wq + wo 2·256·256, wk + wv 2·128·256, SwiGLU 3·688·256 -> 725 504 elements;
//   head: final norm 256 + 256·256 -> 65 792 elements. fp32 gradients, world 2: scratch = 2 · (n/2) · 4 = 4n bytes.
const std::vector<std::string> kWide = {"model.d_model=256", "model.n_heads=4", "model.n_kv_heads=2",
                                        "model.ffn_hidden=688", "parallel.strategy=fsdp_shard_grad_op"};

std::vector<std::string> wide(std::vector<std::string> more) {
  std::vector<std::string> all = kWide;
  all.insert(all.end(), more.begin(), more.end());
  return all;
}

TEST(MemoryPrediction, RingScratchOfALaterUnitBesideTheBlocksBackward) {
  // T = 256: block 1's backward is the peak already (SwiGLU's backward outweighs the loss's [T, V] gradients);
  // only the head has finished by then, so its ring is the one in flight: 4 · 65 792 = 263 168 bytes.
  const Config c = tiny(wide({}), 2);
  const Config backend = tiny(wide({"parallel.reduce_scatter=backend"}), 2);
  const MemoryPrediction ring = predict_memory(c, cost_plan(c, 0));
  const MemoryPrediction plain = predict_memory(backend, cost_plan(backend, 0));
  EXPECT_EQ(plain.ring_scratch, 0);
  EXPECT_EQ(plain.peak_phase, "block 1 backward");
  EXPECT_EQ(ring.ring_scratch, 263168);
  EXPECT_EQ(ring.peak_phase, "block 1 backward");
  EXPECT_EQ(ring.peak - plain.peak, 263168);

  // T = 64: block 1 still outweighs block 0 by block 0's saved tensors (1 426 944 bytes at T = 64), but block 0's
  // backward has block 1's ring beside it, 4 · 725 504 = 2 902 016 bytes: the peak moves into block 0.
  const Config short_batch = tiny(wide({"train.micro_batch=1", "train.global_batch=2"}), 2);
  const MemoryPrediction moved = predict_memory(short_batch, cost_plan(short_batch, 0));
  const ActivationPeak a = activation_peak(short_batch, true);
  ASSERT_EQ(a.block_backward.size(), 2u);
  EXPECT_EQ(a.block_backward[1].activations - a.block_backward[0].activations, 1426944);
  EXPECT_EQ(moved.ring_scratch, 2902016);
  EXPECT_EQ(moved.peak_phase, "block 0 backward");
  EXPECT_EQ(moved.activations, a.block_backward[0].activations);
  EXPECT_EQ(moved.logits, 0);
  EXPECT_EQ(moved.peak, moved.params + moved.grads + moved.optimizer + moved.buffers + moved.activations + 2902016);

  // One unit (wrap=model) reduce-scatters after the whole backward: no block sees its ring.
  const Config one_unit = tiny(wide({"parallel.wrap=model"}), 2);
  EXPECT_EQ(predict_memory(one_unit, cost_plan(one_unit, 0)).ring_scratch, 0);
}

}  // namespace
}  // namespace dtlab::analysis
