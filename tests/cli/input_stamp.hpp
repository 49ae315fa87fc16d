// input_stamp.hpp: what the tests' caches of program outputs are keyed on besides the programs themselves: the
// contents of the files those programs read at run time. The scenario programs read scenarios/studies/*.yaml and
// scenarios/configs/* from the checkout (scenarios/runner.cpp, data_root), so a YAML edit without a rebuild changes
// what they do; a cache keyed on the binaries alone would replay the old results (cli_test.cpp's Scenarios,
// ecosystem_test.cpp's traced run).
//
//   const nlohmann::json inputs = testing::content_stamp(kSource, {"scenarios/studies", "scenarios/configs"});
//   if (recorded["inputs"] != inputs) ...   // testing::first_difference(recorded["inputs"], inputs) names the file
#pragma once

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace dtlab::testing {

// FNV-1a (64 bits) of a file's bytes as 16 hex digits; "unreadable" when it cannot be read.
inline std::string content_hash(const std::filesystem::path& file) {
  std::ifstream in(file, std::ios::binary);
  if (!in) return "unreadable";
  std::uint64_t hash = 14695981039346656037ULL;
  for (std::istreambuf_iterator<char> it(in), end; it != end; ++it) {
    hash ^= static_cast<unsigned char>(*it);
    hash *= 1099511628211ULL;
  }
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(hash));
  return hex;
}

// {path relative to root: content_hash} of each of `paths` (relative to root) that is a file, and of every regular
// file directly inside each that is a directory. A path that does not exist is recorded as "missing".
inline nlohmann::json content_stamp(const std::filesystem::path& root, const std::vector<std::string>& paths) {
  namespace fs = std::filesystem;
  nlohmann::json stamp = nlohmann::json::object();
  for (const std::string& relative : paths) {
    const fs::path path = root / relative;
    if (fs::is_directory(path)) {
      for (const auto& entry : fs::directory_iterator(path))
        if (entry.is_regular_file())
          stamp[(fs::path(relative) / entry.path().filename()).string()] = content_hash(entry.path());
    } else {
      stamp[relative] = fs::exists(path) ? content_hash(path) : "missing";
    }
  }
  return stamp;
}

// The first key (in order) whose value differs between two stamps, or is in only one of them; "" when they are equal.
inline std::string first_difference(const nlohmann::json& recorded, const nlohmann::json& now) {
  if (!recorded.is_object()) return "(no recorded stamp)";
  for (const auto& [key, value] : now.items())
    if (!recorded.contains(key) || recorded.at(key) != value) return key;
  for (const auto& [key, value] : recorded.items())
    if (!now.contains(key)) return key;
  return "";
}

}  // namespace dtlab::testing
