// study.cpp: reads a study spec (YAML) into a Study, checking every key (see study.hpp).
#include "scenarios/study.hpp"

#include <algorithm>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include <yaml-cpp/yaml.h>

#include "lab/launch/cluster.hpp"

namespace dtlab {
namespace {

// Reads one spec, remembering its file name for the errors.
class SpecReader {
 public:
  explicit SpecReader(std::filesystem::path file) : file_(std::move(file)) {}

  [[noreturn]] void fail(const YAML::Node& node, const std::string& key, const std::string& rule) const {
    std::string where = file_.string();
    if (node.IsDefined() && node.Mark().line >= 0) {
      where += ':';
      where += std::to_string(node.Mark().line + 1);
    }
    throw StudyError(where + ": study: " + (key.empty() ? "the file" : key) + ": " + rule);
  }

  // The keys of a map, each one of `allowed`.
  void expect_map(const YAML::Node& node, const std::string& key, const std::set<std::string>& allowed) const {
    if (!node.IsMap()) fail(node, key, "must be a map");
    for (const auto& entry : node) {
      const std::string name = entry.first.as<std::string>();
      if (allowed.count(name) == 0) {
        std::string list;
        for (const auto& a : allowed) list += (list.empty() ? "" : ", ") + a;
        fail(entry.first, (key.empty() ? "" : key + ".") + name, "unknown key (known: " + list + ")");
      }
    }
  }

  std::string text(const YAML::Node& node, const std::string& key, bool required) const {
    if (!node) {
      if (required) fail(node, key, "is required");
      return "";
    }
    if (!node.IsScalar()) fail(node, key, "must be a string");
    return node.as<std::string>();
  }

  std::vector<std::string> texts(const YAML::Node& node, const std::string& key) const {
    std::vector<std::string> out;
    if (!node) return out;
    if (!node.IsSequence()) fail(node, key, "must be a list of strings");
    for (size_t i = 0; i < node.size(); ++i) out.push_back(text(node[i], key + "[" + std::to_string(i) + "]", true));
    return out;
  }

  // A list of `section.key=value` overrides.
  std::vector<std::string> overrides(const YAML::Node& node, const std::string& key) const {
    std::vector<std::string> out = texts(node, key);
    for (size_t i = 0; i < out.size(); ++i)
      if (out[i].find('=') == std::string::npos || out[i].find('.') > out[i].find('='))
        fail(node[i], key + "[" + std::to_string(i) + "]", "'" + out[i] + "' is not section.key=value");
    return out;
  }

  bool boolean(const YAML::Node& node, const std::string& key) const {
    if (!node) return false;
    bool value = false;
    if (!node.IsScalar() || !YAML::convert<bool>::decode(node, value)) fail(node, key, "must be true or false");
    return value;
  }

  int world(const YAML::Node& node, const std::string& key) const {
    int value = 0;
    if (!node.IsScalar() || !YAML::convert<int>::decode(node, value) || value < 1)
      fail(node, key, "must be an integer >= 1");
    return value;
  }

  double number(const YAML::Node& node, const std::string& key) const {
    double value = 0;
    if (!node) fail(node, key, "is required");
    if (!node.IsScalar() || !YAML::convert<double>::decode(node, value)) fail(node, key, "must be a number");
    return value;
  }

  const std::filesystem::path& file() const { return file_; }

