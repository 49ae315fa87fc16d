// config_keys.cpp: the key table — every config key with its type, default (from config.hpp), rule and one-line
// doc — and the values and single-key rules it is written in. Adding a key = one field in config.hpp + one row here.
#include <algorithm>
#include <array>
#include <charconv>  // shortest round-trip printing (to_chars)
#include <type_traits>

#include "lab/config/config_internal.hpp"
#include "lab/dtype.hpp"
#include "lab/model_shape.hpp"

namespace dtlab {
namespace config_internal {

const char* describe_type(KeyType type) {
  switch (type) {
    case KeyType::boolean:
      return "a boolean (true | false)";
    case KeyType::integer:
      return "an integer";
    case KeyType::number:
      return "a number";
    case KeyType::text:
      return "a string";
  }
  return "?";
}

std::string format_number(double x) {
  char fixed[400], scientific[64];
  const auto fixed_end = std::to_chars(fixed, fixed + sizeof fixed, x, std::chars_format::fixed).ptr;
  const auto scientific_end =
      std::to_chars(scientific, scientific + sizeof scientific, x, std::chars_format::scientific).ptr;
  if (fixed_end - fixed <= scientific_end - scientific + 2) return std::string(fixed, fixed_end);
  return std::string(scientific, scientific_end);
}

std::string format_value(const Value& value) {
  struct Formatter {
    std::string operator()(bool b) const { return b ? "true" : "false"; }
    std::string operator()(int64_t i) const { return std::to_string(i); }
    std::string operator()(double x) const { return format_number(x); }
    std::string operator()(const std::string& s) const { return s.empty() ? "\"\"" : s; }
  };
  return std::visit(Formatter{}, value);
}

std::string join(const std::vector<std::string>& items, std::string_view separator) {
  std::string out;
  for (const std::string& item : items) out += (out.empty() ? "" : std::string(separator)) + item;
  return out;
}

bool Rule::admits(const Value& value) const {
  if (const auto* s = std::get_if<std::string>(&value))
    return allowed.empty() || std::find(allowed.begin(), allowed.end(), *s) != allowed.end();
  double x = 0;
  if (const auto* i = std::get_if<int64_t>(&value))
    x = static_cast<double>(*i);
  else if (const auto* d = std::get_if<double>(&value))
    x = *d;
  else
    return true;                                                // booleans have no rule
  if (low && !(low_open ? x > *low : x >= *low)) return false;  // written so that NaN fails
  if (high && !(high_open ? x < *high : x <= *high)) return false;
  return true;
}

std::string Rule::describe() const {
  if (!allowed.empty()) return "one of " + join(allowed, " | ");
  if (low && high)
    return "in " + std::string(low_open ? "(" : "[") + format_number(*low) + ", " + format_number(*high) +
           (high_open ? ")" : "]");
  if (low) return (low_open ? "> " : ">= ") + format_number(*low);
  if (high) return (high_open ? "< " : "<= ") + format_number(*high);
  return "anything";
}

namespace {

Rule any() { return {}; }
Rule positive() {
  Rule r;
  r.low = 0.0;
  r.low_open = true;
  return r;
}
Rule at_least(double x) {
  Rule r;
  r.low = x;
  return r;
}
Rule in_range(double low, bool low_open, double high, bool high_open) {
  Rule r;
  r.low = low;
  r.high = high;
  r.low_open = low_open;
  r.high_open = high_open;
  return r;
}
Rule one_of(std::vector<std::string> allowed) {
  Rule r;
  r.allowed = std::move(allowed);
  return r;
}
Rule one_of_the_strategies() {
  Rule r;
  r.strategy_ids = true;
  return r;
}

template <class Field>
constexpr KeyType key_type() {
  if constexpr (std::is_same_v<Field, bool>)
    return KeyType::boolean;
  else if constexpr (std::is_same_v<Field, int64_t>)
    return KeyType::integer;
  else if constexpr (std::is_same_v<Field, double>)
    return KeyType::number;
  else {
    static_assert(std::is_same_v<Field, std::string>, "config fields are bool, int64_t, double or string");
    return KeyType::text;
  }
}

// A row bound to `config.*section.*field`.
template <class Section, class Field>
KeySpec key(std::string name, Section Config::*section, Field Section::*field, Rule rule, std::string doc) {
  return KeySpec{
      .name = std::move(name),
      .type = key_type<Field>(),
      .get = [section, field](const Config& c) { return Value((c.*section).*field); },
      .set = [section, field](Config& c, const Value& v) { (c.*section).*field = std::get<Field>(v); },
      .rule = std::move(rule),
      .doc = std::move(doc),
  };
}

}  // namespace

const std::vector<KeySpec>& key_table() {
  static const std::vector<KeySpec> table = [] {
    using C = Config;
    using M = ModelConfig;
    using D = DataConfig;
    using T = TrainConfig;
    using P = ParallelConfig;
    using X = PrecisionConfig;
    using I = InstrumentConfig;
    using Y = MemoryConfig;
    using K = CheckpointConfig;
    std::vector<std::string> dtype_names;  // the config's spelling (lab/dtype.hpp)
    for (const Dtype d : kDtypes) dtype_names.emplace_back(config_name(d));
    const Rule dtype = one_of(dtype_names);
    const Rule unit = in_range(0, false, 1, true);  // [0, 1)
    // clang-format off: one key per row reads as a table
    return std::vector<KeySpec>{
        key("model.preset", &C::model, &M::preset, one_of(model_preset_names()),
            "shape preset; explicit shape keys win"),
        key("model.d_model", &C::model, &M::d_model, positive(), "hidden size"),
        key("model.n_layers", &C::model, &M::n_layers, positive(), "transformer blocks"),
        key("model.n_heads", &C::model, &M::n_heads, positive(), "query heads"),
        key("model.n_kv_heads", &C::model, &M::n_kv_heads, at_least(1), "key/value heads (grouped-query attention)"),
        key("model.ffn_hidden", &C::model, &M::ffn_hidden, positive(), "SwiGLU hidden width"),
        key("model.vocab_size", &C::model, &M::vocab_size, at_least(2), "vocabulary size"),
        key("model.seq_len", &C::model, &M::seq_len, at_least(2), "tokens per sequence"),
        key("model.tie_embeddings", &C::model, &M::tie_embeddings, any(), "lm_head reuses the token embedding"),
        key("model.rope_theta", &C::model, &M::rope_theta, positive(), "RoPE base frequency"),
        key("model.norm_eps", &C::model, &M::norm_eps, positive(), "RMSNorm epsilon"),
        key("model.init_std", &C::model, &M::init_std, positive(), "std of the normal weight init"),
        key("model.trainable", &C::model, &M::trainable, any(), "false: prediction only, `dtlab train` refuses"),
        key("data.source", &C::data, &D::source, one_of({"synthetic", "file"}), "where tokens come from"),
        key("data.path", &C::data, &D::path, any(), "token file when data.source=file"),
        key("data.seed", &C::data, &D::seed, any(), "data sampling seed"),
        key("data.mask_token", &C::data, &D::mask_token, at_least(-1), "target id ignored by the loss; -1 = none"),
        key("train.steps", &C::train, &T::steps, at_least(1), "optimizer steps"),
        key("train.global_batch", &C::train, &T::global_batch, positive(), "sequences per optimizer step, all ranks"),
        key("train.micro_batch", &C::train, &T::micro_batch, positive(), "sequences per rank per forward/backward"),
        key("train.accumulation", &C::train, &T::accumulation, at_least(0), "micro-steps per step; 0 = derive"),
        key("train.optimizer", &C::train, &T::optimizer, one_of({"adamw", "sgd"}), "optimizer"),
        key("train.lr", &C::train, &T::lr, positive(), "peak learning rate"),
        key("train.min_lr", &C::train, &T::min_lr, at_least(0), "learning rate at the end of the decay"),
        key("train.warmup_steps", &C::train, &T::warmup_steps, at_least(0), "linear warm-up steps"),
        key("train.schedule", &C::train, &T::schedule, one_of({"constant", "linear", "cosine", "step"}),
            "lr schedule after warm-up"),
        key("train.step_every", &C::train, &T::step_every, at_least(1), "schedule=step: steps between lr drops"),
        key("train.step_gamma", &C::train, &T::step_gamma, in_range(0, true, 1, false),
            "schedule=step: lr factor per drop"),
        key("train.weight_decay", &C::train, &T::weight_decay, at_least(0), "decoupled weight decay"),
        key("train.decay_norms_and_embeddings", &C::train, &T::decay_norms_and_embeddings, any(),
            "AdamW: decay norms and embeddings too"),
        key("train.beta1", &C::train, &T::beta1, unit, "AdamW first-moment decay"),
        key("train.beta2", &C::train, &T::beta2, unit, "AdamW second-moment decay"),
        key("train.eps", &C::train, &T::eps, positive(), "AdamW denominator epsilon"),
        key("train.momentum", &C::train, &T::momentum, unit, "SGD momentum"),
        key("train.grad_clip", &C::train, &T::grad_clip, at_least(0), "max global L2 gradient norm; 0 = off"),
        key("train.seed", &C::train, &T::seed, any(), "model init seed"),
        key("train.threads", &C::train, &T::threads, at_least(0),
            "intra-op threads per rank; 0 = cores / ranks on this machine"),
        key("train.device", &C::train, &T::device, one_of({"auto", "cpu", "cuda"}),
            "where the model trains: cpu | cuda | auto (cuda when a cuda build sees a device)"),
        key("parallel.strategy", &C::parallel, &P::strategy, one_of_the_strategies(),
            "distributed strategy (strategies/catalog.def)"),
        key("parallel.backend", &C::parallel, &P::backend, one_of({"auto", "gloo", "nccl"}), "collective backend"),
        key("parallel.bucket_cap_mb", &C::parallel, &P::bucket_cap_mb, positive(), "DDP gradient bucket size (MiB)"),
        key("parallel.shard_size", &C::parallel, &P::shard_size, at_least(0),
            "hybrid sharding: ranks per shard group; 0 = the node across nodes, else the world"),
        key("parallel.prefetch", &C::parallel, &P::prefetch, any(), "FSDP: prefetch the next unit's parameters"),
        key("parallel.reduce_scatter", &C::parallel, &P::reduce_scatter, one_of({"ring", "backend"}),
            "reduce-scatter algorithm on Gloo: the lab's ring, or the backend's (all-reduce + chunk)"),
        key("parallel.collectives", &C::parallel, &P::collectives, one_of({"auto", "flat", "hierarchical"}),
            "across nodes: flat, hierarchical (node, then across nodes: ddp's all-reduce; zero1, fsdp_full_shard and "
            "fsdp_shard_grad_op's reduce-scatters and all-gathers), auto (the model's choice with a profile; else "
            "ddp hierarchical, the others flat)"),
        key("parallel.checkpoint_every", &C::parallel, &P::checkpoint_every, at_least(1),
            "activation_checkpointing=full: checkpoint every k-th block (1 = all)"),
        key("parallel.wrap", &C::parallel, &P::wrap, one_of({"block", "every_2", "every_4", "model"}),
            "FSDP wrap policy: one unit per block, per 2 or 4 blocks, or the whole model"),
        key("parallel.offload", &C::parallel, &P::offload, any(), "keep parameters and optimizer state on the host"),
        key("parallel.activation_checkpointing", &C::parallel, &P::activation_checkpointing,
            one_of({"none", "full", "selective"}), "recompute activations in backward"),
        key("parallel.pp", &C::parallel, &P::pp, at_least(1), "pipeline-parallel stages (mesh dimension pp)"),
        key("parallel.pp_schedule", &C::parallel, &P::pp_schedule,
            one_of({"gpipe", "1f1b", "interleaved_1f1b", "zero_bubble"}),
            "with parallel.pp > 1: the pipeline schedule of each step's micro-batches"),
        key("parallel.pp_virtual_stages", &C::parallel, &P::pp_virtual_stages, at_least(1),
            "model chunks per pipeline rank (interleaved_1f1b: >= 2; else 1)"),
        key("parallel.pp_split", &C::parallel, &P::pp_split, any(),
            "first block of each pipeline virtual stage after the first, comma-separated; empty = balanced"),
        key("parallel.pp_reshard_after_forward", &C::parallel, &P::pp_reshard_after_forward, any(),
            "with parallel.pp > 1, fsdp_full_shard and fsdp_hybrid: free each unit after every micro-batch's forward "
            "and gather it again for its backward (false: gathered once per step, kept through the flush)"),
        key("parallel.cp", &C::parallel, &P::cp, at_least(1),
            "context-parallel ranks per sequence (mesh dimension cp)"),
        key("parallel.tp", &C::parallel, &P::tp, at_least(1),
            "tensor-parallel ranks per layer (mesh dimension tp): Megatron column/row-parallel linears, a "
            "vocabulary-parallel embedding, head and loss; parallel.strategy=ddp runs over the world / tp ranks left"),
        key("parallel.sequence_parallel", &C::parallel, &P::sequence_parallel, any(),
            "with parallel.tp > 1: split the norm and residual regions along the sequence (all-gather before and "
            "reduce-scatter after each tensor-parallel region; their activations / tp)"),
        key("parallel.tp_placement", &C::parallel, &P::tp_placement, one_of({"intra_node", "inter_node"}),
            "intra_node: a tensor-parallel group is consecutive ranks (inside a node); inter_node: tp outside the "
            "data-parallel dimensions, each group spanning nodes (to measure what crossing nodes costs)"),
        key("parallel.ep", &C::parallel, &P::ep, at_least(1),
            "expert-parallel ranks, borrowed from dp_shard * cp * tp (MoE)"),
        key("precision.param_dtype", &C::precision, &X::param_dtype, dtype, "dtype of compute parameters"),
        key("precision.reduce_dtype", &C::precision, &X::reduce_dtype, dtype, "dtype of gradient reduction"),
        key("precision.master_dtype", &C::precision, &X::master_dtype,
            one_of({std::string(config_name(Dtype::fp32)), std::string(config_name(Dtype::bf16))}),
            "dtype of the optimizer's master weights"),
        key("precision.loss_scale", &C::precision, &X::loss_scale, one_of({"none", "dynamic"}),
            "loss scaling (fp16 only)"),
        key("precision.loss_scale_init", &C::precision, &X::loss_scale_init, positive(),
            "dynamic loss scaling: initial scale"),
        key("precision.loss_scale_growth_interval", &C::precision, &X::loss_scale_growth_interval, at_least(1),
            "dynamic loss scaling: good steps before the scale doubles"),
        key("precision.stochastic_rounding", &C::precision, &X::stochastic_rounding, any(),
            "round master-to-param casts stochastically"),
        key("instrument.trace", &C::instrument, &I::trace, any(), "write a Chrome trace per rank"),
        key("instrument.tensorboard", &C::instrument, &I::tensorboard, any(),
            "write TensorBoard scalars per rank under <run>/tensorboard/"),
        key("instrument.nvtx", &C::instrument, &I::nvtx, any(), "emit NVTX ranges (cuda build)"),
        key("instrument.cupti", &C::instrument, &I::cupti, one_of({"auto", "on", "off"}), "CUPTI kernel timing"),
        key("instrument.warmup_steps", &C::instrument, &I::warmup_steps, at_least(0), "steps excluded from summaries"),
        key("instrument.log_every", &C::instrument, &I::log_every, at_least(1), "print a step line every N steps"),
        key("instrument.profile", &C::instrument, &I::profile, any(),
            "machine profile for the prediction in result.json (dtlab calibrate)"),
        key("instrument.check_collectives", &C::instrument, &I::check_collectives, any(),
            "debug: each collective first agrees across its group on call number, op, dtype and shape; a desync "
            "stops every rank naming both (docs/instrumentation.md)"),
        key("memory.limit", &C::memory, &Y::limit, any(),
            "tensor bytes per rank before out-of-memory (256MiB, 1GiB; none = no cap)"),
        key("checkpoint.dir", &C::checkpoint, &K::dir, any(), "directory of training checkpoints; empty = none"),
        key("checkpoint.every", &C::checkpoint, &K::every, at_least(0),
            "save after every N-th step; 0 = after the last step only"),
        key("checkpoint.keep", &C::checkpoint, &K::keep, at_least(0), "keep the newest K checkpoints; 0 = all"),
        key("checkpoint.async", &C::checkpoint, &K::async, any(), "write checkpoints in the background"),
        key("checkpoint.resume", &C::checkpoint, &K::resume, any(),
            "auto (latest under checkpoint.dir) | never | a checkpoint directory"),
    };
    // clang-format on
  }();
  return table;
}

const KeySpec* find_key(std::string_view name) {
  for (const KeySpec& k : key_table())
    if (k.name == name) return &k;
  return nullptr;
}

const KeySpec& key_named(std::string_view name) { return *find_key(name); }  // REQUIRES: a table key

bool is_section(std::string_view name) {
  return std::find(kSections.begin(), kSections.end(), name) != kSections.end();
}

std::string first_leaf_of(std::string_view section) {
  for (const KeySpec& k : key_table())
    if (k.section() == section) return k.leaf();
  return "";
}

}  // namespace config_internal

std::vector<std::string> config_keys() {
  std::vector<std::string> keys;
  for (const config_internal::KeySpec& k : config_internal::key_table()) keys.push_back(k.name);
  return keys;
}

}  // namespace dtlab
