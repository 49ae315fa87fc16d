// checkpoint_store_test.cpp: the torch-free checkpoint format (lab/checkpoint/): safetensors files written and read
// back, every malformed file named as such, the directory protocol (partial saves never loaded, metadata built from
// the rank files' headers, gaps and overlaps refused, keep), inspect's checksum verification, and metadata.json
// refused when it names a file outside its checkpoint directory (a ".." component, an absolute path, a path
// separator, a rank file that is a symbolic link).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <numeric>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "lab/checkpoint/safetensors.hpp"
#include "lab/checkpoint/store.hpp"

namespace dtlab {
namespace {

namespace fs = std::filesystem;

std::string fresh_dir(const std::string& name) {
  const std::string dir = ::testing::TempDir() + "dtlab_store_" + name;
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

std::string expect_file_error(const std::string& path) {
  try {
    safetensors::read_header(path);
  } catch (const safetensors::FileError& e) {
    return e.what();
  }
  ADD_FAILURE() << path << " was read without error";
  return "";
}

// A rank file holding `pieces` of the float tensor "param.w" of `shape` (values = element index).
void write_rank_file(const std::string& path, const std::vector<int64_t>& shape,
                     const std::vector<std::pair<int64_t, int64_t>>& pieces) {
  std::vector<std::vector<float>> data;
  std::vector<safetensors::TensorToWrite> tensors;
  std::map<std::string, checkpoint::PieceRecord> records;
  for (const auto& [begin, numel] : pieces) {
    std::vector<float>& v = data.emplace_back(static_cast<size_t>(numel));
    std::iota(v.begin(), v.end(), static_cast<float>(begin));
  }
  for (size_t i = 0; i < pieces.size(); ++i) {
    const std::string key = checkpoint::piece_key("param.w", pieces[i].first);
    tensors.push_back({key, "F32", {pieces[i].second}, data[i].data()});
    records[key] = {"param.w", shape, pieces[i].first, safetensors::crc32_of(data[i].data(), pieces[i].second * 4),
                    checkpoint::Chunk{}};  // the whole tensor
  }
  safetensors::write_file(path, tensors, {{checkpoint::kPiecesKey, checkpoint::pieces_to_json(records)}});
}

TEST(Safetensors, WhatIsWrittenReadsBackWithItsMetadataAndAlignedData) {
  const std::string dir = fresh_dir("roundtrip");
  const std::vector<float> a = {1.5f, -2.0f, 3.25f};
  const std::vector<uint16_t> b = {0x3f80, 0x4000};
  safetensors::write_file(dir + "/x.safetensors", {{"a", "F32", {3}, a.data()}, {"b", "BF16", {1, 2}, b.data()}},
                          {{"format", "pt"}});
  const safetensors::Header h = safetensors::read_header(dir + "/x.safetensors");
  EXPECT_EQ(h.data_start % 8, 0);
  EXPECT_EQ(h.metadata.at("format"), "pt");
  ASSERT_EQ(h.tensors.size(), 2u);
  EXPECT_EQ(h.tensor("b").shape, (std::vector<int64_t>{1, 2}));
  const std::vector<char> bytes = safetensors::read_bytes(h, h.tensor("a"));
  ASSERT_EQ(bytes.size(), 12u);
  EXPECT_EQ(std::memcmp(bytes.data(), a.data(), 12), 0);
  EXPECT_FALSE(fs::exists(dir + "/x.safetensors.tmp"));
}

TEST(Safetensors, TruncatedTrailingAndMalformedFilesAreNamed) {
  const std::string dir = fresh_dir("malformed");
  const std::vector<float> a(16, 1.0f);
  const std::string path = dir + "/x.safetensors";
  safetensors::write_file(path, {{"a", "F32", {16}, a.data()}}, {});
  const auto size = fs::file_size(path);
  fs::resize_file(path, size - 4);
  EXPECT_NE(expect_file_error(path).find(path + ": is truncated"), std::string::npos);
  fs::resize_file(path, size + 4);
  EXPECT_NE(expect_file_error(path).find("has trailing bytes"), std::string::npos);
  fs::resize_file(path, 5);
  EXPECT_NE(expect_file_error(path).find("is truncated: 5 bytes"), std::string::npos);
  std::ofstream(path, std::ios::binary | std::ios::trunc) << std::string("\x04\0\0\0\0\0\0\0{no}", 12);
  EXPECT_NE(expect_file_error(path).find("header is not JSON"), std::string::npos);
  EXPECT_NE(expect_file_error(dir).find("is a directory"), std::string::npos);
}

TEST(CheckpointStore, CollectBuildsTheMetadataFromRankHeadersAndRefusesGapsAndOverlaps) {
  const std::string dir = fresh_dir("collect");
  const std::string partial = checkpoint::partial_dir(dir, 7);
  fs::create_directories(partial);
  write_rank_file(partial + "/" + checkpoint::rank_file_name(0), {4, 5}, {{0, 12}});
  write_rank_file(partial + "/" + checkpoint::rank_file_name(1), {4, 5}, {{12, 8}});
  const checkpoint::Metadata m = checkpoint::collect(partial, 2, 7, "fsdp_full_shard", {{"model", {}}});
  ASSERT_EQ(m.tensors.count("param.w"), 1u);
  EXPECT_EQ(m.tensors.at("param.w").pieces.size(), 2u);
  EXPECT_EQ(m.total_bytes, 20 * 4);
  EXPECT_FALSE(checkpoint::latest_checkpoint(dir)) << "a partial save is never a checkpoint";
  checkpoint::commit(partial, checkpoint::step_dir(dir, 7), m);
  EXPECT_EQ(checkpoint::latest_checkpoint(dir).value(), checkpoint::step_dir(dir, 7));
  int problems = -1;
  const std::string text = checkpoint::inspect(dir, true, problems);
  EXPECT_EQ(problems, 0) << text;
  EXPECT_NE(text.find("param.w  [4, 5]  F32  rank00000:[0, 12) rank00001:[12, 20)"), std::string::npos) << text;

  const std::string gap = checkpoint::partial_dir(dir, 8);
  fs::create_directories(gap);
  write_rank_file(gap + "/" + checkpoint::rank_file_name(0), {4, 5}, {{0, 12}});
  write_rank_file(gap + "/" + checkpoint::rank_file_name(1), {4, 5}, {{14, 6}});
  try {
    checkpoint::collect(gap, 2, 8, "x", {});
    ADD_FAILURE() << "a gap was accepted";
  } catch (const checkpoint::CheckpointError& e) {
    EXPECT_NE(std::string(e.what()).find("'param.w' elements 12..14 are in no rank file"), std::string::npos)
        << e.what();
  }
  write_rank_file(gap + "/" + checkpoint::rank_file_name(1), {4, 5}, {{10, 10}});
  EXPECT_THROW(checkpoint::collect(gap, 2, 8, "x", {}), checkpoint::CheckpointError);
  EXPECT_EQ(checkpoint::remove_partials(dir), std::vector<std::string>{gap});
  EXPECT_FALSE(fs::exists(gap));
  EXPECT_TRUE(fs::exists(checkpoint::step_dir(dir, 7))) << "removing partial saves keeps complete ones";
}

TEST(CheckpointStore, KeepPrunesTheOldestAndNeverTheNewest) {
  const std::string dir = fresh_dir("keep");
  for (int step : {2, 4, 6}) {
    const std::string partial = checkpoint::partial_dir(dir, step);
    fs::create_directories(partial);
    write_rank_file(partial + "/" + checkpoint::rank_file_name(0), {3}, {{0, 3}});
    checkpoint::commit(partial, checkpoint::step_dir(dir, step), checkpoint::collect(partial, 1, step, "single", {}));
  }
  EXPECT_TRUE(checkpoint::prune(dir, 0).empty()) << "keep=0 keeps all";
  EXPECT_EQ(checkpoint::prune(dir, 1).size(), 2u);
  const auto left = checkpoint::complete_checkpoints(dir);
  ASSERT_EQ(left.size(), 1u);
  EXPECT_EQ(left[0].first, 6);
  EXPECT_TRUE(checkpoint::prune(dir, 1).empty()) << "the only complete checkpoint stays";
}

TEST(CheckpointStore, InspectNamesAFlippedByteAndAMissingFile) {
  const std::string dir = fresh_dir("inspect");
  const std::string partial = checkpoint::partial_dir(dir, 1);
  fs::create_directories(partial);
  write_rank_file(partial + "/" + checkpoint::rank_file_name(0), {8}, {{0, 8}});
  checkpoint::commit(partial, checkpoint::step_dir(dir, 1), checkpoint::collect(partial, 1, 1, "single", {}));
  const std::string file = checkpoint::step_dir(dir, 1) + "/" + checkpoint::rank_file_name(0);
  {
    std::fstream f(file, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(-1, std::ios::end);
    f.put('\x7f');
  }
  int problems = 0;
  const std::string text = checkpoint::inspect(dir, true, problems);
  EXPECT_EQ(problems, 1) << text;
  EXPECT_NE(text.find("CHECKSUM MISMATCH: rank00000.safetensors 'param.w@0'"), std::string::npos) << text;
  fs::remove(file);
  try {
    checkpoint::read_metadata(dir);
    ADD_FAILURE() << "a missing rank file was accepted";
  } catch (const checkpoint::CheckpointError& e) {
    EXPECT_NE(std::string(e.what()).find("rank file rank00000.safetensors is missing"), std::string::npos) << e.what();
  }
  std::ofstream(dir + "/plain") << "x";
  EXPECT_THROW(checkpoint::complete_checkpoints(dir + "/plain"), checkpoint::CheckpointError);
}

// A complete one-rank checkpoint of step 1 under `dir`; returns its step directory.
std::string committed_checkpoint(const std::string& dir) {
  const std::string partial = checkpoint::partial_dir(dir, 1);
  fs::create_directories(partial);
  write_rank_file(partial + "/" + checkpoint::rank_file_name(0), {8}, {{0, 8}});
  checkpoint::commit(partial, checkpoint::step_dir(dir, 1), checkpoint::collect(partial, 1, 1, "single", {}));
  return checkpoint::step_dir(dir, 1);
}

// Rewrites `step`'s metadata.json with every mention of its one rank file (in "files" and in each piece) as `name`.
void name_the_rank_file(const std::string& step, const std::string& name) {
  nlohmann::json j;
  {
    std::ifstream in(step + "/" + checkpoint::kMetadataFile);
    j = nlohmann::json::parse(in);
  }
  j["files"] = {name};
  for (auto& [tensor, info] : j["tensors"].items())
    for (auto& piece : info["pieces"]) piece["file"] = name;
  std::ofstream(step + "/" + checkpoint::kMetadataFile, std::ios::trunc) << j.dump(1);
}

std::string read_metadata_error(const std::string& path) {
  try {
    checkpoint::read_metadata(path);
  } catch (const checkpoint::CheckpointError& e) {
    return e.what();
  }
  ADD_FAILURE() << path << " was read without error";
  return "";
}

TEST(CheckpointStore, MetadataNamingAFileOutsideItsDirectoryIsRefusedWithTheFileAndTheRule) {
  struct Case {
    std::string name, rule;
  };
  for (const Case& c : {Case{"../x.safetensors", "has a \"..\" component"}, Case{"/etc/passwd", "is an absolute path"},
                        Case{"sub/x", "has a path separator"}}) {
    const std::string dir = fresh_dir("outside");
    const std::string step = committed_checkpoint(dir);
    // Each name leads to a real, readable safetensors file (or, for /etc/passwd, a real file), so only the rule
    // stops it: without it the checkpoint would load or fail on the file's content, not on its name.
    fs::create_directories(step + "/sub");
    fs::copy_file(step + "/rank00000.safetensors", dir + "/x.safetensors");
    fs::copy_file(step + "/rank00000.safetensors", step + "/sub/x");
    name_the_rank_file(step, c.name);
    const std::string error = read_metadata_error(step);
    EXPECT_NE(error.find("checkpoint " + step + "/metadata.json: file name '" + c.name + "' " + c.rule +
                         ": refused (a file metadata.json names must be a plain file name inside its checkpoint "
                         "directory)"),
              std::string::npos)
        << c.name << ": " << error;
    int problems = 0;
    EXPECT_THROW(checkpoint::inspect(step, true, problems), checkpoint::CheckpointError) << c.name;
  }
  // A piece in a file that "files" does not list (the listed files are the ones checked).
  const std::string dir = fresh_dir("unlisted");
  const std::string step = committed_checkpoint(dir);
  nlohmann::json j;
  {
    std::ifstream in(step + "/metadata.json");
    j = nlohmann::json::parse(in);
  }
  j["tensors"]["param.w"]["pieces"][0]["file"] = "rank00001.safetensors";
  std::ofstream(step + "/metadata.json", std::ios::trunc) << j.dump(1);
  EXPECT_NE(read_metadata_error(step).find("a piece of 'param.w' is in file 'rank00001.safetensors', which \"files\" "
                                           "does not list"),
            std::string::npos);
}

TEST(CheckpointStore, ARankFileThatIsASymbolicLinkOutsideItsDirectoryIsRefused) {
  const std::string dir = fresh_dir("symlink");
  const std::string step = committed_checkpoint(dir);
  const std::string file = step + "/rank00000.safetensors";
  const std::string outside = dir + "/outside.safetensors";
  fs::rename(file, outside);  // the same bytes, its checksums valid: only the link is wrong
  fs::create_symlink(outside, file);
  const std::string error = read_metadata_error(step);
  EXPECT_NE(
      error.find("checkpoint " + step + "/metadata.json: rank file 'rank00000.safetensors' is a symbolic link (to " +
                 outside + "): refused (a rank file must be a regular file inside its checkpoint directory)"),
      std::string::npos)
      << error;
  fs::remove(file);
  fs::create_directory(file);
  EXPECT_NE(read_metadata_error(step).find("rank file 'rank00000.safetensors' is not a regular file: refused"),
            std::string::npos);
}

TEST(CheckpointStore, ASaveStoppedBetweenItsMetadataAndItsRenameIsNeverLoadedAndIsRemoved) {
  const std::string dir = fresh_dir("stopped");
  const std::string step = committed_checkpoint(dir);
  const std::string partial = checkpoint::partial_dir(dir, 2);
  fs::create_directories(partial);
  write_rank_file(partial + "/" + checkpoint::rank_file_name(0), {8}, {{0, 8}});
  const checkpoint::Metadata m = checkpoint::collect(partial, 1, 2, "single", {});
  EXPECT_THROW(checkpoint::commit(partial, checkpoint::step_dir(dir, 2), m,
                                  [] { throw std::runtime_error("the process dies here"); }),
               std::runtime_error);
  ASSERT_TRUE(fs::exists(partial + "/metadata.json")) << "the save looks complete but for its name";
  EXPECT_EQ(checkpoint::latest_checkpoint(dir).value(), step);
  std::string loaded;
  checkpoint::read_metadata(dir, &loaded);
  EXPECT_EQ(loaded, step) << "checkpoint.dir's latest is the committed step 1";
  for (const std::string& path : {partial, partial + "/"})
    EXPECT_NE(read_metadata_error(path).find("checkpoint " + path +
                                             " is a save that was never committed (.partial): a .partial save is "
                                             "never loaded"),
              std::string::npos)
        << path;
  EXPECT_EQ(checkpoint::remove_partials(dir), std::vector<std::string>{partial});
  EXPECT_FALSE(fs::exists(partial));
  EXPECT_TRUE(fs::exists(step + "/metadata.json"));
}

}  // namespace
}  // namespace dtlab