 private:
  std::filesystem::path file_;
};

// A list naming sweep points (sweep.quick, runs[i].points), each one of `keys`.
std::vector<std::string> point_names(const SpecReader& spec, const YAML::Node& node, const std::string& key,
                                     const std::vector<std::string>& keys) {
  const std::vector<std::string> names = spec.texts(node, key);
  for (size_t i = 0; i < names.size(); ++i)
    if (std::find(keys.begin(), keys.end(), names[i]) == keys.end())
      spec.fail(node[i], key + "[" + std::to_string(i) + "]", "'" + names[i] + "' is not one of the sweep's points");
  return names;
}

std::vector<ScenarioRun> read_runs(const SpecReader& spec, const YAML::Node& root, const std::string& config,
                                   const std::vector<std::string>& quick) {
  int default_world = 1, default_nodes = 1;
  std::string default_intra_link;
  if (const YAML::Node defaults = root["defaults"]) {
    spec.expect_map(defaults, "defaults", {"world", "nodes", "intra_link"});
    if (defaults["world"]) default_world = spec.world(defaults["world"], "defaults.world");
    if (defaults["nodes"]) default_nodes = spec.world(defaults["nodes"], "defaults.nodes");
    default_intra_link = spec.text(defaults["intra_link"], "defaults.intra_link", false);
  }
  // sweep: every run once per point, named <name>@<point>; with --quick only at the `quick` points (default: all).
  // The points are link rates (inter_link: [rates]), steps of a ladder of model sizes or of any other setting
  // (model: / setting: {label: [overrides]}, added after the run's own overrides) or world sizes (world: [sizes],
  // named w<N>; per_world applies at each).
  // `key`: how quick[] and a run's points[] name the point (the rate, the ladder label, the world size).
  struct SweepPoint {
    std::string label, key, inter_link;
    std::vector<std::string> overrides;
    int world = 0;  // > 0: the world size of the point (a world sweep)
  };
  std::vector<SweepPoint> points;
  std::vector<std::string> point_keys, quick_points;
  const YAML::Node sweep = root["sweep"];
  if (sweep) {
    spec.expect_map(sweep, "sweep", {"inter_link", "model", "setting", "world", "quick"});
    int axes = 0;
    for (const char* axis : {"inter_link", "model", "setting", "world"}) axes += sweep[axis] ? 1 : 0;
    if (axes > 1) spec.fail(sweep, "sweep", "sweeps one axis: inter_link, model, setting or world");
    if (sweep["inter_link"]) {
      for (const std::string& rate : spec.texts(sweep["inter_link"], "sweep.inter_link"))
        points.push_back({rate, rate, rate, {}, 0});
      for (size_t i = 0; i < points.size(); ++i) {
        try {
          parse_link_rate(points[i].label, "sweep.inter_link");
        } catch (const std::invalid_argument& e) {
          spec.fail(sweep["inter_link"][i], "sweep.inter_link[" + std::to_string(i) + "]", e.what());
        }
      }
    } else if (sweep["model"] || sweep["setting"]) {
      const std::string axis = sweep["model"] ? "model" : "setting";
      const YAML::Node ladder = sweep[axis];
      const std::string key = "sweep." + axis;
      if (!ladder.IsMap()) spec.fail(ladder, key, "must be a map {<label>: [overrides]}, in ladder order");
      for (const auto& entry : ladder) {
        const std::string label = entry.first.as<std::string>();
        if (label.empty() || label.find_first_of("/@ ") != std::string::npos)
          spec.fail(entry.first, key + "." + label, "a label is part of a directory name: no '/', '@' or space");
        points.push_back({label, label, "", spec.overrides(entry.second, key + "." + label), 0});
      }
    } else if (const YAML::Node worlds = sweep["world"]) {
      if (!worlds.IsSequence()) spec.fail(worlds, "sweep.world", "must be a list of world sizes");
      for (size_t i = 0; i < worlds.size(); ++i) {
        const int world = spec.world(worlds[i], "sweep.world[" + std::to_string(i) + "]");
        points.push_back({"w" + std::to_string(world), std::to_string(world), "", {}, world});
      }
    } else {
      spec.fail(sweep, "sweep",
                "needs inter_link: [rates], model: {label: [overrides]}, setting: {label: [overrides]} or world: "
                "[sizes]");
    }
    if (points.empty()) spec.fail(sweep, "sweep", "must list at least one point");
    for (const SweepPoint& p : points) point_keys.push_back(p.key);
    quick_points = sweep["quick"] ? point_names(spec, sweep["quick"], "sweep.quick", point_keys) : point_keys;
  }
  const bool sweeps_links = sweep && sweep["inter_link"];
  std::map<int, std::vector<std::string>> per_world;
  if (const YAML::Node node = root["per_world"]) {
    if (!node.IsMap()) spec.fail(node, "per_world", "must be a map {<world size>: [overrides]}");
    for (const auto& entry : node) {
      const std::string key = "per_world." + entry.first.as<std::string>();
      per_world[spec.world(entry.first, key)] = spec.overrides(entry.second, key);
    }
  }
  const YAML::Node runs = root["runs"];
  if (!runs || !runs.IsSequence() || runs.size() == 0) spec.fail(runs, "runs", "must be a non-empty list of runs");
  std::vector<ScenarioRun> out;
  std::set<std::string> names;
  for (size_t i = 0; i < runs.size(); ++i) {
    const std::string key = "runs[" + std::to_string(i) + "]";
    const YAML::Node node = runs[i];
    spec.expect_map(node, key,
                    {"name", "overrides", "world", "note", "config", "nodes", "inter_link", "intra_link", "points"});
    ScenarioRun run;
    run.name = spec.text(node["name"], key + ".name", true);
    if (run.name.empty() || run.name.find('/') != std::string::npos)
      spec.fail(node["name"], key + ".name", "must be a non-empty directory name");
    if (!names.insert(run.name).second) spec.fail(node["name"], key + ".name", "'" + run.name + "' is taken");
    run.config = node["config"] ? spec.text(node["config"], key + ".config", true) : config;
    if (run.config.empty()) spec.fail(node, key + ".config", "no config: set `config` for the study or the run");
    run.overrides = spec.overrides(node["overrides"], key + ".overrides");
    run.world_size = node["world"] ? spec.world(node["world"], key + ".world") : default_world;
    const bool sweeps_worlds = sweep && sweep["world"];
    if (node["world"] && sweeps_worlds)
      spec.fail(node["world"], key + ".world", "the sweep sets the world size of every run (sweep.world)");
    const auto add_per_world = [&](ScenarioRun& r) {
      const auto extra = per_world.find(r.world_size);
      if (extra != per_world.end()) r.overrides.insert(r.overrides.end(), extra->second.begin(), extra->second.end());
    };
    if (!sweeps_worlds) add_per_world(run);
    run.quick_overrides = quick;
    run.note = spec.text(node["note"], key + ".note", false);
    run.nodes = node["nodes"] ? spec.world(node["nodes"], key + ".nodes") : default_nodes;
    if (!sweeps_worlds && run.world_size % run.nodes != 0)
      spec.fail(node, key + ".nodes",
                std::to_string(run.nodes) + " nodes must divide the world size " + std::to_string(run.world_size));
    run.inter_link = spec.text(node["inter_link"], key + ".inter_link", false);
    run.intra_link =
        node["intra_link"] ? spec.text(node["intra_link"], key + ".intra_link", false) : default_intra_link;
    if (run.nodes == 1 && (!run.inter_link.empty() || sweeps_links))
      spec.fail(node, key + ".inter_link", "a link rate needs nodes >= 2 (set `nodes` for the run or in defaults)");
    if (node["points"] && points.empty()) spec.fail(node["points"], key + ".points", "the study has no sweep");
    // points: the sweep points this run takes (default: all), e.g. HYBRID's shard group does not fit one rank.
    const std::vector<std::string> run_points =
        node["points"] ? point_names(spec, node["points"], key + ".points", point_keys) : point_keys;
    if (node["points"] && run_points.empty())
      spec.fail(node["points"], key + ".points", "must name at least one of the sweep's points");
    if (points.empty()) {
      out.push_back(std::move(run));
      continue;
    }
    for (const SweepPoint& point : points) {
      if (std::find(run_points.begin(), run_points.end(), point.key) == run_points.end()) continue;
      ScenarioRun swept = run;
      swept.name = run.name + "@" + point.label;
      if (!point.inter_link.empty()) swept.inter_link = point.inter_link;
      if (point.world > 0) {
        swept.world_size = point.world;
        swept.launched = true;
        if (swept.world_size % swept.nodes != 0)
          spec.fail(node, key + ".nodes",
                    std::to_string(swept.nodes) + " nodes must divide the swept world size " + point.key);
        add_per_world(swept);
      }
      swept.overrides.insert(swept.overrides.end(), point.overrides.begin(), point.overrides.end());
      swept.in_quick = std::find(quick_points.begin(), quick_points.end(), point.key) != quick_points.end();
      if (!names.insert(swept.name).second) spec.fail(node["name"], key + ".name", "'" + swept.name + "' is taken");
      out.push_back(std::move(swept));
    }
  }
  return out;
}

std::vector<std::string> run_names(const SpecReader& spec, const YAML::Node& node, const std::string& key,
                                   const std::vector<ScenarioRun>& runs) {
  std::vector<std::string> names = spec.texts(node, key);
  if (names.empty()) spec.fail(node, key, "must name at least one run");
  for (size_t i = 0; i < names.size(); ++i) {
    bool known = false;
    for (const auto& run : runs) known = known || run.name == names[i];
    if (!known) spec.fail(node[i], key + "[" + std::to_string(i) + "]", "'" + names[i] + "' is not a run of the study");
  }
  return names;
}

std::vector<Comparison> read_comparisons(const SpecReader& spec, const YAML::Node& node,
                                         const std::vector<ScenarioRun>& runs) {
  std::vector<Comparison> out;
  if (!node) return out;
  if (!node.IsSequence()) spec.fail(node, "compare", "must be a list of comparisons");
  for (size_t i = 0; i < node.size(); ++i) {
    const std::string key = "compare[" + std::to_string(i) + "]";
    const YAML::Node entry = node[i];
    spec.expect_map(entry, key, {"kind", "why", "target_pct", "output", "groups"});
    Comparison c;
    c.kind = spec.text(entry["kind"], key + ".kind", true);
    if (c.kind != "tracing_overhead") spec.fail(entry["kind"], key + ".kind", "unknown kind (known: tracing_overhead)");
    c.why = spec.text(entry["why"], key + ".why", true);
    c.target_pct = spec.number(entry["target_pct"], key + ".target_pct");
    c.output = spec.text(entry["output"], key + ".output", true);
    if (c.output.empty() || c.output.find('/') != std::string::npos)
      spec.fail(entry["output"], key + ".output", "must be a file name (written under <out>/<study>/)");
    const YAML::Node groups = entry["groups"];
    if (!groups || !groups.IsSequence() || groups.size() == 0)
      spec.fail(groups, key + ".groups", "must be a non-empty list of {label, on, off}");
    for (size_t g = 0; g < groups.size(); ++g) {
      const std::string group_key = key + ".groups[" + std::to_string(g) + "]";
      spec.expect_map(groups[g], group_key, {"label", "on", "off"});
      c.groups.push_back({spec.text(groups[g]["label"], group_key + ".label", true),
                          run_names(spec, groups[g]["on"], group_key + ".on", runs),
                          run_names(spec, groups[g]["off"], group_key + ".off", runs)});
    }
    out.push_back(std::move(c));
  }
  return out;
}

}  // namespace

Study load_study(const std::filesystem::path& file) {
  std::ifstream in(file);
  if (!in) throw StudyError(file.string() + ": study: cannot read the file");
  std::stringstream text;
  text << in.rdbuf();
  YAML::Node parsed;
  try {
    parsed = YAML::Load(text.str());
  } catch (const YAML::Exception& e) {
    throw StudyError(file.string() + ":" + std::to_string(e.mark.line + 1) + ": study: not valid YAML: " + e.msg);
  }
  const YAML::Node& root = parsed;  // const: reading a missing key must not add it
  const SpecReader spec(file);
  spec.expect_map(root, "",
                  {"name", "title", "question", "description", "look_for", "notes", "needs_corpus", "config", "quick",
                   "defaults", "per_world", "sweep", "runs", "compare"});
  Study study;
  Scenario& s = study.scenario;
  s.name = spec.text(root["name"], "name", true);
  if (s.name != file.stem().string())
    spec.fail(root["name"], "name", "'" + s.name + "' must be the file's stem '" + file.stem().string() + "'");
  s.title = spec.text(root["title"], "title", true);
  s.description = spec.text(root["description"], "description", true);
  s.question = spec.text(root["question"], "question", false);
  s.look_for = spec.text(root["look_for"], "look_for", false);
  s.notes = spec.texts(root["notes"], "notes");
  s.needs_corpus = spec.boolean(root["needs_corpus"], "needs_corpus");
  const std::string config = spec.text(root["config"], "config", false);
  const std::vector<std::string> quick = spec.overrides(root["quick"], "quick");
  s.runs = read_runs(spec, root, config, quick);
  study.comparisons = read_comparisons(spec, root["compare"], s.runs);
  return study;
}

}  // namespace dtlab
