// config_test.cpp: the config layer of lab/config.hpp — parsing, overrides, presets, every validation rule,
// suggestions, JSON and the printed table (the fuzz test that only ConfigError ever escapes: config_fuzz_test.cpp).
//
//   ./build/bin/config_tests --gtest_filter='Config*'
//
// Messages are checked by the pieces the style guide requires (key, value, rule words), not byte for byte,
// except for the two examples the documentation quotes.
#include "lab/config.hpp"

#include <unistd.h>  // getpid: unique temp file names

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "lab/model_shape.hpp"
#include "strategies/catalog.hpp"

namespace dtlab {
namespace {

using Strings = std::vector<std::string>;

// The message of the ConfigError `action` throws ("" and a test failure if it throws none).
template <class Action>
std::string error_of(Action&& action) {
  try {
    action();
  } catch (const ConfigError& e) {
    return e.what();
  }
  ADD_FAILURE() << "expected a ConfigError";
  return "";
}

std::string override_error(const Strings& overrides, int64_t world_size = 1) {
  return error_of([&] { load_config("", overrides, world_size); });
}

void expect_contains(const std::string& message, const Strings& pieces) {
  for (const std::string& piece : pieces)
    EXPECT_NE(message.find(piece), std::string::npos) << "missing '" << piece << "' in: " << message;
}

// A YAML file under the test temp dir, removed at scope exit.
class TempFile {
 public:
  explicit TempFile(const std::string& text) {
    static int counter = 0;
    path_ = std::filesystem::path(::testing::TempDir()) /
            ("dtlab_config_test_" + std::to_string(::getpid()) + "_" + std::to_string(counter++) + ".yaml");
    std::ofstream(path_) << text;
  }
  ~TempFile() { std::filesystem::remove(path_); }
  std::string path() const { return path_.string(); }

