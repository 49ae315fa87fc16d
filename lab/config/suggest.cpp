// suggest.cpp: "did you mean" — the closest key, section or allowed value to a misspelt one, by edit distance.
#include <algorithm>

#include "lab/config/config_internal.hpp"

namespace dtlab::config_internal {
namespace {

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

}  // namespace

// The closest candidate if it is close enough to be a plausible typo.
std::optional<std::string> closest(std::string_view name, std::span<const std::string> candidates) {
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

}  // namespace dtlab::config_internal
