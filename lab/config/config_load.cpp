// config_load.cpp: loading a config — YAML text or file, `section.key=value` overrides, the model preset, and where
// each key was set, so that an error names the file line or the override that caused it.
#include <cerrno>
#include <charconv>  // locale-free number parsing (from_chars)
#include <cmath>
#include <cstring>  // std::strerror
#include <filesystem>
#include <fstream>
#include <sstream>

#include <yaml-cpp/yaml.h>

#include "lab/config/config_internal.hpp"
#include "lab/model_shape.hpp"

namespace dtlab {
namespace config_internal {
namespace {

// Shape keys a preset sets; one set explicitly (file, override, JSON) keeps its value.
const std::array<std::string, 9> kPresetKeys = {"model.d_model",    "model.n_layers",       "model.n_heads",
                                                "model.n_kv_heads", "model.ffn_hidden",     "model.vocab_size",
                                                "model.seq_len",    "model.tie_embeddings", "model.trainable"};

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

std::string where_in(const std::string& origin, const YAML::Mark& mark) {
  const std::string name = origin.empty() ? "<text>" : origin;
  return mark.is_null() ? name : name + ":" + std::to_string(mark.line + 1);
}

// Turns a Problem found after parsing into the final message (the format is in config_internal.hpp).
ConfigError located(const Problem& problem, const Sources& sources, const std::string& origin) {
  const std::string prefix = origin.empty() ? "" : origin + ": ";
  const auto source = sources.find(problem.key);
  if (source == sources.end()) return ConfigError(prefix + "config: " + problem.text);
  if (source->second.from_override)
    return ConfigError(prefix + "config: " + problem.text + " (set by " + source->second.where + ")");
  return ConfigError(source->second.where + ": config: " + problem.text);
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

// The preset fills every shape key that was not set explicitly, whatever the order of file and overrides.
void resolve_preset(Config& config, const Sources& sources) {
  check_key(key_named("model.preset"), config);  // an unknown preset lists the known ones
  Config preset;
  apply_model_preset(config.model.preset, preset.model);
  for (const std::string& name : kPresetKeys)
    if (!sources.contains(name)) key_named(name).set(config, key_named(name).get(preset));
}

}  // namespace

[[noreturn]] void wrong_type(const KeySpec& k, const std::string& shown_value, const std::string& detail) {
  throw Problem{k.name, k.name + "=" + shown_value + " has the wrong type: expected " + describe_type(k.type) + detail +
                            " (e.g. " + k.name + "=" + format_value(k.get(Config{})) + ")"};
}

void set_key(Config& config, Sources& sources, const std::string& name, const Value& value, Source source) {
  key_named(name).set(config, value);
  sources[name] = std::move(source);
}

// Preset, derived accumulation, validation: the common tail of every loader.
Config finish(Config config, const Sources& sources, const std::string& origin, const StrategyChoices& strategies) {
  try {
    resolve_preset(config, sources);
    derive_accumulation(config);
    check_rules(config, strategies);
  } catch (const Problem& p) {
    throw located(p, sources, origin);
  }
  return config;
}

}  // namespace config_internal

using namespace config_internal;  // this file is part of the config layer

Config load_config_text(const std::string& yaml_text, const std::vector<std::string>& overrides, int64_t world_size,
                        const StrategyChoices& strategies, const std::string& origin) {
  Config config;
  config.world_size = world_size;
  Sources sources;
  read_yaml(yaml_text, origin, config, sources);
  for (const std::string& override_text : overrides) apply_override(override_text, config, sources);
  return finish(std::move(config), sources, origin, strategies);
}

Config load_config(const std::string& path, const std::vector<std::string>& overrides, int64_t world_size,
                   const StrategyChoices& strategies) {
  if (path.empty()) return load_config_text("", overrides, world_size, strategies, "");
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
  return load_config_text(text.str(), overrides, world_size, strategies, path);
}

}  // namespace dtlab