 private:
  std::filesystem::path path_;
};

// ---- defaults and the key list ---------------------------------------------------------------------

TEST(Config, DefaultsAreValidAndDeriveAccumulation) {
  const Config c = load_config("", {}, 1);
  EXPECT_EQ(c.model.preset, "tiny");
  EXPECT_EQ(c.model.d_model, 64);
  EXPECT_EQ(c.train.accumulation, 2);  // 8 / (4 * 1)
  EXPECT_NO_THROW(validate(Config{}));
  EXPECT_EQ(load_config("", {}, 2).train.accumulation, 1);  // 8 / (4 * 2)
}

TEST(Config, KeysAreDottedAndUnique) {
  const Strings keys = config_keys();
  EXPECT_GE(keys.size(), 50u);
  EXPECT_EQ(std::set<std::string>(keys.begin(), keys.end()).size(), keys.size());
  for (const char* key : {"model.preset", "model.n_kv_heads", "data.mask_token", "train.lr", "parallel.shard_size",
                          "precision.loss_scale", "instrument.log_every"})
    EXPECT_NE(std::find(keys.begin(), keys.end(), key), keys.end()) << key;
  for (const std::string& key : keys) EXPECT_EQ(std::count(key.begin(), key.end(), '.'), 1) << key;
}

// ---- overrides ------------------------------------------------------------------------------------------

TEST(ConfigOverride, ParsesEachTypeAsYamlScalar) {
  const Config c =
      load_config("",
                  {"train.lr=1e-3", "train.steps=+50", "parallel.offload=true", "parallel.bucket_cap_mb=4",
                   "data.path='a b: c'", "train.optimizer=sgd", "instrument.nvtx=False", " train.min_lr = 0 "},
                  1);
  EXPECT_DOUBLE_EQ(c.train.lr, 1e-3);
  EXPECT_EQ(c.train.steps, 50);
  EXPECT_TRUE(c.parallel.offload);
  EXPECT_DOUBLE_EQ(c.parallel.bucket_cap_mb, 4.0);  // an integer is a fine number
  EXPECT_EQ(c.data.path, "a b: c");                 // quoting keeps YAML punctuation
  EXPECT_EQ(c.train.optimizer, "sgd");
  EXPECT_FALSE(c.instrument.nvtx);
  EXPECT_EQ(c.train.min_lr, 0.0);
}

TEST(ConfigOverride, EmptyValueIsAnEmptyString) {
  EXPECT_EQ(load_config("", {"data.path=/x.bin", "data.path="}, 1).data.path, "");
}

TEST(ConfigOverride, LaterOverrideWins) {
  EXPECT_EQ(load_config("", {"train.steps=5", "train.steps=7"}, 1).train.steps, 7);
}

TEST(ConfigOverride, WrongTypeNamesKeyValueAndType) {
  expect_contains(override_error({"train.steps=abc"}),
                  {"train.steps=abc", "wrong type", "an integer", "train.steps=20"});
  expect_contains(override_error({"train.steps=1.5"}), {"train.steps=1.5", "an integer"});
  expect_contains(override_error({"train.steps=99999999999999999999"}), {"int64 range"});
  expect_contains(override_error({"train.lr=fast"}), {"train.lr=fast", "a number"});
  expect_contains(override_error({"train.lr=nan"}), {"train.lr=nan", "finite"});
  expect_contains(override_error({"train.lr=1e999"}), {"train.lr=1e999", "range"});
  expect_contains(override_error({"parallel.offload=maybe"}), {"parallel.offload=maybe", "a boolean"});
  expect_contains(override_error({"parallel.offload=yes"}), {"parallel.offload=yes", "true | false"});
  expect_contains(override_error({"train.lr=[1, 2]"}), {"train.lr", "not a list"});
  expect_contains(override_error({"train.lr="}), {"train.lr=null", "a number"});
  expect_contains(override_error({"train.lr=["}), {"train.lr=[", "not a valid YAML scalar", "quote it"});
}

TEST(ConfigOverride, MalformedOverrideExplainsTheForm) {
  expect_contains(override_error({"train.steps"}), {"config: override 'train.steps'", "section.key=value", "no '='"});
  expect_contains(override_error({"=5"}), {"'=5'", "empty", "section.key=value"});
}

// ---- did you mean -----------------------------------------------------------------------------------------

TEST(ConfigSuggest, TypoInKey) {
  expect_contains(override_error({"train.lrr=1"}), {"config:", "unknown key 'train.lrr'", "did you mean 'train.lr'?"});
  expect_contains(override_error({"model.d_modle=128"}), {"did you mean 'model.d_model'?"});
}

TEST(ConfigSuggest, TypoInSection) {
  expect_contains(override_error({"trian.lr=1"}),
                  {"unknown section 'trian'", "'trian.lr'", "did you mean 'train.lr'?"});
  expect_contains(override_error({"paralel.strategy=ddp"}), {"did you mean 'parallel.strategy'?"});
}

TEST(ConfigSuggest, SectionLeftOut) {
  expect_contains(override_error({"lr=1"}), {"unknown key 'lr'", "did you mean 'train.lr'?"});
  expect_contains(override_error({"seed=3"}), {"'data.seed'", "'train.seed'"});
}

TEST(ConfigSuggest, NothingCloseListsWhatExists) {
  expect_contains(override_error({"train.learning_rate_peak=1"}), {"unknown key", "keys in train:", "lr"});
  expect_contains(override_error({"zzzzzzzz.q=1"}), {"unknown section 'zzzzzzzz'", "sections are model"});
  expect_contains(override_error({"train=5"}), {"'train' is a section", "train.lr"});
}

TEST(ConfigSuggest, ClosedSetSuggestsTheValue) {
  expect_contains(override_error({"train.optimizer=adam"}),
                  {"train.optimizer=adam", "one of adamw | sgd", "did you mean 'adamw'?"});
}

// ---- presets -------------------------------------------------------------------------------------------------

TEST(ConfigPreset, AppliesEveryShapeKey) {
  const Config c = load_config("", {"model.preset=small"}, 1);
  EXPECT_EQ(c.model.preset, "small");
  EXPECT_EQ(c.model.d_model, 256);
  EXPECT_EQ(c.model.n_layers, 6);
  EXPECT_EQ(c.model.n_heads, 8);
  EXPECT_EQ(c.model.n_kv_heads, 4);
  EXPECT_EQ(c.model.ffn_hidden, 768);
  EXPECT_EQ(c.model.seq_len, 256);
  const Config big = load_config("", {"model.preset=7b"}, 1);
  EXPECT_EQ(big.model.vocab_size, 32000);
  EXPECT_FALSE(big.model.trainable);
}

TEST(ConfigPreset, ExplicitShapeKeyWinsInEitherOrder) {
  for (const Strings& overrides :
       {Strings{"model.preset=small", "model.d_model=128"}, Strings{"model.d_model=128", "model.preset=small"}}) {
    const Config c = load_config("", overrides, 1);
    EXPECT_EQ(c.model.d_model, 128) << overrides[0];
    EXPECT_EQ(c.model.n_layers, 6) << overrides[0];  // the rest comes from the preset
    EXPECT_EQ(c.model.n_heads, 8) << overrides[0];
  }
}

TEST(ConfigPreset, FileAndOverrideMixInEitherDirection) {
  TempFile preset_in_file("model:\n  preset: small\n");
  EXPECT_EQ(load_config(preset_in_file.path(), {"model.n_layers=3"}, 1).model.n_layers, 3);
  TempFile shape_in_file("model:\n  n_layers: 3\n");
  const Config c = load_config(shape_in_file.path(), {"model.preset=medium"}, 1);
  EXPECT_EQ(c.model.n_layers, 3);
  EXPECT_EQ(c.model.d_model, 512);
  TempFile trainable_in_file("model: {preset: 125m, trainable: true}\n");
  EXPECT_TRUE(load_config(trainable_in_file.path(), {}, 1).model.trainable);
}

TEST(ConfigPreset, UnknownPresetListsKnownOnes) {
  expect_contains(override_error({"model.preset=huge"}),
                  {"model.preset=huge", "one of tiny | small | medium | 125m | 1b | 7b"});
  expect_contains(override_error({"model.preset=smal"}), {"did you mean 'small'?"});
}

// ---- validation: one case per rule ---------------------------------------------------------------------------

struct RuleCase {
  Strings overrides;
  int64_t world_size;
  Strings expected;  // key, value and rule words
};

class ConfigRule : public ::testing::TestWithParam<RuleCase> {};

TEST_P(ConfigRule, NamesKeyValueAndRule) {
  const RuleCase& c = GetParam();
  const std::string message = override_error(c.overrides, c.world_size);
  EXPECT_EQ(message.rfind("config: ", 0), 0u) << message;
  expect_contains(message, c.expected);
}

// clang-format off
INSTANTIATE_TEST_SUITE_P(Rules, ConfigRule, ::testing::Values(
    RuleCase{{"model.d_model=0"}, 1, {"model.d_model=0", "must be > 0"}},
    RuleCase{{"model.n_layers=-1"}, 1, {"model.n_layers=-1", "must be > 0"}},
    RuleCase{{"model.n_heads=0"}, 1, {"model.n_heads=0", "> 0"}},
    RuleCase{{"model.n_kv_heads=0"}, 1, {"model.n_kv_heads=0", ">= 1"}},
    RuleCase{{"model.ffn_hidden=0"}, 1, {"model.ffn_hidden=0", "> 0"}},
    RuleCase{{"model.vocab_size=1"}, 1, {"model.vocab_size=1", ">= 2"}},
    RuleCase{{"model.seq_len=1"}, 1, {"model.seq_len=1", ">= 2"}},
    RuleCase{{"model.rope_theta=0"}, 1, {"model.rope_theta=0", "> 0"}},
    RuleCase{{"model.norm_eps=-1e-5"}, 1, {"model.norm_eps=-0.00001", "> 0"}},
    RuleCase{{"model.init_std=0"}, 1, {"model.init_std=0", "> 0"}},
    RuleCase{{"model.d_model=100", "model.n_heads=8"}, 1,
             {"model.d_model=100 is not divisible by model.n_heads=8", "multiple of 8"}},
    RuleCase{{"model.d_model=36"}, 1, {"model.d_model=36", "model.n_heads=4", "head_dim 9", "odd", "RoPE"}},
    RuleCase{{"model.n_kv_heads=8"}, 1, {"model.n_kv_heads=8 must be <= model.n_heads=4", "grouped-query"}},
    RuleCase{{"model.n_kv_heads=3"}, 1,
             {"model.n_kv_heads=3 must divide model.n_heads=4 (grouped-query attention)", "1, 2, 4"}},
    RuleCase{{"data.source=stdin"}, 1, {"data.source=stdin", "one of synthetic | file"}},
    RuleCase{{"data.source=file"}, 1, {"data.source=file", "data.path", "non-empty"}},
    RuleCase{{"data.mask_token=-2"}, 1, {"data.mask_token=-2", ">= -1"}},
    RuleCase{{"data.mask_token=256"}, 1, {"data.mask_token=256", "[-1, model.vocab_size=256)"}},
    RuleCase{{"train.steps=0"}, 1, {"train.steps=0", ">= 1"}},
    RuleCase{{"train.global_batch=0"}, 1, {"train.global_batch=0", "> 0"}},
    RuleCase{{"train.micro_batch=0"}, 1, {"train.micro_batch=0", "> 0"}},
    RuleCase{{"train.accumulation=-1"}, 1, {"train.accumulation=-1", ">= 0"}},
    RuleCase{{"train.optimizer=lion"}, 1, {"train.optimizer=lion", "one of adamw | sgd"}},
    RuleCase{{"train.lr=0"}, 1, {"train.lr=0", "must be > 0", "default is 0.0003"}},
    RuleCase{{"train.lr=-1e-3"}, 1, {"train.lr=-0.001", "> 0"}},
    RuleCase{{"train.min_lr=-1"}, 1, {"train.min_lr=-1", ">= 0"}},
    RuleCase{{"train.min_lr=0.01", "train.lr=0.001"}, 1, {"train.min_lr=0.01 must be <= train.lr=0.001"}},
    RuleCase{{"train.warmup_steps=-1"}, 1, {"train.warmup_steps=-1", ">= 0"}},
    RuleCase{{"train.warmup_steps=20"}, 1, {"train.warmup_steps=20 must be < train.steps=20"}},
    RuleCase{{"train.schedule=exp"}, 1, {"train.schedule=exp", "one of constant | linear | cosine | step"}},
    RuleCase{{"train.step_every=0"}, 1, {"train.step_every=0", ">= 1"}},
    RuleCase{{"train.step_gamma=0"}, 1, {"train.step_gamma=0", "in (0, 1]"}},
    RuleCase{{"train.step_gamma=1.5"}, 1, {"train.step_gamma=1.5", "in (0, 1]"}},
    RuleCase{{"train.weight_decay=-0.1"}, 1, {"train.weight_decay=-0.1", ">= 0"}},
    RuleCase{{"train.beta1=1"}, 1, {"train.beta1=1", "in [0, 1)"}},
    RuleCase{{"train.beta2=-0.5"}, 1, {"train.beta2=-0.5", "in [0, 1)"}},
    RuleCase{{"train.eps=0"}, 1, {"train.eps=0", "> 0"}},
    RuleCase{{"train.momentum=1"}, 1, {"train.momentum=1", "in [0, 1)"}},
    RuleCase{{"train.grad_clip=-1"}, 1, {"train.grad_clip=-1", ">= 0"}},
    RuleCase{{"train.threads=-1"}, 1, {"train.threads=-1", ">= 0"}},
    RuleCase{{"train.global_batch=10"}, 1,
             {"train.global_batch=10 is not divisible by train.micro_batch(4) * world_size(1) = 4",
              "choose global_batch as a multiple of 4"}},
    RuleCase{{}, 3, {"train.global_batch=8 is not divisible by train.micro_batch(4) * world_size(3) = 12"}},
    RuleCase{{"train.global_batch=16", "train.accumulation=2"}, 1,
             {"train.accumulation=2", "micro_batch(4) * accumulation(2) * world(1) = 8 != global_batch(16)",
              "train.accumulation=0"}},
    RuleCase{{}, 0, {"world_size=0", ">= 1"}},
    RuleCase{{"parallel.strategy=fsdp"}, 1,
             {"parallel.strategy=fsdp", "one of single | ddp | fsdp_full_shard", "did you mean 'fsdp_full_shard' or"}},
    RuleCase{{"parallel.backend=mpi"}, 1, {"parallel.backend=mpi", "one of auto | gloo | nccl"}},
    RuleCase{{"parallel.bucket_cap_mb=0"}, 1, {"parallel.bucket_cap_mb=0", "> 0"}},
    RuleCase{{"parallel.shard_size=-1"}, 1, {"parallel.shard_size=-1", ">= 0"}},
    RuleCase{{"parallel.shard_size=3", "train.global_batch=16"}, 4,
             {"parallel.shard_size=3 does not divide world_size=4", "divisor of 4"}},
    RuleCase{{"parallel.collectives=tree"}, 1, {"parallel.collectives=tree", "one of auto | flat | hierarchical"}},
    RuleCase{{"parallel.activation_checkpointing=some"}, 1,
             {"parallel.activation_checkpointing=some", "one of none | full | selective"}},
    RuleCase{{"precision.param_dtype=fp8"}, 1, {"precision.param_dtype=fp8", "one of fp32 | bf16 | fp16"}},
    RuleCase{{"precision.reduce_dtype=int8"}, 1, {"precision.reduce_dtype=int8", "one of fp32 | bf16 | fp16"}},
    RuleCase{{"precision.master_dtype=fp16"}, 1, {"precision.master_dtype=fp16", "one of fp32 | bf16"}},
    RuleCase{{"precision.loss_scale=static"}, 1, {"precision.loss_scale=static", "one of none | dynamic"}},
    RuleCase{{"precision.loss_scale=dynamic", "precision.param_dtype=bf16"}, 1,
             {"precision.loss_scale=dynamic requires precision.param_dtype=fp16", "bf16", "loss_scale=none"}},
    RuleCase{{"instrument.cupti=maybe"}, 1, {"instrument.cupti=maybe", "one of auto | on | off"}},
    RuleCase{{"instrument.warmup_steps=-1"}, 1, {"instrument.warmup_steps=-1", ">= 0"}},
    RuleCase{{"instrument.log_every=0"}, 1, {"instrument.log_every=0", ">= 1"}},
    RuleCase{{"memory.limit=256MB"}, 1, {"memory.limit=256MB", "binary unit (B, KiB, MiB, GiB, TiB)", "256MiB"}},
    RuleCase{{"memory.limit=0B"}, 1, {"memory.limit=0B", "at least 1 byte"}},
    RuleCase{{"memory.limit=lots"}, 1, {"memory.limit=lots", "none or a size"}}));
// clang-format on

// memory.limit's sizes: binary units, fractions, plain bytes, none.
TEST(ConfigRules, MemoryLimitSizes) {
  EXPECT_EQ(memory_limit_bytes({"none"}), 0);
  EXPECT_EQ(memory_limit_bytes({"256MiB"}), int64_t{256} << 20);
  EXPECT_EQ(memory_limit_bytes({"1.5GiB"}), int64_t{3} << 29);
  EXPECT_EQ(memory_limit_bytes({"512 KiB"}), int64_t{512} << 10);
  EXPECT_EQ(memory_limit_bytes({"65536"}), 65536);
  EXPECT_EQ(memory_limit_bytes({"100B"}), 100);
  EXPECT_THROW(memory_limit_bytes({"-1MiB"}), ConfigError);
  EXPECT_EQ(load_config_text("", {"memory.limit=64MiB"}, 1).memory.limit, "64MiB");
  EXPECT_EQ(load_config_text("memory:\n  limit: 1GiB\n", {}, 1).memory.limit, "1GiB");
}

TEST(ConfigRules, OverrideIsNamedInTheMessage) {
  expect_contains(override_error({"train.lr=-1"}), {"(set by override 'train.lr=-1')"});
}

TEST(ConfigRules, DocumentedMessagesExactly) {
  Config c;
  c.train.global_batch = 10;
  EXPECT_EQ(error_of([&] { validate(c); }),
            "config: train.global_batch=10 is not divisible by train.micro_batch(4) * world_size(1) = 4; "
            "choose global_batch as a multiple of 4");
  Config gqa;
  gqa.model.n_kv_heads = 3;
  EXPECT_EQ(error_of([&] {
              validate(gqa);
            }).rfind("config: model.n_kv_heads=3 must divide model.n_heads=4 (grouped-query attention)", 0),
            0u);
}

TEST(ConfigRules, BoundaryValuesPass) {
  EXPECT_NO_THROW(load_config("", {"precision.loss_scale=dynamic", "precision.param_dtype=fp16"}, 1));
  EXPECT_NO_THROW(load_config("", {"parallel.shard_size=2", "train.global_batch=16"}, 4));
  EXPECT_NO_THROW(load_config("", {"data.source=file", "data.path=/tmp/tokens.bin"}, 1));
  EXPECT_NO_THROW(load_config("",
                              {"data.mask_token=255", "train.min_lr=3e-4", "train.warmup_steps=19",
                               "train.step_gamma=1", "train.beta1=0", "train.grad_clip=0"},
                              1));
  const Config c = load_config("", {"train.global_batch=16", "train.accumulation=4"}, 1);
  EXPECT_EQ(c.train.accumulation, 4);
  EXPECT_EQ(load_config("", {"train.global_batch=16"}, 2).train.accumulation, 2);
}

// ---- YAML files ------------------------------------------------------------------------------------------------

TEST(ConfigFile, LoadsSectionsFlowStyleAndNulls) {
  TempFile file(
      "# a run\n"
      "model:\n"
      "  preset: small\n"
      "  seq_len: 128\n"
      "data:\n"
      "  path: null\n"
      "train:\n"
      "  steps: 50\n"
      "  lr: 1.0e-3\n"
      "parallel: {strategy: ddp, offload: true}\n"
      "precision:\n"
      "instrument.log_every: 5\n");
  const Config c = load_config(file.path(), {"train.steps=60"}, 2);
  EXPECT_EQ(c.model.d_model, 256);
  EXPECT_EQ(c.model.seq_len, 128);
  EXPECT_EQ(c.data.path, "");
  EXPECT_EQ(c.train.steps, 60);  // the override comes after the file
  EXPECT_DOUBLE_EQ(c.train.lr, 1e-3);
  EXPECT_EQ(c.parallel.strategy, "ddp");
  EXPECT_TRUE(c.parallel.offload);
  EXPECT_EQ(c.instrument.log_every, 5);
  EXPECT_EQ(c.train.accumulation, 1);
  EXPECT_EQ(c.world_size, 2);
}

TEST(ConfigFile, EmptyFileMeansDefaults) {
  TempFile file("");
  EXPECT_EQ(load_config(file.path(), {}, 1).train.steps, 20);
}

TEST(ConfigFile, ErrorsCarryPathAndLine) {
  TempFile bad_value("train:\n  steps: 10\n  lr: -1\n");
  expect_contains(error_of([&] { load_config(bad_value.path(), {}, 1); }),
                  {bad_value.path() + ":3: config: train.lr=-1 must be > 0"});
  TempFile bad_type("train:\n  steps: abc\n");
  expect_contains(error_of([&] { load_config(bad_type.path(), {}, 1); }),
                  {bad_type.path() + ":2: config: train.steps=abc has the wrong type"});
  TempFile typo_key("model:\n  d_modle: 64\n");
  expect_contains(error_of([&] { load_config(typo_key.path(), {}, 1); }),
                  {typo_key.path() + ":2:", "did you mean 'model.d_model'?"});
  TempFile typo_section("trian:\n  lr: 1\n");
  expect_contains(error_of([&] { load_config(typo_section.path(), {}, 1); }),
                  {typo_section.path() + ":1:", "unknown section 'trian'", "did you mean 'train.lr'?"});
}

TEST(ConfigFile, RuleFromDefaultsOrOverrideIsPrefixedWithPath) {
  TempFile file("train:\n  steps: 10\n");
  expect_contains(error_of([&] { load_config(file.path(), {}, 3); }),
                  {file.path() + ": config: train.global_batch=8 is not divisible"});
  expect_contains(error_of([&] { load_config(file.path(), {"train.lr=0"}, 1); }),
                  {file.path() + ": config: train.lr=0", "(set by override 'train.lr=0')"});
}

TEST(ConfigFile, BadYamlNamesPathAndLine) {
  TempFile file("model:\n  d_model: 64\ntrain: steps: 5\n");
  const std::string message = error_of([&] { load_config(file.path(), {}, 1); });
  expect_contains(message, {file.path() + ":", "config: YAML syntax error"});
  EXPECT_NE(message.find(file.path() + ":3:"), std::string::npos) << message;
}

TEST(ConfigFile, StructureErrors) {
  TempFile top_list("- a\n- b\n");
  expect_contains(error_of([&] { load_config(top_list.path(), {}, 1); }), {"top level must be a mapping", "list"});
  TempFile scalar_section("train: 5\n");
  expect_contains(error_of([&] { load_config(scalar_section.path(), {}, 1); }), {"section 'train' must be a mapping"});
  TempFile map_value("train:\n  lr: {a: 1}\n");
  expect_contains(error_of([&] { load_config(map_value.path(), {}, 1); }), {"train.lr", "not a mapping"});
  TempFile world("world_size: 4\n");
  expect_contains(error_of([&] { load_config(world.path(), {}, 1); }), {"world_size", "launcher"});
}

TEST(ConfigFile, MissingFileOrDirectoryNamesThePath) {
  expect_contains(error_of([] { load_config("/nonexistent/run.yaml", {}, 1); }),
                  {"config: cannot read config file '/nonexistent/run.yaml'", "does not exist"});
  expect_contains(error_of([] { load_config(::testing::TempDir(), {}, 1); }), {"is a directory"});
}

TEST(ConfigFile, TextOriginNamesTheSource) {
  expect_contains(error_of([] { load_config_text("train: {lr: 0}\n", {}, 1, "scenario.yaml"); }),
                  {"scenario.yaml:1: config: train.lr=0"});
}

// ---- JSON and the table ----------------------------------------------------------------------------------------

TEST(ConfigJson, RoundTrip) {
  const Config c =
      load_config("",
                  {"model.preset=small", "model.n_layers=3", "train.lr=1e-3", "parallel.strategy=fsdp_hybrid",
                   "parallel.shard_size=2", "data.path=/x.bin", "train.global_batch=32", "precision.param_dtype=bf16"},
                  4);
  const nlohmann::json j = to_json(c);
  EXPECT_EQ(j["model"]["d_model"], 256);
  EXPECT_EQ(j["model"]["n_layers"], 3);
  EXPECT_EQ(j["train"]["accumulation"], 2);
  EXPECT_EQ(j["parallel"]["strategy"], "fsdp_hybrid");
  EXPECT_EQ(j["world_size"], 4);
  for (const char* section : {"model", "data", "train", "parallel", "precision", "instrument"})
    EXPECT_TRUE(j[section].is_object()) << section;
  const Config back = from_json(j, 4);
  EXPECT_EQ(to_json(back), j);
  EXPECT_EQ(format_table(back), format_table(c));
}

TEST(ConfigJson, PartialJsonUsesPresetAndDefaults) {
  const Config c = from_json(nlohmann::json{{"model", {{"preset", "medium"}}}}, 1);
  EXPECT_EQ(c.model.d_model, 512);
  EXPECT_EQ(c.train.steps, 20);
}

TEST(ConfigJson, Errors) {
  nlohmann::json j = to_json(load_config("", {}, 1));
  j["train"]["lrr"] = 1;
  expect_contains(error_of([&] { from_json(j, 1); }), {"config:", "did you mean 'train.lr'?"});
  expect_contains(error_of([] {
                    from_json(nlohmann::json{{"trian", {{"lr", 1}}}}, 1);
                  }),
                  {"unknown section 'trian'", "did you mean 'train.lr'?"});
  expect_contains(error_of([] {
                    from_json(nlohmann::json{{"train", {{"steps", "abc"}}}}, 1);
                  }),
                  {"train.steps=\"abc\"", "an integer"});
  expect_contains(error_of([] {
                    from_json(nlohmann::json{{"train", {{"lr", -1}}}}, 1);
                  }),
                  {"config: train.lr=-1 must be > 0"});
  expect_contains(error_of([] { from_json(nlohmann::json::array(), 1); }), {"config:", "object"});
  expect_contains(error_of([] { from_json(nlohmann::json{{"train", 3}}, 1); }), {"section 'train'", "object"});
}

TEST(ConfigTable, OneAlignedRowPerKeyMarkingNonDefaults) {
  const Config c = load_config("", {"train.lr=1e-3"}, 2);
  const std::string table = format_table(c);
  expect_contains(table, {"key", "value", "default", "world_size = 2"});
  for (const std::string& key : config_keys()) expect_contains(table, {key + " "});
  expect_contains(table, {"* train.lr"});
  expect_contains(table, {"  train.steps"});  // default: unmarked

  // Every row puts its separators in the same columns.
  std::istringstream lines(table);
  std::string line;
  std::set<size_t> first_bar;
  int rows = 0;
  while (std::getline(lines, line))
    if (line.find(" | ") != std::string::npos) {
      first_bar.insert(line.find(" | "));
      ++rows;
    }
  EXPECT_EQ(rows, static_cast<int>(config_keys().size()) + 1);  // + header
  EXPECT_EQ(first_bar.size(), 1u) << table;
}

}  // namespace
}  // namespace dtlab
