// checkpoint_chunk_test.cpp: N-D chunks of checkpointed tensors (lab/checkpoint/chunk.hpp) and the store over them —
// a tensor-parallel slice's pieces tile the tensor or are refused naming the chunk, land in their places in the whole
// tensor, and a checkpoint with chunks says version 2 while one without stays version 1 (older dtlabs read it).
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "lab/checkpoint/chunk.hpp"
#include "lab/checkpoint/safetensors.hpp"
#include "lab/checkpoint/store.hpp"

namespace dtlab {
namespace {

namespace fs = std::filesystem;
using checkpoint::Chunk;
using checkpoint::ChunkRange;

// A [4, 6] tensor cut as tensor parallelism cuts a row-parallel weight over 2 ranks: columns 0..3 and 3..6.
const std::vector<int64_t> kShape = {4, 6};
const Chunk kLeft{{0, 0}, {4, 3}}, kRight{{0, 3}, {4, 3}};

TEST(CheckpointChunk, ColumnSlicesTileTheTensorAndEveryBreakIsNamed) {
  EXPECT_EQ(checkpoint::tiling_problem({{kLeft, 0, 12}, {kRight, 0, 12}}, kShape), "");
  // An FSDP shard group cuts each slice into ranges again.
  EXPECT_EQ(checkpoint::tiling_problem({{kLeft, 0, 5}, {kLeft, 5, 7}, {kRight, 0, 12}}, kShape), "");
  EXPECT_EQ(checkpoint::tiling_problem({{kLeft, 0, 5}, {kRight, 0, 12}}, kShape),
            "elements 5..12 of chunk [0:4, 0:3] are in no rank file");
  EXPECT_EQ(checkpoint::tiling_problem({{kLeft, 0, 12}, {kLeft, 6, 6}, {kRight, 0, 12}}, kShape),
            "elements 6..12 of chunk [0:4, 0:3] overlap");
  EXPECT_EQ(checkpoint::tiling_problem({{kLeft, 0, 12}}, kShape), "its chunks cover 12 of 24 elements");
  const Chunk wide{{0, 2}, {4, 4}};  // columns 2..6 meet the left slice's column 2
  EXPECT_EQ(checkpoint::tiling_problem({{kLeft, 0, 12}, {wide, 0, 16}}, kShape),
            "chunks [0:4, 0:3] and [0:4, 2:6] overlap");
  EXPECT_EQ(checkpoint::tiling_problem({{Chunk{{0, 4}, {4, 3}}, 0, 12}}, kShape),
            "chunk [0:4, 4:7] reaches outside the tensor along axis 1 (size 6)");
  EXPECT_EQ(checkpoint::chunk_problem(Chunk{{0}, {24}}, kShape), "chunk [0:24] has 1 axes, the tensor 2");
  // The whole tensor's 1-D ranges: today's data-parallel shards, named as before.
  const Chunk whole = Chunk::whole(kShape);
  EXPECT_EQ(checkpoint::tiling_problem({{whole, 0, 10}, {whole, 12, 12}}, kShape),
            "elements 10..12 are in no rank file");
}

TEST(CheckpointChunk, IntersectGivesTheCommonBox) {
  EXPECT_EQ(checkpoint::intersect(kLeft, Chunk{{1, 2}, {2, 4}}), (Chunk{{1, 2}, {2, 1}}));
  EXPECT_FALSE(checkpoint::intersect(kLeft, kRight));
  EXPECT_EQ(checkpoint::intersect(kRight, Chunk::whole(kShape)), kRight);
}

// Element (i, j) of the whole tensor holds 10 i + j; a range of the right slice lands at its columns.
TEST(CheckpointChunk, ScatterPutsARangeOfAChunkInItsPlacesInTheWholeTensor) {
  std::vector<float> whole(24, -1.0f);
  // Right slice, row-major over [4, 3]: elements 2..7 are (0,5) (1,3) (1,4) (1,5) (2,3).
  const std::vector<float> range = {5, 13, 14, 15, 23};
  checkpoint::scatter_into_whole(reinterpret_cast<const char*>(range.data()), 2, 5, kRight, kShape, sizeof(float),
                                 reinterpret_cast<char*>(whole.data()));
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 6; ++j) {
      const float want = 10 * i + j;
      const bool written = (i == 0 && j == 5) || (i == 1 && j >= 3) || (i == 2 && j == 3);
      EXPECT_EQ(whole[static_cast<size_t>(i * 6 + j)], written ? want : -1.0f) << "(" << i << ", " << j << ")";
    }
}

// A rank file holding one chunk of "param.w" [4, 6], element (i, j) = 10 i + j.
void write_chunk_file(const std::string& path, const Chunk& chunk) {
  std::vector<float> data;
  for (int64_t i = 0; i < chunk.shape[0]; ++i)
    for (int64_t j = 0; j < chunk.shape[1]; ++j)
      data.push_back(static_cast<float>(10 * (chunk.offsets[0] + i) + chunk.offsets[1] + j));
  const std::string key = checkpoint::piece_key("param.w", 0, chunk);
  const auto n = static_cast<int64_t>(data.size());
  std::map<std::string, checkpoint::PieceRecord> records;
  records[key] = {"param.w", kShape, 0, safetensors::crc32_of(data.data(), n * 4), chunk};
  safetensors::write_file(path, {{key, "F32", {n}, data.data()}},
                          {{checkpoint::kPiecesKey, checkpoint::pieces_to_json(records)}});
}

TEST(CheckpointChunk, ACheckpointOfSlicesReadsBackWholeAndSaysVersion2) {
  const std::string dir = ::testing::TempDir() + "dtlab_chunk_store";
  fs::remove_all(dir);
  const std::string partial = checkpoint::partial_dir(dir, 1);
  fs::create_directories(partial);
  write_chunk_file(partial + "/" + checkpoint::rank_file_name(0), kLeft);
  write_chunk_file(partial + "/" + checkpoint::rank_file_name(1), kRight);
  const checkpoint::Metadata m = checkpoint::collect(partial, 2, 1, "ddp", {{"model", {}}});
  EXPECT_EQ(m.to_json().at("version"), 2);
  checkpoint::commit(partial, checkpoint::step_dir(dir, 1), m);
  std::string step;
  const checkpoint::Metadata read = checkpoint::read_metadata(dir, &step);
  ASSERT_EQ(read.tensors.at("param.w").pieces.size(), 2u);
  EXPECT_EQ(read.tensors.at("param.w").pieces[1].chunk, kRight);
  const std::vector<char> bytes = checkpoint::read_whole_tensor(step, read, "param.w");
  ASSERT_EQ(bytes.size(), 24 * sizeof(float));
  for (int i = 0; i < 24; ++i) {
    float f = 0;
    std::memcpy(&f, bytes.data() + static_cast<size_t>(i) * 4, 4);
    EXPECT_EQ(f, static_cast<float>(10 * (i / 6) + i % 6)) << "element " << i;
  }
  // Only the pieces that meet the wanted chunk are read.
  int64_t bytes_read = 0;
  checkpoint::read_whole_tensor(step, read, "param.w", Chunk{{0, 4}, {2, 2}}, &bytes_read);
  EXPECT_EQ(bytes_read, 12 * 4);
  // A piece is read whole or not at all: a size or a checksum metadata.json does not agree with is named.
  checkpoint::PieceReader reader(step);
  const checkpoint::TensorInfo& info = read.tensors.at("param.w");
  checkpoint::Piece longer = info.pieces[0], damaged = info.pieces[0];
  longer.numel = 13;
  damaged.crc32 ^= 1U;
  EXPECT_EQ(reader.read(info, info.pieces[0]).size(), 12u * 4);
  for (const auto& [piece, message] : {std::pair{longer, "' holds 48 bytes, metadata.json says 13 elements of F32"},
                                       {damaged, "' fails its checksum"}}) {
    try {
      reader.read(info, piece);
      ADD_FAILURE() << "read a piece whose metadata does not agree: " << message;
    } catch (const checkpoint::CheckpointError& e) {
      EXPECT_NE(std::string(e.what()).find(message), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("rank00000.safetensors"), std::string::npos) << e.what();
    }
  }
  int problems = -1;
  const std::string text = checkpoint::inspect(dir, true, problems);
  EXPECT_EQ(problems, 0) << text;
  EXPECT_NE(text.find("param.w  [4, 6]  F32  rank00000:[0:4, 0:3][0, 12) rank00001:[0:4, 3:6][0, 12)"),
            std::string::npos)
      << text;

  // metadata.json whose chunk reaches outside its tensor is refused, naming the piece and the rule.
  nlohmann::json j = read.to_json();
  j["tensors"]["param.w"]["pieces"][1]["chunk_offsets"] = {0, 4};
  try {
    checkpoint::Metadata::from_json(j, "m.json");
    ADD_FAILURE() << "a chunk outside its tensor was accepted";
  } catch (const checkpoint::CheckpointError& e) {
    EXPECT_NE(std::string(e.what()).find("reaches outside the tensor along axis 1 (size 6)"), std::string::npos)
        << e.what();
  }
  // Without chunks the metadata stays version 1, the format dtlabs before chunks read.
  checkpoint::Metadata plain = read;
  for (checkpoint::Piece& p : plain.tensors.at("param.w").pieces) p.chunk = Chunk::whole(kShape);
  EXPECT_EQ(plain.to_json().at("version"), 1);
  EXPECT_FALSE(plain.to_json()["tensors"]["param.w"]["pieces"][0].contains("chunk_offsets"));
}

}  // namespace
}  // namespace dtlab
