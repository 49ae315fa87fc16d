// config.cpp: the key table and everything it drives — YAML and `section.key=value` parsing, presets,
// validation, "did you mean" suggestions, the printed table and JSON.
//
// Adding a key = one field in config.hpp + one row in key_table(). A rule on one key (interval or closed
// set) lives in its row; a rule relating two keys lives in check_cross_rules().
//
// Error format (tests and docs rely on it):
//   config: <key>=<value> <broken rule>; <way out>           validation, programmatic or defaults
//   <file>:<line>: config: ...                                the offending key was set in <file>
//   <file>: config: ... (set by override 'train.lr=-1')       the offending key came from an override
//   config: override '<text>': ...                            an override that cannot be parsed
#include "lab/config.hpp"

#include <algorithm>  // defines: std::min, std::max
#include <array>
#include <cerrno>
#include <charconv>  // locale-free number parsing (from_chars) and shortest round-trip printing (to_chars)
#include <cmath>
#include <cstring>  // std::strerror
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <optional>
#include <sstream>
#include <string_view>
#include <variant>

#include <yaml-cpp/yaml.h>
#include <nlohmann/json.hpp>

#include "lab/model_shape.hpp"
#include "strategies/catalog.hpp"

namespace dtlab {
namespace {

// ---- values and rules ---------------------------------------------------------------------------

using Value = std::variant<bool, int64_t, double, std::string>;
enum class KeyType { boolean, integer, number, text };  // same order as Value's alternatives

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

// Shortest text that reads back as the same double, in fixed notation unless scientific is clearly
// shorter: 0.0003, 25, 1e-08, 1e+20.
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

// The rule of a single key: a numeric interval, a closed set of strings, or nothing.
struct Rule {
  std::optional<double> low, high;
  bool low_open = false, high_open = false;
  std::vector<std::string> allowed;

  bool admits(const Value& value) const {
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

  // "> 0", ">= 1", "in [0, 1)", "one of adamw | sgd"
  std::string describe() const {
    if (!allowed.empty()) return "one of " + join(allowed, " | ");
    if (low && high)
      return "in " + std::string(low_open ? "(" : "[") + format_number(*low) + ", " + format_number(*high) +
             (high_open ? ")" : "]");
    if (low) return (low_open ? "> " : ">= ") + format_number(*low);
    if (high) return (high_open ? "< " : "<= ") + format_number(*high);
    return "anything";
  }
};

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

// ---- the key table --------------------------------------------------------------------------------

struct KeySpec {
  std::string name;  // "section.key", as in YAML, overrides and JSON
  KeyType type;
  std::function<Value(const Config&)> get;
  std::function<void(Config&, const Value&)> set;  // REQUIRES: value holds the alternative of `type`
  Rule rule;
  std::string doc;  // one line, shown in rule violations

