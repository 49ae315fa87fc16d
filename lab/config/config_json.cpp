// config_json.cpp: the config outside the program — as nested JSON (result.json, read back by from_json) and as the
// printed "key | value | default" table.
#include <algorithm>
#include <cmath>

#include <nlohmann/json.hpp>

#include "lab/config/config_internal.hpp"

namespace dtlab {
namespace config_internal {
namespace {

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
}  // namespace config_internal

using namespace config_internal;  // this file is part of the config layer

nlohmann::json to_json(const Config& config) {
  nlohmann::json j = nlohmann::json::object();
  for (const KeySpec& k : key_table())
    std::visit([&](const auto& value) { j[k.section()][k.leaf()] = value; }, k.get(config));
  j["world_size"] = config.world_size;
  return j;
}

Config from_json(const nlohmann::json& j, int64_t world_size, const StrategyChoices& strategies) {
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
  return finish(std::move(config), sources, origin, strategies);
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
