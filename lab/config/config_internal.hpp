// config_internal.hpp: what the parts of the config layer (lab/config/*.cpp) share; the public API is lab/config.hpp.
//
//   config_keys.cpp   values, single-key rules and the key table (adding a key = one field + one row there)
//   suggest.cpp       "did you mean" for unknown keys, sections and closed-set values
//   config_load.cpp   YAML files, `section.key=value` overrides, presets, where each key was set
//   config_rules.cpp  validation: each key's rule, the rules relating keys, the derived train.accumulation
//   config_json.cpp   the config as JSON (results) and as the printed key table
//
// Error format (tests and docs rely on it):
//   config: <key>=<value> <broken rule>; <way out>           validation, programmatic or defaults
//   <file>:<line>: config: ...                                the offending key was set in <file>
//   <file>: config: ... (set by override 'train.lr=-1')       the offending key came from an override
//   config: override '<text>': ...                            an override that cannot be parsed
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "lab/config.hpp"

namespace dtlab::config_internal {

// ---- values and rules (config_keys.cpp) ----

using Value = std::variant<bool, int64_t, double, std::string>;
enum class KeyType { boolean, integer, number, text };  // same order as Value's alternatives

const char* describe_type(KeyType type);  // "an integer", "a boolean (true | false)", ...

// Shortest text that reads back as the same double, in fixed notation unless scientific is clearly
// shorter: 0.0003, 25, 1e-08, 1e+20.
std::string format_number(double x);
std::string format_value(const Value& value);  // as a user would write it; "" is shown as ""
std::string join(const std::vector<std::string>& items, std::string_view separator);

// The rule of a single key: a numeric interval, a closed set of strings, or nothing.
struct Rule {
  std::optional<double> low, high;
  bool low_open = false, high_open = false;
  std::vector<std::string> allowed;
  // The closed set is the strategies' ids, handed in at validation (StrategyChoices::ids): parallel.strategy.
  bool strategy_ids = false;

  bool admits(const Value& value) const;
  std::string describe() const;  // "> 0", ">= 1", "in [0, 1)", "one of adamw | sgd"
};

// ---- the key table (config_keys.cpp) ----

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

inline const std::array<std::string, 8> kSections = {"model",     "data",       "train",  "parallel",
                                                     "precision", "instrument", "memory", "checkpoint"};

const std::vector<KeySpec>& key_table();
const KeySpec* find_key(std::string_view name);   // nullptr if no such key
const KeySpec& key_named(std::string_view name);  // REQUIRES: a table key
bool is_section(std::string_view name);
std::string first_leaf_of(std::string_view section);

// ---- suggestions (suggest.cpp) ----

// The closest candidate if it is close enough to be a plausible typo.
std::optional<std::string> closest(std::string_view name, std::span<const std::string> candidates);
// "unknown key 'train.lrr'; did you mean 'train.lr'?" and variants for sections and bare keys.
std::string unknown_key_text(const std::string& name);

// ---- parsing and loading (config_load.cpp) ----

// A broken rule or unparsable value, before we know where it came from. `text` has no "config: " prefix.
struct Problem {
  std::string key;  // the key it is about ("" if none): finds the file line or override that set it
  std::string text;
};

// Throws the Problem "<key>=<value> has the wrong type: expected <type><detail> (e.g. <key>=<default>)".
[[noreturn]] void wrong_type(const KeySpec& k, const std::string& shown_value, const std::string& detail = "");

// Where an explicitly set key came from, for error messages. Presence here = "set explicitly".
struct Source {
  bool from_override = false;
  std::string where;  // "run.yaml:7" or "override 'train.lr=1'"
};
using Sources = std::map<std::string, Source, std::less<>>;

void set_key(Config& config, Sources& sources, const std::string& name, const Value& value, Source source);

// Preset, derived accumulation, validation: the common tail of every loader. Throws ConfigError located by
// `sources` (see the format above).
Config finish(Config config, const Sources& sources, const std::string& origin, const StrategyChoices& strategies);

// ---- validation (config_rules.cpp) ----

void check_key(const KeySpec& k, const Config& config);  // throws Problem if the key's own rule fails
void derive_accumulation(Config& config);                // fills train.accumulation = 0 where it divides exactly
void check_rules(const Config& config, const StrategyChoices& strategies);  // every rule; throws Problem
// parallel.pp > 1 (config_pipeline_rules.cpp): the schedule, the split and what a pipeline run cannot do yet; the
// pipeline keys left at their defaults with parallel.pp = 1. REQUIRES the batch rules hold (accumulation derived).
void check_pipeline_rules(const Config& config, const StrategyChoices& strategies);
// memory.limit's bytes (0 for none), or nullopt when `text` is neither none nor a size with a binary unit.
std::optional<int64_t> memory_limit_of(const std::string& text);
std::string memory_limit_refusal(const std::string& text);  // the error for such a text

}  // namespace dtlab::config_internal