  std::string section() const { return name.substr(0, name.find('.')); }
  std::string leaf() const { return name.substr(name.find('.') + 1); }
};

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

const std::array<std::string, 6> kSections = {"model", "data", "train", "parallel", "precision", "instrument"};

// Shape keys a preset sets; one set explicitly (file, override, JSON) keeps its value.
const std::array<std::string, 9> kPresetKeys = {"model.d_model",    "model.n_layers",       "model.n_heads",
                                                "model.n_kv_heads", "model.ffn_hidden",     "model.vocab_size",
                                                "model.seq_len",    "model.tie_embeddings", "model.trainable"};

const std::vector<KeySpec>& key_table() {
  static const std::vector<KeySpec> table = [] {
    using C = Config;
    using M = ModelConfig;
    using D = DataConfig;
    using T = TrainConfig;
    using P = ParallelConfig;
    using X = PrecisionConfig;
    using I = InstrumentConfig;
    const Rule dtype = one_of({"fp32", "bf16", "fp16"});
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
        key("train.threads", &C::train, &T::threads, at_least(0), "intra-op threads per rank; 0 = cores / local ranks"),
        key("parallel.strategy", &C::parallel, &P::strategy, one_of(strategy_ids()),
            "distributed strategy (strategies/catalog.def)"),
        key("parallel.backend", &C::parallel, &P::backend, one_of({"auto", "gloo", "nccl"}), "collective backend"),
        key("parallel.bucket_cap_mb", &C::parallel, &P::bucket_cap_mb, positive(), "DDP gradient bucket size (MiB)"),
        key("parallel.shard_size", &C::parallel, &P::shard_size, at_least(0),
            "hybrid sharding: ranks per shard group; 0 = world"),
        key("parallel.prefetch", &C::parallel, &P::prefetch, any(), "FSDP: prefetch the next unit's parameters"),
        key("parallel.reduce_scatter", &C::parallel, &P::reduce_scatter, one_of({"ring", "backend"}),
            "reduce-scatter algorithm on Gloo: the lab's ring, or the backend's (all-reduce + chunk)"),
        key("parallel.checkpoint_every", &C::parallel, &P::checkpoint_every, at_least(1),
            "activation_checkpointing=full: checkpoint every k-th block (1 = all)"),
        key("parallel.wrap", &C::parallel, &P::wrap, one_of({"block", "every_2", "every_4", "model"}),
            "FSDP wrap policy: one unit per block, per 2 or 4 blocks, or the whole model"),
        key("parallel.offload", &C::parallel, &P::offload, any(), "keep parameters and optimizer state on the host"),
        key("parallel.activation_checkpointing", &C::parallel, &P::activation_checkpointing,
            one_of({"none", "full", "selective"}), "recompute activations in backward"),
        key("precision.param_dtype", &C::precision, &X::param_dtype, dtype, "dtype of compute parameters"),
        key("precision.reduce_dtype", &C::precision, &X::reduce_dtype, dtype, "dtype of gradient reduction"),
        key("precision.master_dtype", &C::precision, &X::master_dtype, one_of({"fp32", "bf16"}),
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
        key("instrument.nvtx", &C::instrument, &I::nvtx, any(), "emit NVTX ranges (cuda build)"),
        key("instrument.cupti", &C::instrument, &I::cupti, one_of({"auto", "on", "off"}), "CUPTI kernel timing"),
        key("instrument.warmup_steps", &C::instrument, &I::warmup_steps, at_least(0), "steps excluded from summaries"),
        key("instrument.log_every", &C::instrument, &I::log_every, at_least(1), "print a step line every N steps"),
        key("instrument.profile", &C::instrument, &I::profile, any(),
            "machine profile for the prediction in result.json (dtlab calibrate)"),
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

// ---- "did you mean" -----------------------------------------------------------------------------------

// Optimal-string-alignment distance: Levenshtein plus adjacent transpositions ("trian" -> "train" is 1).
size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<std::vector<size_t>> d(a.size() + 1, std::vector<size_t>(b.size() + 1));
  for (size_t i = 0; i <= a.size(); ++i) d[i][0] = i;
  for (size_t j = 0; j <= b.size(); ++j) d[0][j] = j;
  for (size_t i = 1; i <= a.size(); ++i)
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t substitution = a[i - 1] == b[j - 1] ? 0 : 1;
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + substitution});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1])
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
    }
  return d[a.size()][b.size()];
}

// The closest candidate if it is close enough to be a plausible typo.
template <class Candidates>
std::optional<std::string> closest(std::string_view name, const Candidates& candidates) {
  if (name.empty() || name.size() > 64) return std::nullopt;
  const size_t tolerance = std::max<size_t>(2, name.size() / 3);
  std::optional<std::string> best;
  size_t best_distance = tolerance + 1;
  for (const std::string& candidate : candidates) {
    const size_t distance = edit_distance(name, candidate);
    if (distance < best_distance && distance < std::max(name.size(), candidate.size())) {
      best = candidate;
      best_distance = distance;
    }
  }
  return best;
}

// "unknown key 'train.lrr'; did you mean 'train.lr'?" and variants for sections and bare keys.
std::string unknown_key_text(const std::string& name) {
  if (is_section(name)) {
    std::vector<std::string> keys;
    for (const KeySpec& k : key_table())
      if (k.section() == name) keys.push_back(k.name);
    return "'" + name + "' is a section, not a key; name a key in it: " + join(keys, ", ");
  }
  const std::vector<std::string> all = config_keys();
  if (name.find('.') == std::string::npos) {  // "lr": the section was left out
    std::vector<std::string> same_leaf;
    for (const KeySpec& k : key_table())
      if (k.leaf() == name) same_leaf.push_back("'" + k.name + "'");
    if (!same_leaf.empty())
      return "unknown key '" + name + "'; keys are section.key: did you mean " + join(same_leaf, " or ") + "?";
  }
  const std::string section = name.substr(0, name.find('.'));
  std::string text =
      is_section(section) ? "unknown key '" + name + "'" : "unknown section '" + section + "' in key '" + name + "'";
  if (const auto suggestion = closest(name, all)) return text + "; did you mean '" + *suggestion + "'?";
  if (is_section(section)) {
    std::vector<std::string> keys;
    for (const KeySpec& k : key_table())
      if (k.section() == section) keys.push_back(k.leaf());
    return text + "; keys in " + section + ": " + join(keys, ", ");
  }
  if (const auto suggestion = closest(section, kSections))
    return text + "; did you mean section '" + *suggestion + "'?";
  return text + "; sections are " + join({kSections.begin(), kSections.end()}, ", ");
}

