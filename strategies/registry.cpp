// registry.cpp: the LibTorch factories of the catalogue (strategies/catalog.def, plus DTLAB_CATALOG_EXTRA when a
// test catalogue defines it), by id.
#include "strategies/registry.hpp"

#include <stdexcept>
#include <utility>

#include "strategies/catalog.hpp"

namespace dtlab {

#define DTLAB_STRATEGY(id) std::unique_ptr<Strategy> make_##id##_strategy();
#include "strategies/catalog.def"
#ifdef DTLAB_CATALOG_EXTRA
#include DTLAB_CATALOG_EXTRA
#endif
#undef DTLAB_STRATEGY

namespace {
using Factory = std::unique_ptr<Strategy> (*)();
const std::vector<std::pair<std::string, Factory>>& registry() {
  static const std::vector<std::pair<std::string, Factory>> table = {
#define DTLAB_STRATEGY(id) {#id, &make_##id##_strategy},
#include "strategies/catalog.def"
#ifdef DTLAB_CATALOG_EXTRA
#include DTLAB_CATALOG_EXTRA
#endif
#undef DTLAB_STRATEGY
  };
  return table;
}
}  // namespace

std::unique_ptr<Strategy> make_strategy(const std::string& id) {
  for (const auto& [name, factory] : registry())
    if (name == id) return factory();
  strategy_spec(id);  // throws the catalogue's "not available in this build (available: ...)"
  throw std::logic_error("strategy '" + id + "' has a spec but no factory: catalog.cpp and registry.cpp disagree");
}

std::vector<std::string> registered_strategy_ids() {
  std::vector<std::string> ids;
  for (const auto& entry : registry()) ids.push_back(entry.first);
  return ids;
}

}  // namespace dtlab
