// config.hpp: dtlab's run configuration — YAML file + `section.key=value` overrides, validated.
//
// Torch-free (analysis/ and `dtlab predict` use it too). Every key has a type, a default, a rule and a
// one-line doc in the key table of config.cpp; that table drives parsing, overrides, validation,
// "did you mean" suggestions, the printed table and the JSON stored in results.
//
//   Config c = load_config("run.yaml", {"train.steps=50", "model.preset=small"}, /*world_size=*/1, strategies);
//
// The config floor knows no strategy: what validation needs of them (their ids, which run under pipeline stages) is
// handed in as StrategyChoices. strategies/catalog.hpp, one floor up, declares the same entry points without that
// argument, bound to the catalogue this program was linked with; programs and most tests call those.
//
// REQUIRES: world_size >= 1. Throws ConfigError naming the key, the value and the rule.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace dtlab {

struct ConfigError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

struct ModelConfig {
  std::string preset = "tiny";  // tiny | small | medium | 125m | 1b | 7b  (shape keys below override)
  int64_t d_model = 64;
  int64_t n_layers = 2;
  int64_t n_heads = 4;
  int64_t n_kv_heads = 2;    // grouped-query attention: 1 <= n_kv_heads <= n_heads, n_heads % n_kv_heads == 0
  int64_t ffn_hidden = 172;  // SwiGLU hidden width
  int64_t vocab_size = 256;
  int64_t seq_len = 64;
  bool tie_embeddings = false;
  double rope_theta = 10000.0;
  double norm_eps = 1e-5;
  double init_std = 0.02;
  bool trainable = true;  // false for prediction-only shapes (125m, 1b, 7b): `dtlab train` refuses them
};

struct DataConfig {
  std::string source = "synthetic";  // synthetic | file
  std::string path;                  // token file (.bin, see lab/data.hpp) when source == file
  int64_t seed = 1;
  int64_t mask_token = -1;  // targets equal to this token id are ignored by the loss (-1: none)
};

struct TrainConfig {
  int64_t steps = 20;
  int64_t global_batch = 8;         // sequences per optimizer step, all ranks and micro-steps together
  int64_t micro_batch = 4;          // sequences per rank per forward/backward
  int64_t accumulation = 0;         // derived: global_batch / (micro_batch * world_size); 0 in YAML = derive
  std::string optimizer = "adamw";  // adamw | sgd
  double lr = 3.0e-4;
  double min_lr = 3.0e-5;
  int64_t warmup_steps = 2;
  std::string schedule = "cosine";  // constant | linear | cosine | step
  int64_t step_every = 10;          // schedule == step: multiply lr by step_gamma every step_every steps
  double step_gamma = 0.5;
  double weight_decay = 0.1;
  bool decay_norms_and_embeddings = false;  // AdamW: by default norms and embeddings get no decay
  double beta1 = 0.9;
  double beta2 = 0.95;
  double eps = 1e-8;
  double momentum = 0.9;   // sgd
  double grad_clip = 1.0;  // global L2 norm; 0 = off
  int64_t seed = 1234;     // model init
  int64_t threads = 0;     // intra-op threads per rank; 0 = cores / ranks on this machine (host_ranks)
  // Where the model, its gradients and the strategy's buffers live: cpu | cuda | auto (cuda when a cuda build sees
  // a device; lab/device.hpp). Ranks on one node take GPU local_rank % device count, so several may share one.
  std::string device = "auto";
};