// ---- parsing values -------------------------------------------------------------------------------

// A broken rule or unparsable value, before we know where it came from. `text` has no "config: " prefix.
struct Problem {
  std::string key;  // the key it is about ("" if none): finds the file line or override that set it
  std::string text;
};

[[noreturn]] void wrong_type(const KeySpec& k, const std::string& shown_value, const std::string& detail = "") {
  throw Problem{k.name, k.name + "=" + shown_value + " has the wrong type: expected " + describe_type(k.type) + detail +
                            " (e.g. " + k.name + "=" + format_value(k.get(Config{})) + ")"};
}

// Converts the text of a YAML scalar to the key's type. Strict: booleans are true/false, numbers must be
// entirely numeric and finite.
Value parse_scalar(const KeySpec& k, const std::string& text) {
  switch (k.type) {
    case KeyType::text:
      return text;
    case KeyType::boolean:
      if (text == "true" || text == "True" || text == "TRUE") return true;
      if (text == "false" || text == "False" || text == "FALSE") return false;
      wrong_type(k, text);
    case KeyType::integer: {
      const std::string_view digits = text.starts_with('+') ? std::string_view(text).substr(1) : text;
      int64_t i = 0;
      const auto [end, error] = std::from_chars(digits.data(), digits.data() + digits.size(), i);
      if (error == std::errc::result_out_of_range) wrong_type(k, text, " within int64 range");
      if (error != std::errc() || end != digits.data() + digits.size() || digits.empty()) wrong_type(k, text);
      return i;
    }
    case KeyType::number: {
      const std::string_view digits = text.starts_with('+') ? std::string_view(text).substr(1) : text;
      double x = 0;
      const auto [end, error] = std::from_chars(digits.data(), digits.data() + digits.size(), x);
      if (error == std::errc::result_out_of_range) wrong_type(k, text, " within double range");
      if (error != std::errc() || end != digits.data() + digits.size() || digits.empty()) wrong_type(k, text);
      if (!std::isfinite(x)) wrong_type(k, text, " that is finite");
      return x;
    }
  }
  wrong_type(k, text);
}

const char* node_kind(const YAML::Node& node) {
  if (node.IsMap()) return "mapping";
  if (node.IsSequence()) return "list";
  if (node.IsNull()) return "null";
  return "scalar";
}

Value parse_node(const KeySpec& k, const YAML::Node& node) {
  if (node.IsNull()) {
    if (k.type == KeyType::text) return std::string();
    wrong_type(k, "null");
  }
  if (!node.IsScalar())
    wrong_type(k, std::string("<") + node_kind(node) + ">", std::string(", not a ") + node_kind(node));
  return parse_scalar(k, node.Scalar());
}

// ---- loading ----------------------------------------------------------------------------------------

// Where an explicitly set key came from, for error messages. Presence here = "set explicitly".
struct Source {
  bool from_override = false;
  std::string where;  // "run.yaml:7" or "override 'train.lr=1'"
};
using Sources = std::map<std::string, Source, std::less<>>;

std::string where_in(const std::string& origin, const YAML::Mark& mark) {
  const std::string name = origin.empty() ? "<text>" : origin;
  return mark.is_null() ? name : name + ":" + std::to_string(mark.line + 1);
}

// Turns a Problem found after parsing into the final message (see the format at the top).
ConfigError located(const Problem& problem, const Sources& sources, const std::string& origin) {
  const std::string prefix = origin.empty() ? "" : origin + ": ";
  const auto source = sources.find(problem.key);
  if (source == sources.end()) return ConfigError(prefix + "config: " + problem.text);
  if (source->second.from_override)
    return ConfigError(prefix + "config: " + problem.text + " (set by " + source->second.where + ")");
  return ConfigError(source->second.where + ": config: " + problem.text);
}

void set_key(Config& config, Sources& sources, const std::string& name, const Value& value, Source source) {
  key_named(name).set(config, value);
  sources[name] = std::move(source);
}

