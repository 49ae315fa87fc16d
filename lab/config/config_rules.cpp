// config_rules.cpp: validation — each key's own rule (from the key table), the rules relating two or more keys,
// and the derived train.accumulation. A rule relating two keys lives in check_cross_rules().
#include <map>
#include <optional>
#include <regex>
#include <string>

#include "lab/config/config_internal.hpp"

namespace dtlab {
namespace config_internal {
namespace {

std::optional<int64_t> checked_product(int64_t a, int64_t b) {
  int64_t product = 0;
  if (__builtin_mul_overflow(a, b, &product)) return std::nullopt;
  return product;
}

// pp * cp * tp, or nullopt when it overflows or a degree is below 1 (the single-key rules report that).
std::optional<int64_t> model_parallel_degree(const ParallelConfig& p) {
  if (p.pp < 1 || p.cp < 1 || p.tp < 1) return std::nullopt;
  const auto pc = checked_product(p.pp, p.cp);
  return pc ? checked_product(*pc, p.tp) : std::nullopt;
}

std::string show(const std::optional<int64_t>& x) { return x ? std::to_string(*x) : "(overflows int64)"; }

std::string divisors_hint(int64_t n) {
  if (n > 4096) return "";
  std::vector<std::string> divisors;
  for (int64_t d = 1; d <= n; ++d)
    if (n % d == 0) divisors.push_back(std::to_string(d));
  return "; choose one of " + join(divisors, ", ");
}

// parallel.tp > 1: every split dimension of the model divides by tp (lab/train/tensor_parallel_plan.hpp), and what
// a tensor-parallel run cannot do yet is refused with the way out.
void check_tensor_parallel_rules(const Config& c) {
  const ModelConfig& m = c.model;
  const int64_t tp = c.parallel.tp;
  const auto n = [](int64_t x) { return std::to_string(x); };
  const struct {
    const char* key;
    int64_t value;
    const char* what;
  } split[] = {{"model.n_heads", m.n_heads, "query heads (wq's rows, wo's columns)"},
               {"model.ffn_hidden", m.ffn_hidden, "MLP hidden width (w_gate's and w_up's rows, w_down's columns)"},
               {"model.vocab_size", m.vocab_size, "vocabulary (the embedding's and the head's rows)"}};
  for (const auto& s : split)
    if (s.value % tp != 0)
      throw Problem{s.key, std::string(s.key) + "=" + n(s.value) + " is not divisible by parallel.tp=" + n(tp) +
                               ": each tensor-parallel rank holds 1/tp of the " + s.what};
  if (m.n_kv_heads < tp)
    throw Problem{"model.n_kv_heads", "model.n_kv_heads=" + n(m.n_kv_heads) + " < parallel.tp=" + n(tp) +
                                          ": each tensor-parallel rank needs whole key/value heads, and replicating "
                                          "them across ranks is not built; choose parallel.tp <= n_kv_heads"};
  if (m.n_kv_heads % tp != 0)
    throw Problem{"model.n_kv_heads", "model.n_kv_heads=" + n(m.n_kv_heads) + " is not divisible by parallel.tp=" +
                                          n(tp) + ": each tensor-parallel rank holds 1/tp of the key/value heads"};
  if (c.parallel.sequence_parallel && m.seq_len % tp != 0)
    throw Problem{"parallel.sequence_parallel", "parallel.sequence_parallel=true with model.seq_len=" + n(m.seq_len) +
                                                    " not divisible by parallel.tp=" + n(tp) +
                                                    ": each rank holds seq_len / tp positions of the sequence"};
}

// The mesh's model-parallel degrees: their product divides the world (the rest is data parallel), and each
// dimension is accepted once it is built. The data-parallel split (dp_replicate x dp_shard) and ep's divisibility
// are the strategy's and the mesh's (strategies/catalog.hpp device_mesh).
void check_mesh_rules(const Config& c) {
  const ParallelConfig& p = c.parallel;
  const auto n = [](int64_t x) { return std::to_string(x); };
  const auto model_parallel = model_parallel_degree(p);
  if (!model_parallel || c.world_size % *model_parallel != 0) {
    const std::string key = p.tp > 1 ? "parallel.tp" : p.pp > 1 ? "parallel.pp" : "parallel.cp";
    throw Problem{key, "parallel.pp(" + n(p.pp) + ") * parallel.cp(" + n(p.cp) + ") * parallel.tp(" + n(p.tp) +
                           ") = " + show(model_parallel) + " does not divide world_size(" + n(c.world_size) +
                           "); the ranks left over are the data-parallel ones, so choose degrees whose product "
                           "divides the world"};
  }
  // Not built yet: each line goes when its dimension lands (docs/architecture.md, "adding a parallel dimension").
  const struct {
    const char* key;
    int64_t value;
    const char* what;
  } unbuilt[] = {{"parallel.cp", p.cp, "context parallelism"}, {"parallel.ep", p.ep, "expert parallelism"}};
  for (const auto& u : unbuilt)
    if (u.value != 1)
      throw Problem{u.key, std::string(u.key) + "=" + n(u.value) + ": " + u.what +
                               " is not built yet; the mesh accepts only " + u.key + "=1 in this version"};
  if (p.tp > 1) check_tensor_parallel_rules(c);
  if (p.tp_placement == "inter_node" && (p.tp == 1 || c.world_size / *model_parallel == 1))
    throw Problem{
        "parallel.tp_placement",
        "parallel.tp_placement=inter_node needs parallel.tp > 1 and more than one data-parallel rank (world " +
            n(c.world_size) + " / (pp * cp * tp) = " + n(c.world_size / *model_parallel) +
            "): it puts tp outside the data-parallel dimensions, so with either of size 1 nothing moves"};
  if (p.sequence_parallel && p.tp == 1)
    throw Problem{"parallel.sequence_parallel",
                  "parallel.sequence_parallel=true needs parallel.tp > 1: sequence "
                  "parallelism splits the regions tensor parallelism replicates"};
}

// Rules relating two or more keys. REQUIRES: every single-key rule holds (no zero divisors).
void check_cross_rules(const Config& c, const StrategyChoices& strategies) {
  const ModelConfig& m = c.model;
  const auto n = [](int64_t x) { return std::to_string(x); };
  if (m.d_model % m.n_heads != 0)
    throw Problem{"model.d_model", "model.d_model=" + n(m.d_model) + " is not divisible by model.n_heads=" +
                                       n(m.n_heads) + "; choose d_model as a multiple of " + n(m.n_heads)};
  if ((m.d_model / m.n_heads) % 2 != 0)
    throw Problem{"model.d_model", "model.d_model=" + n(m.d_model) + " / model.n_heads=" + n(m.n_heads) +
                                       " gives head_dim " + n(m.d_model / m.n_heads) +
                                       ", which is odd; RoPE rotates pairs of dimensions, so choose d_model as a "
                                       "multiple of 2 * n_heads = " +
                                       show(checked_product(2, m.n_heads))};
  if (m.n_kv_heads > m.n_heads)
    throw Problem{"model.n_kv_heads", "model.n_kv_heads=" + n(m.n_kv_heads) + " must be <= model.n_heads=" +
                                          n(m.n_heads) + " (grouped-query attention)" + divisors_hint(m.n_heads)};
  if (m.n_heads % m.n_kv_heads != 0)
    throw Problem{"model.n_kv_heads", "model.n_kv_heads=" + n(m.n_kv_heads) + " must divide model.n_heads=" +
                                          n(m.n_heads) + " (grouped-query attention)" + divisors_hint(m.n_heads)};

  if (c.data.source == "file" && c.data.path.empty())
    throw Problem{"data.source",
                  "data.source=file requires a non-empty data.path (a token file, see "
                  "lab/data.hpp); set data.path=... or data.source=synthetic"};
  if (c.data.mask_token >= m.vocab_size)
    throw Problem{"data.mask_token", "data.mask_token=" + n(c.data.mask_token) + " must be in [-1, model.vocab_size=" +
                                         n(m.vocab_size) + ") (a token id, or -1 for none)"};

  const TrainConfig& t = c.train;
  if (t.min_lr > t.lr)
    throw Problem{"train.min_lr", "train.min_lr=" + format_number(t.min_lr) + " must be <= train.lr=" +
                                      format_number(t.lr) + " (the schedule decays from lr to min_lr)"};
  if (t.warmup_steps >= t.steps)
    throw Problem{"train.warmup_steps", "train.warmup_steps=" + n(t.warmup_steps) + " must be < train.steps=" +
                                            n(t.steps) + "; lower warmup_steps or raise steps"};

  check_mesh_rules(c);
  // Ranks that see different data: the world over the model-parallel degrees (pp * cp * tp).
  const int64_t dp = data_parallel_size(c);
  const bool dp_is_world = dp == c.world_size;
  const auto per_micro_step = checked_product(t.micro_batch, dp);
  if (!per_micro_step || t.global_batch % *per_micro_step != 0)
    throw Problem{"train.global_batch",
                  "train.global_batch=" + n(t.global_batch) + " is not divisible by train.micro_batch(" +
                      n(t.micro_batch) + (dp_is_world ? ") * world_size(" : ") * data-parallel size(") + n(dp) +
                      ") = " + show(per_micro_step) + "; choose global_batch as a multiple of " + show(per_micro_step)};
  if (t.accumulation != 0 && t.accumulation != t.global_batch / *per_micro_step) {
    const auto product = per_micro_step ? checked_product(*per_micro_step, t.accumulation) : std::nullopt;
    throw Problem{"train.accumulation",
                  "train.accumulation=" + n(t.accumulation) + " is inconsistent: micro_batch(" + n(t.micro_batch) +
                      ") * accumulation(" + n(t.accumulation) + (dp_is_world ? ") * world(" : ") * data-parallel(") +
                      n(dp) + ") = " + show(product) + " != global_batch(" + n(t.global_batch) +
                      "); set train.accumulation=0 to derive it (" + n(t.global_batch / *per_micro_step) + ")"};
  }

  const ParallelConfig& p = c.parallel;
  // The shard groups tile the data-parallel ranks (the world when pp = cp = tp = 1).
  if (p.shard_size > 0 && dp % p.shard_size != 0)
    throw Problem{"parallel.shard_size", "parallel.shard_size=" + n(p.shard_size) + " does not divide " +
                                             (dp_is_world ? "world_size=" : "the data-parallel ranks=") + n(dp) +
                                             "; choose a divisor of " + n(dp) + ", or 0 for one group of all of them"};

  check_pipeline_rules(c, strategies);

  const PrecisionConfig& x = c.precision;
  if (x.loss_scale == "dynamic" && x.param_dtype != "fp16")
    throw Problem{"precision.loss_scale", "precision.loss_scale=dynamic requires precision.param_dtype=fp16 (it is " +
                                              x.param_dtype +
                                              "); fp32 and bf16 have fp32's exponent range and "
                                              "need no loss scaling: set precision.loss_scale=none"};
}

}  // namespace

void check_key(const KeySpec& k, const Config& config) {
  const Value value = k.get(config);
  if (k.rule.admits(value)) return;
  std::string text = k.name + "=" + format_value(value) + " must be " + k.rule.describe() + " (" + k.doc + ")";
  // A closed-set value that starts a few allowed ones ("fsdp") names them; else a typo names the closest.
  std::vector<std::string> suggestions;
  if (const auto* s = std::get_if<std::string>(&value); s && !s->empty()) {
    for (const std::string& allowed : k.rule.allowed)
      if (allowed.starts_with(*s)) suggestions.push_back("'" + allowed + "'");
    if (suggestions.empty())
      if (const auto typo = closest(*s, k.rule.allowed)) suggestions.push_back("'" + *typo + "'");
  }
  text += suggestions.empty() ? "; the default is " + format_value(k.get(Config{}))
                              : "; did you mean " + join(suggestions, " or ") + "?";
  throw Problem{k.name, text};
}

// accumulation = global_batch / (micro_batch * data-parallel size) when the division is exact; otherwise the batch
// rule in check_cross_rules() reports it.
void derive_accumulation(Config& config) {
  TrainConfig& t = config.train;
  const auto model_parallel = model_parallel_degree(config.parallel);
  if (!model_parallel || config.world_size % *model_parallel != 0) return;  // check_mesh_rules() reports it
  const int64_t dp = config.world_size / *model_parallel;
  if (t.accumulation != 0 || t.micro_batch < 1 || dp < 1 || t.global_batch < 1) return;
  const auto per_micro_step = checked_product(t.micro_batch, dp);
  if (per_micro_step && t.global_batch % *per_micro_step == 0) t.accumulation = t.global_batch / *per_micro_step;
}

void check_rules(const Config& config, const StrategyChoices& strategies) {
  if (config.world_size < 1)
    throw Problem{
        "", "world_size=" + std::to_string(config.world_size) + " must be >= 1 (ranks in the job, from the launcher)"};
  for (const KeySpec& k : key_table()) {
    if (!k.rule.strategy_ids) {
      check_key(k, config);
      continue;
    }
    if (strategies.ids.empty())
      throw Problem{k.name, k.name + "=" + format_value(k.get(config)) +
                                ": no strategy was handed to config validation (the program links no catalogue: "
                                "call the entry points of strategies/catalog.hpp)"};
    KeySpec closed = k;  // the catalogue's ids, as a closed set: the same refusal and "did you mean" as any other
    closed.rule.allowed = strategies.ids;
    check_key(closed, config);
  }
  if (!memory_limit_of(config.memory.limit)) throw Problem{"memory.limit", memory_limit_refusal(config.memory.limit)};
  if (config.checkpoint.resume.empty())
    throw Problem{"checkpoint.resume", "checkpoint.resume=\"\" must be auto, never or a checkpoint directory"};
  check_cross_rules(config, strategies);
}

std::optional<int64_t> memory_limit_of(const std::string& text) {
  if (text == "none") return 0;
  static const std::regex kForm(R"(([0-9]+(\.[0-9]+)?)\s*(B|KiB|MiB|GiB|TiB)?)");
  static const std::map<std::string, double> kUnit = {
      {"", 1}, {"B", 1}, {"KiB", 1024.0}, {"MiB", 1048576.0}, {"GiB", 1073741824.0}, {"TiB", 1099511627776.0}};
  std::smatch match;
  if (!std::regex_match(text, match, kForm)) return std::nullopt;
  const double bytes = std::stod(match[1].str()) * kUnit.at(match[3].str());
  if (!(bytes >= 1 && bytes < 9e18)) return std::nullopt;
  return static_cast<int64_t>(bytes);
}

std::string memory_limit_refusal(const std::string& text) {
  return "memory.limit=" + (text.empty() ? std::string("\"\"") : text) +
         " must be none or a size of at least 1 byte with a binary unit (B, KiB, MiB, GiB, TiB), e.g. "
         "memory.limit=256MiB";
}

}  // namespace config_internal

int64_t data_parallel_size(const Config& config) {
  const auto model_parallel = config_internal::model_parallel_degree(config.parallel);
  if (!model_parallel || config.world_size % *model_parallel != 0) return config.world_size;  // not a valid config
  return config.world_size / *model_parallel;
}

int64_t memory_limit_bytes(const MemoryConfig& memory) {
  const auto bytes = config_internal::memory_limit_of(memory.limit);
  if (!bytes) throw ConfigError("config: " + config_internal::memory_limit_refusal(memory.limit));
  return *bytes;
}

void validate(const Config& config, const StrategyChoices& strategies) {
  try {
    config_internal::check_rules(config, strategies);
  } catch (const config_internal::Problem& p) {
    throw ConfigError("config: " + p.text);
  }
}

}  // namespace dtlab