struct ParallelConfig {
  std::string strategy =
      "single";  // single | ddp | fsdp_full_shard | fsdp_shard_grad_op | fsdp_no_shard | fsdp_hybrid | zero1
  std::string backend = "auto";  // auto | gloo | nccl
  double bucket_cap_mb = 25.0;
  int64_t shard_size =
      0;  // fsdp_hybrid: ranks per shard group (must divide world size); 0 = the node across nodes, else the world
  bool prefetch = true;
  std::string reduce_scatter = "ring";  // ring | backend: Gloo's own reduce-scatter is an all-reduce (2x bytes)
  // Collectives across nodes: flat (one ring over every rank) | hierarchical (inside the node, then across nodes;
  // lab/comm/hierarchical.hpp: DDP's all-reduce; ZeRO-1's, FULL_SHARD's and SHARD_GRAD_OP's reduce-scatters and
  // all-gathers) | auto (with a machine profile, the cost model's choice; without one, DDP hierarchical when the job
  // spans nodes with more than one rank on each, the sharded strategies flat)
  std::string collectives = "auto";
  std::string wrap = "block";  // FSDP units: block (one per transformer block) | every_2 | every_4 | model
  bool offload = false;
  std::string activation_checkpointing = "none";  // none | full | selective
  int64_t checkpoint_every = 1;                   // full: checkpoint blocks 0, k, 2k, ... (1 = every block)
  // Model-parallel degrees of the device mesh (lab/mesh.hpp); the ranks left, world / (pp * cp * tp), are the
  // data-parallel ones `strategy` runs over. cp and ep are 1 until their dimension is built (validation says
  // "not yet").
  int64_t pp = 1;  // pipeline stages
  // With pp > 1 (lab/train/pipeline_step.hpp): the schedule (gpipe | 1f1b | interleaved_1f1b | zero_bubble), the
  // model chunks per rank (interleaved_1f1b), and where the stages begin ("" = blocks balanced; else the first block
  // of each virtual stage after the first, comma-separated: lab/pipeline_split.hpp).
  std::string pp_schedule = "1f1b";
  int64_t pp_virtual_stages = 1;
  std::string pp_split;
  // With pp > 1, for the sharded modes that free parameters after forward (fsdp_full_shard, fsdp_hybrid): false
  // gathers each unit once per step and keeps it through the flush (torchtitan's choice under a pipeline); true
  // frees it after every micro-batch's forward, gathers it again for its backward and reduce-scatters each
  // micro-batch's gradient (strategies/sharded/schedule.hpp): less memory, m times the gathers.
  bool pp_reshard_after_forward = false;
  int64_t cp = 1;  // context parallel: ranks that split one sequence
  int64_t tp = 1;  // tensor parallel: ranks that split each layer's weights
  int64_t ep = 1;  // expert parallel: borrowed from dp_shard * cp * tp (MoE only)
  // With tp > 1: the norm and residual regions split along the sequence too (lab/train/tensor_parallel.hpp).
  bool sequence_parallel = false;
  // intra_node: tp innermost in the mesh (a tp group is consecutive ranks, inside a node); inter_node: tp outside the
  // data-parallel dimensions, so on a cluster a tp group spans nodes (only to show what that costs; lab/mesh.hpp).
  std::string tp_placement = "intra_node";
};

struct PrecisionConfig {
  std::string param_dtype = "fp32";           // fp32 | bf16 | fp16
  std::string reduce_dtype = "fp32";          // fp32 | bf16 | fp16
  std::string master_dtype = "fp32";          // fp32 | bf16
  std::string loss_scale = "none";            // none | dynamic
  double loss_scale_init = 65536.0;           // dynamic: the first scale
  int64_t loss_scale_growth_interval = 2000;  // dynamic: double the scale after this many good steps
  bool stochastic_rounding = false;           // master_dtype=bf16: round the optimizer's fp32 result stochastically
};

struct InstrumentConfig {
  bool trace = false;
  bool tensorboard = false;  // TensorBoard scalar event files per rank (lab/instrument/tensorboard.hpp)
  bool nvtx = true;
  std::string cupti = "auto";  // auto | on | off
  int64_t warmup_steps = 2;    // steps excluded from summary statistics
  int64_t log_every = 1;       // print a step line every N steps
  std::string profile;         // machine profile JSON (dtlab calibrate); "" = predict memory and bytes only

  // Debug: every collective first agrees across its group on call number, op, dtype and shape (desync_check.hpp).
  bool check_collectives = false;
};