void read_yaml(const std::string& text, const std::string& origin, Config& config, Sources& sources) {
  YAML::Node root;
  try {
    root = YAML::Load(text);
  } catch (const YAML::Exception& e) {
    const std::string column = e.mark.is_null() ? "" : ":" + std::to_string(e.mark.column + 1);
    throw ConfigError(where_in(origin, e.mark) + column + ": config: YAML syntax error: " + e.msg + "; fix the file");
  }
  if (root.IsNull()) return;  // empty document: defaults
  if (!root.IsMap())
    throw ConfigError(where_in(origin, root.Mark()) + ": config: the top level must be a mapping of sections (" +
                      join({kSections.begin(), kSections.end()}, ", ") + "), not a " + node_kind(root));

  // Parses one `name: value` entry; `name` is a full "section.key".
  const auto read_entry = [&](const std::string& name, const YAML::Node& value, const YAML::Mark& mark) {
    const std::string where = where_in(origin, mark);
    try {
      const KeySpec* k = find_key(name);
      if (!k) throw Problem{name, unknown_key_text(name)};
      set_key(config, sources, name, parse_node(*k, value), Source{false, where});
    } catch (const Problem& p) {
      throw ConfigError(where + ": config: " + p.text);
    }
  };
  const auto scalar_name = [&](const YAML::Node& node) {
    if (!node.IsScalar())
      throw ConfigError(where_in(origin, node.Mark()) + ": config: a key must be a plain name, not a " +
                        node_kind(node));
    return node.Scalar();
  };

  for (const auto& section_entry : root) {
    const std::string section = scalar_name(section_entry.first);
    const YAML::Node& body = section_entry.second;
    const YAML::Mark mark = section_entry.first.Mark();
    if (section == "world_size")
      throw ConfigError(where_in(origin, mark) +
                        ": config: world_size comes from the launcher (WORLD_SIZE, dtlab launch -n), not the "
                        "config file; remove it");
    if (!is_section(section)) {
      // An unknown section: name its first key, so the suggestion can be a full key ("trian.lr" -> "train.lr").
      if (body.IsMap() && body.size() > 0 && body.begin()->first.IsScalar())
        throw ConfigError(where_in(origin, mark) +
                          ": config: " + unknown_key_text(section + "." + body.begin()->first.Scalar()));
      read_entry(section, body, mark);  // a dotted key at top level ("train.lr: 1e-3") or an error
      continue;
    }
    if (body.IsNull()) continue;  // "train:" with nothing under it
    if (!body.IsMap())
      throw ConfigError(where_in(origin, mark) + ": config: section '" + section +
                        "' must be a mapping of keys (e.g. " + section + ": {" + first_leaf_of(section) +
                        ": ...}), not a " + node_kind(body));
    for (const auto& entry : body)
      read_entry(section + "." + scalar_name(entry.first), entry.second, entry.first.Mark());
  }
}

std::string trim(std::string_view s) {
  const auto first = s.find_first_not_of(" \t\r\n");
  if (first == std::string_view::npos) return "";
  return std::string(s.substr(first, s.find_last_not_of(" \t\r\n") - first + 1));
}

void apply_override(const std::string& override_text, Config& config, Sources& sources) {
  const auto error = [&](const std::string& text) {
    return ConfigError("config: override '" + override_text + "': " + text);
  };
  const auto equals = override_text.find('=');
  if (equals == std::string::npos)
    throw error("expected section.key=value (e.g. train.lr=1e-3, model.preset=small); there is no '='");
  const std::string name = trim(std::string_view(override_text).substr(0, equals));
  const std::string value_text = trim(std::string_view(override_text).substr(equals + 1));
  if (name.empty()) throw error("the key before '=' is empty; expected section.key=value (e.g. train.steps=50)");
  const KeySpec* k = find_key(name);
  if (!k) throw error(unknown_key_text(name));
  YAML::Node node;
  try {
    node = YAML::Load(value_text);
  } catch (const YAML::Exception& e) {
    throw error(name + "=" + value_text + " is not a valid YAML scalar (" + e.msg + "); quote it: " + name + "='...'");
  }
  try {
    set_key(config, sources, name, parse_node(*k, node), Source{true, "override '" + override_text + "'"});
  } catch (const Problem& p) {
    throw error(p.text);
  }
}

// ---- resolving and validating -------------------------------------------------------------------------

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

