// comm_model.cpp: α-β-γ cost of one collective per op and algorithm, and its JSON form (see comm_model.hpp).
#include "analysis/cost/comm_model.hpp"

#include <cmath>

namespace dtlab::analysis {

namespace {

int ceil_log2(int p) {
  int steps = 0;
  while ((1 << steps) < p) ++steps;
  return steps;
}

std::string key_of(const std::string& op, const std::string& algorithm) { return op + "/" + algorithm; }

double coefficient(const nlohmann::json& entry, const std::string& source, const std::string& key, const char* name) {
  const std::string where = source + ": ops." + key + "." + name;
  if (!entry.contains(name))
    throw std::invalid_argument(where +
                                ": missing (every op needs alpha_us, "
                                "beta_us_per_byte and gamma_us_per_byte)");
  if (!entry[name].is_number()) throw std::invalid_argument(where + ": must be a number, got " + entry[name].dump());
  const double value = entry[name].get<double>();
  if (!std::isfinite(value) || value < 0)
    throw std::invalid_argument(where + ": must be finite and >= 0, got " + entry[name].dump());
  return value;
}

}  // namespace

nlohmann::json CommModel::to_json() const {
  nlohmann::json out_ops = nlohmann::json::object();
  for (const auto& [key, cost] : ops) {
    out_ops[key] = {{"alpha_us", cost.alpha_us},
                    {"beta_us_per_byte", cost.beta_us_per_byte},
                    {"gamma_us_per_byte", cost.gamma_us_per_byte}};
    if (cost.large_from_bytes > 0)
      out_ops[key]["large"] = {{"from_bytes", cost.large_from_bytes},
                               {"alpha_us", cost.large_alpha_us},
                               {"beta_us_per_byte", cost.large_beta_us_per_byte},
                               {"gamma_us_per_byte", cost.large_gamma_us_per_byte}};
  }
  nlohmann::json out = {{"backend", backend}, {"ops", out_ops}};
  if (overlap_hidden) {
    out["overlap_hidden"] = *overlap_hidden;
    out["overlap_bytes"] = overlap_bytes;
    out["overlap_ranks"] = overlap_ranks;
  }
  return out;
}

CommModel CommModel::from_json(const nlohmann::json& j, const std::string& source) {
  if (!j.is_object()) throw std::invalid_argument(source + ": a comm model must be a JSON object, got " + j.dump());
  if (!j.contains("backend") || !j["backend"].is_string())
    throw std::invalid_argument(source + ": backend: missing or not a string (gloo | nccl)");
  if (!j.contains("ops") || !j["ops"].is_object())
    throw std::invalid_argument(source + ": ops: missing or not an object of \"<op>/<algorithm>\" entries");
  CommModel m;
  m.backend = j["backend"].get<std::string>();
  for (const auto& [key, entry] : j["ops"].items()) {
    const auto slash = key.find('/');
    if (slash == std::string::npos || slash == 0 || slash + 1 == key.size())
      throw std::invalid_argument(source + ": ops." + key +
                                  ": key must be \"<op>/<algorithm>\", e.g. all_reduce/backend");
    cost_shape(key.substr(0, slash), key.substr(slash + 1), 0, 2);  // rejects unknown pairs, naming them
    if (!entry.is_object()) throw std::invalid_argument(source + ": ops." + key + ": must be an object");
    CollectiveCost c;
    c.alpha_us = coefficient(entry, source, key, "alpha_us");
    c.beta_us_per_byte = coefficient(entry, source, key, "beta_us_per_byte");
    c.gamma_us_per_byte = coefficient(entry, source, key, "gamma_us_per_byte");
    if (entry.contains("large")) {
      const nlohmann::json& large = entry["large"];
      const std::string large_key = key + ".large";
      if (!large.is_object() || !large.contains("from_bytes") || !large["from_bytes"].is_number_integer() ||
          large["from_bytes"].get<int64_t>() <= 0)
        throw std::invalid_argument(source + ": ops." + large_key +
                                    ".from_bytes: missing or not a whole number > 0 (the size the regime starts at)");
      c.large_from_bytes = large["from_bytes"].get<int64_t>();
      c.large_alpha_us = coefficient(large, source, large_key, "alpha_us");
      c.large_beta_us_per_byte = coefficient(large, source, large_key, "beta_us_per_byte");
      c.large_gamma_us_per_byte = coefficient(large, source, large_key, "gamma_us_per_byte");
    }
    m.ops[key] = c;
  }
  if (j.contains("overlap_hidden")) {
    const nlohmann::json& hidden = j["overlap_hidden"];
    if (!hidden.is_number() || !(hidden.get<double>() >= -1 && hidden.get<double>() <= 1))
      throw std::invalid_argument(source +
                                  ": overlap_hidden: must be a number in [-1, 1] (the fraction of a "
                                  "collective that compute at once hides; below 0 when overlapping costs more than "
                                  "taking turns), got " +
                                  hidden.dump());
    m.overlap_hidden = hidden.get<double>();
  }
  // The call overlap_hidden was measured at: each key a whole number of at least `least`.
  const auto read_call = [&](const char* key, int64_t least) -> std::optional<int64_t> {
    if (!j.contains(key)) return std::nullopt;
    if (!m.overlap_hidden)
      throw std::invalid_argument(source + ": " + key + " without overlap_hidden: it names the call that fraction " +
                                  "was measured at");
    if (!j[key].is_number_integer() || j[key].get<int64_t>() < least)
      throw std::invalid_argument(source + ": " + key + ": must be a whole number >= " + std::to_string(least) +
                                  ", got " + j[key].dump());
    return j[key].get<int64_t>();
  };
  if (const auto bytes = read_call("overlap_bytes", 1)) m.overlap_bytes = *bytes;
  if (const auto ranks = read_call("overlap_ranks", 2)) m.overlap_ranks = static_cast<int>(*ranks);
  return m;
}

CostShape cost_shape(const std::string& op, const std::string& algorithm, int64_t bytes, int group_size) {
  if (bytes < 0) throw std::invalid_argument("comm model: " + key_of(op, algorithm) + " with bytes < 0");
  if (group_size < 1) throw std::invalid_argument("comm model: " + key_of(op, algorithm) + " with group_size < 1");
  const bool backend = algorithm == "backend", ring = algorithm == "ring";
  if (!backend && !ring)
    throw std::invalid_argument("comm model: algorithm '" + algorithm + "' of " + op + " is not one of backend | ring");
  const double p = group_size, s = static_cast<double>(bytes), steps = p - 1, share = (p - 1) / p;
  // An all-reduce shape: a reduce-scatter pass (reducing) and an all-gather pass.
  const CostShape all_reduce_shape{2 * steps, 2 * share * s, share * s};
  if (op == "all_reduce") return all_reduce_shape;
  if (op == "reduce_scatter") return ring ? CostShape{steps, share * s, share * s} : all_reduce_shape;
  if (op == "all_gather") return {steps, share * s, 0};
  if (op == "broadcast" && backend) {
    const double levels = ceil_log2(group_size);
    return {levels, levels * s, 0};
  }
  if (op == "send_recv" && backend) return group_size == 1 ? CostShape{} : CostShape{1, s, 0};
  // Pairwise exchange: p - 1 steps, each sending one of the p parts of s (the rank's own part stays).
  if (op == "all_to_all" && backend) return {steps, share * s, 0};
  throw std::invalid_argument("comm model: no cost formula for " + key_of(op, algorithm) +
                              " (known: all_reduce, all_gather, reduce_scatter with backend | ring; broadcast, "
                              "send_recv and all_to_all with backend)");
}

double collective_time_us(const CommModel& m, const std::string& op, const std::string& algorithm, int64_t bytes,
                          int group_size, double link_sharing) {
  const CostShape shape = cost_shape(op, algorithm, bytes, group_size);
  const auto it = m.ops.find(key_of(op, algorithm));
  if (it == m.ops.end()) {
    std::string known;
    for (const auto& [key, cost] : m.ops) known += (known.empty() ? "" : ", ") + key;
    throw std::invalid_argument("comm model (" + m.backend + "): no coefficients for " + key_of(op, algorithm) +
                                " (the model has: " + (known.empty() ? "none" : known) +
                                "); calibrate with `dtlab comm-bench --op " + op + " --algorithm " + algorithm + "`");
  }
  const CollectiveCost& c = it->second;
  if (c.large_from_bytes > 0 && bytes >= c.large_from_bytes)
    return shape.alpha * c.large_alpha_us + link_sharing * shape.beta * c.large_beta_us_per_byte +
           shape.gamma * c.large_gamma_us_per_byte;
  return shape.alpha * c.alpha_us + link_sharing * shape.beta * c.beta_us_per_byte + shape.gamma * c.gamma_us_per_byte;
}

CommModel comm_model_from_document(const nlohmann::json& doc, const std::string& source) {
  if (doc.is_object() && doc.contains("ops")) return CommModel::from_json(doc, source);
  if (doc.is_object() && doc.contains("comm") && doc["comm"].is_object() && doc["comm"].contains("intra_node"))
    return CommModel::from_json(doc["comm"]["intra_node"], source + " (comm.intra_node)");
  throw std::invalid_argument(source +
                              ": neither a comm model ({\"backend\", \"ops\"}) nor a machine profile with "
                              "comm.intra_node");
}

}  // namespace dtlab::analysis