// A per-rank cap on tensor memory, enforced by the counting allocator (lab/memory.hpp) the way a GPU's memory
// bounds its caching allocator: an allocation past it stops the run with out-of-memory on every rank.
struct MemoryConfig {
  std::string limit = "none";  // none | bytes with a binary unit: 256MiB, 1.5GiB, 65536 (B), 512KiB
};

// memory.limit in bytes (0 = none). Throws ConfigError naming the key, the text and the accepted forms.
int64_t memory_limit_bytes(const MemoryConfig& memory);

// Training checkpoints (docs/checkpointing.md; lab/train/train_checkpoint.hpp).
struct CheckpointConfig {
  std::string dir;              // where step_<N>/ directories go; "" = no checkpoints
  int64_t every = 0;            // save after every N-th optimizer step; 0 = only after the last one
  int64_t keep = 0;             // keep the newest K complete checkpoints; 0 = all
  bool async = false;           // write in the background while training goes on
  std::string resume = "auto";  // auto (the latest under dir, if any) | never | a checkpoint's path
};

struct Config {
  ModelConfig model;
  DataConfig data;
  TrainConfig train;
  ParallelConfig parallel;
  PrecisionConfig precision;
  InstrumentConfig instrument;
  MemoryConfig memory;
  CheckpointConfig checkpoint;
  int64_t world_size = 1;  // from the launcher, not the file; used by the batch rule
  // From the launcher (LOCAL_WORLD_SIZE), not the file: ranks per node when the job spans nodes (it divides
  // world_size and is smaller); 0 = unknown or one node. HYBRID's default shard group is the node.
  int64_t ranks_per_node = 0;
  // From the launcher, not the file: the ranks of the job that share this machine's cores (every rank of a
  // `dtlab launch --nodes` cluster, whose nodes are namespaces of one machine; else the node's). 0 = unknown: the
  // compute model then takes the node's ranks. CPU threads per rank are cores / host_ranks.
  int64_t host_ranks = 0;
};

// Ranks that see different data: world_size / (parallel.pp * parallel.cp * parallel.tp), the data-parallel degree
// of the mesh. The loss and gradients are averaged over them; the batch rule divides by it.
int64_t data_parallel_size(const Config& config);

// What validation needs of the strategies a program was built with (strategies/catalog.hpp strategy_choices()).
struct StrategyChoices {
  std::vector<std::string> ids;             // parallel.strategy's values, in catalogue order
  std::vector<std::string> under_pipeline;  // the ids that can run under parallel.pp > 1 (spec.runs_under_pipeline)
  // The ids that can re-gather per micro-batch under stages (their spec reads parallel.pp_reshard_after_forward).
  std::vector<std::string> reshard_under_pipeline;
};

// Loads `path` (may be empty: defaults only), applies overrides in order ("section.key=value", value
// parsed as YAML scalar), applies the model preset, derives train.accumulation and validates.
Config load_config(const std::string& path, const std::vector<std::string>& overrides, int64_t world_size,
                   const StrategyChoices& strategies);

// Same, from YAML text (tests, fuzzing). `origin` names the source in error messages.
Config load_config_text(const std::string& yaml_text, const std::vector<std::string>& overrides, int64_t world_size,
                        const StrategyChoices& strategies, const std::string& origin = "<text>");

// Checks every rule; throws ConfigError. Called by load_config; exposed for programmatic configs.
void validate(const Config& config, const StrategyChoices& strategies);

// The resolved config as nested JSON with the same key names as the YAML.
nlohmann::json to_json(const Config& config);
// Inverse of to_json (reads results back); validates. Unknown keys are errors, missing keys take defaults
// (or the preset's shape). NOTE: j's own "world_size" is informational; the argument is the one used.
Config from_json(const nlohmann::json& j, int64_t world_size, const StrategyChoices& strategies);

// "key | value | default?" table, one row per key, marking values that differ from defaults.
std::string format_table(const Config& config);

// Every dotted key ("model.d_model", "train.lr", ...) in table order: the names YAML, overrides and JSON accept.
std::vector<std::string> config_keys();

}  // namespace dtlab
