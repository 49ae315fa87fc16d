// catalog.hpp: the strategies this program was linked with, by id (torch-free).
//
// strategies/catalog.cpp expands strategies/catalog.def into the table. A test program may link a catalogue
// with more lines (tests/strategy/toy/: catalog.cpp compiled with DTLAB_CATALOG_EXTRA naming a second .def,
// as an object library, so its definitions come before the archive's and the archive's copy is never pulled).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "lab/config.hpp"
#include "lab/mesh.hpp"
#include "strategies/spec.hpp"

namespace dtlab {

// The single-process strategy every other one is compared with (parity tests, calibration's training step). The
// config's default (lab/config.hpp ParallelConfig::strategy) names the same id.
inline constexpr std::string_view kReferenceStrategy = "single";

// The strategy every other one is set against in the report's summary (time, peak memory and bytes as multiples of
// its): plain replicated data parallelism, the one users start from. result.json records it (context.baseline).
inline constexpr std::string_view kComparisonBaseline = "ddp";

// In catalogue order.
const std::vector<const StrategySpec*>& strategy_specs();
std::vector<std::string> strategy_ids();
// Throws std::invalid_argument "parallel.strategy='<id>' is not available in this build (available: a | b)".
const StrategySpec& strategy_spec(std::string_view id);
// nullptr when no strategy of this build has that id.
const StrategySpec* find_strategy_spec(std::string_view id);
// What config validation needs of this catalogue: the ids, and those whose spec says runs_under_pipeline.
StrategyChoices strategy_choices();

// lab/config.hpp's entry points with this catalogue handed in (the config floor below knows no strategy): what the
// programs and tests call. Same arguments, errors and behaviour as there.
Config load_config(const std::string& path, const std::vector<std::string>& overrides, int64_t world_size);
Config load_config_text(const std::string& yaml_text, const std::vector<std::string>& overrides, int64_t world_size,
                        const std::string& origin = "<text>");
void validate(const Config& config);
Config from_json(const nlohmann::json& j, int64_t world_size);

// The degrees of the job's mesh: the config's model-parallel ones (parallel.pp, cp, tp, ep) and the data-parallel
// ranks split by the strategy into dp_replicate x dp_shard (spec.dp_shard_size; an unknown strategy replicates).
ParallelDims parallel_dims(const Config& config);
// The mesh of config.world_size ranks. Throws MeshError naming the degrees and the rule they break.
DeviceMesh device_mesh(const Config& config);

}  // namespace dtlab