// The preset fills every shape key that was not set explicitly, whatever the order of file and overrides.
void resolve_preset(Config& config, const Sources& sources) {
  check_key(key_named("model.preset"), config);  // an unknown preset lists the known ones
  Config preset;
  apply_model_preset(config.model.preset, preset.model);
  for (const std::string& name : kPresetKeys)
    if (!sources.contains(name)) key_named(name).set(config, key_named(name).get(preset));
}

std::optional<int64_t> checked_product(int64_t a, int64_t b) {
  int64_t product = 0;
  if (__builtin_mul_overflow(a, b, &product)) return std::nullopt;
  return product;
}

std::string show(const std::optional<int64_t>& x) { return x ? std::to_string(*x) : "(overflows int64)"; }

// accumulation = global_batch / (micro_batch * data-parallel size) when the division is exact; otherwise the batch
// rule in check_cross_rules() reports it. The data-parallel size is the strategy's (strategies/catalog.hpp): the
// world for every strategy today, world / (tp * pp) for model-parallel ones.
void derive_accumulation(Config& config) {
  TrainConfig& t = config.train;
  const int64_t dp = data_parallel_size(config);
  if (t.accumulation != 0 || t.micro_batch < 1 || dp < 1 || t.global_batch < 1) return;
  const auto per_micro_step = checked_product(t.micro_batch, dp);
  if (per_micro_step && t.global_batch % *per_micro_step == 0) t.accumulation = t.global_batch / *per_micro_step;
}

std::string divisors_hint(int64_t n) {
  if (n > 4096) return "";
  std::vector<std::string> divisors;
  for (int64_t d = 1; d <= n; ++d)
    if (n % d == 0) divisors.push_back(std::to_string(d));
  return "; choose one of " + join(divisors, ", ");
}

// Rules relating two or more keys. REQUIRES: every single-key rule holds (no zero divisors).
void check_cross_rules(const Config& c) {
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

  // Ranks that see different data: the world, or world / (tp * pp) for a model-parallel strategy.
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
  if (p.shard_size > 0 && c.world_size % p.shard_size != 0)
    throw Problem{"parallel.shard_size",
                  "parallel.shard_size=" + n(p.shard_size) + " does not divide world_size=" + n(c.world_size) +
                      "; choose a divisor of " + n(c.world_size) + ", or 0 for one group of all ranks"};

  const PrecisionConfig& x = c.precision;
  if (x.loss_scale == "dynamic" && x.param_dtype != "fp16")
    throw Problem{"precision.loss_scale", "precision.loss_scale=dynamic requires precision.param_dtype=fp16 (it is " +
                                              x.param_dtype +
                                              "); fp32 and bf16 have fp32's exponent range and "
                                              "need no loss scaling: set precision.loss_scale=none"};
}

void check_rules(const Config& config) {
  if (config.world_size < 1)
    throw Problem{
        "", "world_size=" + std::to_string(config.world_size) + " must be >= 1 (ranks in the job, from the launcher)"};
  for (const KeySpec& k : key_table()) check_key(k, config);
  check_cross_rules(config);
}

// Preset, derived accumulation, validation: the common tail of every loader.
Config finish(Config config, const Sources& sources, const std::string& origin) {
  try {
    resolve_preset(config, sources);
    derive_accumulation(config);
    check_rules(config);
  } catch (const Problem& p) {
    throw located(p, sources, origin);
  }
  return config;
}

// ---- JSON --------------------------------------------------------------------------------------------

Value json_value(const KeySpec& k, const nlohmann::json& v) {
  switch (k.type) {
    case KeyType::boolean:
      if (v.is_boolean()) return v.get<bool>();
      break;
    case KeyType::integer:
      if (v.is_number_integer() && !(v.is_number_unsigned() && v.get<uint64_t>() > INT64_MAX)) return v.get<int64_t>();
      break;
    case KeyType::number:
      if (v.is_number() && std::isfinite(v.get<double>())) return v.get<double>();
      break;
    case KeyType::text:
      if (v.is_string()) return v.get<std::string>();
      if (v.is_null()) return std::string();
      break;
  }
  wrong_type(k, v.dump());
}

}  // namespace

std::vector<std::string> config_keys() {
  std::vector<std::string> keys;
  for (const KeySpec& k : key_table()) keys.push_back(k.name);
  return keys;
}

