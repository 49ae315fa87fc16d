// model_shape_test.cpp: presets and the analytic parameter / FLOP counts of lab/model_shape.hpp, and the flat-unit
// grouping of parallel.wrap (lab/unit_layout.hpp).
//
//   ./build/bin/config_tests --gtest_filter='ModelShape*'
//
// Counts are worked out by hand below from the architecture in model_shape.cpp; the real LibTorch model is
// compared with the same function in model_test.cpp.
#include "lab/model_shape.hpp"

#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "lab/config.hpp"
#include "lab/unit_layout.hpp"
#include "strategies/catalog.hpp"

namespace dtlab {
namespace {

ModelConfig preset(const std::string& name) {
  ModelConfig m;
  apply_model_preset(name, m);
  return m;
}

TEST(ModelShape, TinyCountsByHand) {
  // tiny: d=64, L=2, n_heads=4, n_kv=2 -> hd=16, ffn=172, V=256, s=64, untied.
  //   wq 64*64 = 4096, wk = wv = (2*16)*64 = 2048 each, wo 64*64 = 4096       -> attention 12288
  //   w_gate, w_up, w_down 3*172*64 = 33024; norms 2*64 = 128                   -> block 45440
  //   embedding 256*64 = 16384, lm_head 16384, final_norm 64
  //   params = 2*45440 + 16384 + 16384 + 64 = 123712
  const ModelCounts c = model_counts(preset("tiny"));
  EXPECT_EQ(c.params_per_block, 45440);
  EXPECT_EQ(c.embedding_params, 16384);
  EXPECT_EQ(c.params, 123712);
  EXPECT_EQ(c.non_embedding_params, 123712 - 16384);
  // N = params - embedding (lookup is no matmul) = 107328; 6N = 643968; 12*L*d*s = 12*2*64*64 = 98304
  EXPECT_DOUBLE_EQ(c.flops_per_token, 643968.0 + 98304.0);
}

TEST(ModelShape, SevenBMatchesLlama) {
  // 7b: d=4096, L=32, 32 heads (no GQA), ffn=11008, V=32000, untied: LLaMA-7B's 6 738 415 616 parameters.
  //   block = 2*4096 + 4*4096^2 + 3*4096*11008 = 8192 + 67108864 + 135266304 = 202383360
  //   params = 32*202383360 + 2*32000*4096 + 4096 = 6476267520 + 262144000 + 4096
  const ModelCounts c = model_counts(preset("7b"));
  EXPECT_EQ(c.params_per_block, 202383360);
  EXPECT_EQ(c.params, 6738415616);
  EXPECT_NEAR(static_cast<double>(c.params), 6.74e9, 0.01e9);
  EXPECT_EQ(c.embedding_params, 131072000);
  // N = 6738415616 - 131072000 = 6607343616; 6N = 39644061696; 12*32*4096*4096 = 6442450944
  EXPECT_DOUBLE_EQ(c.flops_per_token, 39644061696.0 + 6442450944.0);
}

TEST(ModelShape, OneBTiedCountsHeadOnce) {
  // 1b: d=2048, L=16, 32 heads, 8 kv heads -> hd=64, kv width 512, ffn=8192, V=128256, tied.
  //   block = 2*2048^2 (wq, wo) + 2*512*2048 (wk, wv) + 3*2048*8192 + 2*2048
  //         = 8388608 + 2097152 + 50331648 + 4096 = 60821504
  //   params = 16*60821504 + 128256*2048 + 2048 = 973144064 + 262668288 + 2048 = 1235814400 (Llama-3.2-1B)
  const ModelCounts c = model_counts(preset("1b"));
  EXPECT_EQ(c.params_per_block, 60821504);
  EXPECT_EQ(c.params, 1235814400);
  EXPECT_EQ(c.embedding_params, 262668288);
  EXPECT_EQ(c.non_embedding_params, 1235814400 - 262668288);
  // Tied: the shared matrix is the lm_head matmul, so N = params. 6N = 7414886400; 12*16*2048*2048 = 805306368
  EXPECT_DOUBLE_EQ(c.flops_per_token, 7414886400.0 + 805306368.0);
}

TEST(ModelShape, OneTwentyFiveM) {
  // 125m: d=768, L=12, 12 heads = 12 kv heads, ffn=2048, V=50304, tied.
  //   block = 4*768^2 + 3*768*2048 + 2*768 = 2359296 + 4718592 + 1536 = 7079424
  //   params = 12*7079424 + 50304*768 + 768 = 84953088 + 38633472 + 768 = 123587328
  const ModelCounts c = model_counts(preset("125m"));
  EXPECT_EQ(c.params_per_block, 7079424);
  EXPECT_EQ(c.params, 123587328);
}

TEST(ModelShape, TyingRemovesExactlyOneVocabMatrix) {
  ModelConfig untied = preset("small");
  ModelConfig tied = untied;
  tied.tie_embeddings = true;
  const int64_t vocab_matrix = untied.vocab_size * untied.d_model;
  EXPECT_EQ(model_counts(untied).params - model_counts(tied).params, vocab_matrix);
  // Same matmul work either way: the head is a matmul whether or not it shares the embedding's storage.
  EXPECT_DOUBLE_EQ(model_counts(untied).flops_per_token, model_counts(tied).flops_per_token);
}

TEST(ModelShape, PresetNamesInOrder) {
  EXPECT_EQ(model_preset_names(), (std::vector<std::string>{"tiny", "small", "medium", "125m", "1b", "7b"}));
}

TEST(ModelShape, ApplyPresetSetsShapeNameAndTrainable) {
  ModelConfig m;
  m.rope_theta = 5e5;  // not a shape key: left alone
  apply_model_preset("medium", m);
  EXPECT_EQ(m.preset, "medium");
  EXPECT_EQ(m.d_model, 512);
  EXPECT_EQ(m.n_layers, 16);
  EXPECT_EQ(m.n_heads, 8);
  EXPECT_EQ(m.n_kv_heads, 4);
  EXPECT_EQ(m.ffn_hidden, 1536);
  EXPECT_EQ(m.vocab_size, 256);
  EXPECT_EQ(m.seq_len, 512);
  EXPECT_FALSE(m.tie_embeddings);
  EXPECT_TRUE(m.trainable);
  EXPECT_EQ(m.rope_theta, 5e5);

  apply_model_preset("125m", m);
  EXPECT_EQ(m.vocab_size, 50304);
  EXPECT_TRUE(m.tie_embeddings);
  EXPECT_FALSE(m.trainable);
}

TEST(ModelShape, TinyPresetIsTheDefault) {
  const ModelConfig defaults;
  const ModelConfig tiny = preset("tiny");
  EXPECT_EQ(tiny.d_model, defaults.d_model);
  EXPECT_EQ(tiny.n_layers, defaults.n_layers);
  EXPECT_EQ(tiny.n_heads, defaults.n_heads);
  EXPECT_EQ(tiny.n_kv_heads, defaults.n_kv_heads);
  EXPECT_EQ(tiny.ffn_hidden, defaults.ffn_hidden);
  EXPECT_EQ(tiny.vocab_size, defaults.vocab_size);
  EXPECT_EQ(tiny.seq_len, defaults.seq_len);
}

TEST(ModelShape, UnknownPresetListsTheKnownOnes) {
  ModelConfig m;
  try {
    apply_model_preset("huge", m);
    FAIL() << "expected ConfigError";
  } catch (const ConfigError& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("config:"), std::string::npos) << message;
    EXPECT_NE(message.find("huge"), std::string::npos) << message;
    EXPECT_NE(message.find("tiny | small | medium | 125m | 1b | 7b"), std::string::npos) << message;
  }
}

TEST(ModelShape, EveryPresetIsAValidConfig) {
  for (const std::string& name : model_preset_names()) {
    SCOPED_TRACE(name);
    const Config c = load_config("", {"model.preset=" + name}, 1);
    const ModelConfig expected = preset(name);
    EXPECT_EQ(c.model.d_model, expected.d_model);
    EXPECT_EQ(c.model.n_kv_heads, expected.n_kv_heads);
    EXPECT_EQ(c.model.trainable, expected.trainable);
    EXPECT_GT(model_counts(c.model).params, 0);
  }
}

// The grouping every sharded consumer shares, written out by hand for each wrap policy.
TEST(UnitLayout, WrapPoliciesGroupEmbeddingBlocksAndHead) {
  using Groups = std::vector<std::vector<int>>;
  EXPECT_EQ(wrap_unit_groups("block", 4), (Groups{{0}, {1}, {2}, {3}, {4}, {5}}));
  EXPECT_EQ(wrap_unit_groups("every_2", 3), (Groups{{0}, {1, 2}, {3}, {4}}));
  EXPECT_EQ(wrap_unit_groups("every_4", 5), (Groups{{0}, {1, 2, 3, 4}, {5}, {6}}));
  EXPECT_EQ(wrap_unit_groups("model", 2), (Groups{{0, 1, 2, 3}}));
  EXPECT_EQ(wrap_unit_groups("block", 0), (Groups{{0}, {1}}));
}

// Under pipeline stages a flat unit stays inside one chunk: groups are cut at the chunks' edges and what the rank does
// not hold is dropped. Without stages (one chunk of every unit) the wrap groups are unchanged.
TEST(UnitLayout, HeldGroupsAreCutAtTheChunksEdges) {
  using Groups = std::vector<std::vector<int>>;
  EXPECT_EQ(held_unit_groups("every_2", 4, {{0, 1}, {4, 5}}), (Groups{{0}, {1}, {4}, {5}})) << "{1,2}, {3,4} cut";
  EXPECT_EQ(held_unit_groups("every_2", 4, {{2, 3, 4, 5}}), (Groups{{2}, {3, 4}, {5}}));
  EXPECT_EQ(held_unit_groups("model", 2, {{0, 1}, {2, 3}}), (Groups{{0, 1}, {2, 3}}));
  EXPECT_EQ(held_unit_groups("every_4", 5, {{0, 1, 2, 3, 4, 5, 6}}), wrap_unit_groups("every_4", 5));
}

}  // namespace
}  // namespace dtlab
