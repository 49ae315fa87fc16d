// registry.hpp: strategies by id, from the catalogue (strategies/catalog.def; docs/architecture.md "Adding a
// strategy": its file pair + one line in catalog.def).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "lab/train/strategy.hpp"

namespace dtlab {

// Throws std::invalid_argument naming parallel.strategy and the known ids.
std::unique_ptr<Strategy> make_strategy(const std::string& id);
std::vector<std::string> registered_strategy_ids();

}  // namespace dtlab