Config load_config_text(const std::string& yaml_text, const std::vector<std::string>& overrides, int64_t world_size,
                        const std::string& origin) {
  Config config;
  config.world_size = world_size;
  Sources sources;
  read_yaml(yaml_text, origin, config, sources);
  for (const std::string& override_text : overrides) apply_override(override_text, config, sources);
  return finish(std::move(config), sources, origin);
}

Config load_config(const std::string& path, const std::vector<std::string>& overrides, int64_t world_size) {
  if (path.empty()) return load_config_text("", overrides, world_size, "");
  namespace fs = std::filesystem;
  std::error_code ec;
  const auto cannot_read = [&](const std::string& why) {
    const fs::path cwd = fs::current_path(ec);
    return ConfigError("config: cannot read config file '" + path + "': " + why + " (working directory " +
                       cwd.string() + "); check the --config path");
  };
  if (!fs::exists(path, ec)) throw cannot_read("it does not exist");
  if (fs::is_directory(path, ec)) throw cannot_read("it is a directory, not a YAML file");
  std::ifstream in(path, std::ios::binary);
  if (!in) throw cannot_read(std::strerror(errno));
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) throw cannot_read(std::strerror(errno));
  return load_config_text(text.str(), overrides, world_size, path);
}

void validate(const Config& config) {
  try {
    check_rules(config);
  } catch (const Problem& p) {
    throw ConfigError("config: " + p.text);
  }
}

nlohmann::json to_json(const Config& config) {
  nlohmann::json j = nlohmann::json::object();
  for (const KeySpec& k : key_table())
    std::visit([&](const auto& value) { j[k.section()][k.leaf()] = value; }, k.get(config));
  j["world_size"] = config.world_size;
  return j;
}

Config from_json(const nlohmann::json& j, int64_t world_size) {
  const std::string origin = "<json>";
  const auto error = [&](const std::string& text) { return ConfigError(origin + ": config: " + text); };
  Config config;
  config.world_size = world_size;
  Sources sources;
  if (!j.is_object()) throw error("expected an object of sections, got " + std::string(j.type_name()));
  for (const auto& [section, body] : j.items()) {
    if (section == "world_size") {  // recorded for readers; the argument is authoritative
      if (!body.is_number_integer())
        throw error("world_size=" + body.dump() + " has the wrong type: expected an integer");
      continue;
    }
    if (!is_section(section)) {
      if (body.is_object() && !body.empty()) throw error(unknown_key_text(section + "." + body.begin().key()));
      throw error(unknown_key_text(section));
    }
    if (!body.is_object())
      throw error("section '" + section + "' must be an object, got " + std::string(body.type_name()));
    for (const auto& [leaf, value] : body.items()) {
      const std::string name = section + "." + leaf;
      const KeySpec* k = find_key(name);
      if (!k) throw error(unknown_key_text(name));
      try {
        set_key(config, sources, name, json_value(*k, value), Source{false, origin});
      } catch (const Problem& p) {
        throw error(p.text);
      }
    }
  }
  return finish(std::move(config), sources, origin);
}

std::string format_table(const Config& config) {
  struct Row {
    std::string marker, key, value, default_value;
  };
  const Config defaults;
  std::vector<Row> rows;
  for (const KeySpec& k : key_table()) {
    const Value value = k.get(config), default_value = k.get(defaults);
    rows.push_back({value == default_value ? " " : "*", k.name, format_value(value), format_value(default_value)});
  }
  size_t key_width = 3, value_width = 5;
  for (const Row& r : rows) {
    key_width = std::max(key_width, r.key.size());
    value_width = std::max(value_width, r.value.size());
  }
  const auto pad = [](const std::string& s, size_t width) { return s + std::string(width - s.size(), ' '); };
  const std::string rule_line =
      "--" + std::string(key_width, '-') + "-+-" + std::string(value_width, '-') + "-+-" + std::string(7, '-') + "\n";
  std::string out = "  " + pad("key", key_width) + " | " + pad("value", value_width) + " | default\n";
  std::string previous_section;
  for (size_t i = 0; i < rows.size(); ++i) {
    const std::string section = key_table()[i].section();
    if (section != previous_section) out += rule_line;  // sections are separated by a rule
    previous_section = section;
    out += rows[i].marker + " " + pad(rows[i].key, key_width) + " | " + pad(rows[i].value, value_width) + " | " +
           rows[i].default_value + "\n";
  }
  out +=
      rule_line + "  world_size = " + std::to_string(config.world_size) + " (from the launcher); * = not the default\n";
  return out;
}

}  // namespace dtlab
