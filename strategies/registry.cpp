// registry.cpp: the table of strategies (id -> factory).
#include "strategies/registry.hpp"

#include <functional>
#include <stdexcept>
#include <utility>

namespace dtlab {

std::unique_ptr<Strategy> make_single_strategy();
std::unique_ptr<Strategy> make_ddp_strategy();
std::unique_ptr<Strategy> make_fsdp_full_shard_strategy();
std::unique_ptr<Strategy> make_fsdp_shard_grad_op_strategy();
std::unique_ptr<Strategy> make_fsdp_no_shard_strategy();
std::unique_ptr<Strategy> make_fsdp_hybrid_strategy();
std::unique_ptr<Strategy> make_zero1_strategy();

namespace {
using Factory = std::unique_ptr<Strategy> (*)();
const std::vector<std::pair<std::string, Factory>>& registry() {
  static const std::vector<std::pair<std::string, Factory>> table = {
      {"single", &make_single_strategy},
      {"ddp", &make_ddp_strategy},
      {"fsdp_full_shard", &make_fsdp_full_shard_strategy},
      {"fsdp_shard_grad_op", &make_fsdp_shard_grad_op_strategy},
      {"fsdp_no_shard", &make_fsdp_no_shard_strategy},
      {"fsdp_hybrid", &make_fsdp_hybrid_strategy},
      {"zero1", &make_zero1_strategy},
  };
  return table;
}
}  // namespace

std::unique_ptr<Strategy> make_strategy(const std::string& id) {
  for (const auto& [name, factory] : registry())
    if (name == id) return factory();
  std::string known;
  for (const auto& [name, factory] : registry()) known += (known.empty() ? "" : " | ") + name;
  throw std::invalid_argument("parallel.strategy='" + id + "' is not available in this build (available: " + known +
                              ")");
}

std::vector<std::string> registered_strategy_ids() {
  std::vector<std::string> ids;
  for (const auto& entry : registry()) ids.push_back(entry.first);
  return ids;
}

}  // namespace dtlab
