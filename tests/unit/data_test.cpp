// data_test.cpp: unit tests of lab/data — token file round trips and every corruption rule, the byte
// tokenizer and text build, the synthetic and file sources, and the sampler's batch contract.
//
//   ./build/bin/unit_tests --gtest_filter='Data*:Sampler*:TokenFile*:Synthetic*'
#include "lab/data.hpp"

#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <stdlib.h>  // defines: mkdtemp

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <set>
#include <string>
#include <vector>

namespace dtlab {
namespace {

namespace fs = std::filesystem;

// A fresh directory under /tmp, removed with everything in it when the test ends.
class TempDir {
 public:
  TempDir() {
    char pattern[] = "/tmp/dtlab_data_test_XXXXXX";
    const char* made = ::mkdtemp(pattern);
    if (made == nullptr) throw std::runtime_error("mkdtemp failed");
    path_ = made;
  }
  ~TempDir() {
    std::error_code ignored;
    fs::remove_all(path_, ignored);
  }
  std::string file(const std::string& name) const { return (fs::path(path_) / name).string(); }

 private:
  std::string path_;
};

std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

// Expects TokenFile(path) to throw DataError whose message names the path and contains every fragment.
void expect_open_error(const std::string& path, const std::vector<std::string>& fragments) {
  try {
    TokenFile file(path);
    ADD_FAILURE() << "opening " << path << " did not throw";
  } catch (const DataError& error) {
    const std::string message = error.what();
    EXPECT_NE(message.find(path), std::string::npos) << message;
    for (const auto& fragment : fragments)
      EXPECT_NE(message.find(fragment), std::string::npos) << "missing '" << fragment << "' in: " << message;
  }
}

// A valid 10-token uint16 file, returned as raw bytes for corruption.
std::string valid_file_bytes(const TempDir& dir) {
  const std::string path = dir.file("valid.bin");
  write_token_file(path, {1, 2, 3, 4, 5, 6, 7, 8, 9, 299}, 300);
  return read_bytes(path);
}

std::vector<int64_t> sequence_of(const TokenSource& source, int64_t index, int64_t seq_len) {
  std::vector<int64_t> tokens(static_cast<size_t>(seq_len + 1));
  source.sequence(index, seq_len, tokens.data());
  return tokens;
}

// ---------------------------------------------------------------------------------------------------------
// Token file

struct RoundTripCase {
  int64_t vocab_size;
  int expected_bytes_per_token;
};

class TokenFileRoundTrip : public ::testing::TestWithParam<RoundTripCase> {};

TEST_P(TokenFileRoundTrip, WritesSmallestDtypeAndReadsBack) {
  const auto [vocab_size, expected_bytes_per_token] = GetParam();
  TempDir dir;
  const std::string path = dir.file("tokens.bin");
  std::vector<uint32_t> tokens;
  for (int64_t i = 0; i < 1000; ++i) tokens.push_back(static_cast<uint32_t>((i * 7919) % vocab_size));
  tokens.push_back(static_cast<uint32_t>(vocab_size - 1));
  write_token_file(path, tokens, vocab_size);

  EXPECT_FALSE(fs::exists(path + ".tmp"));
  EXPECT_EQ(fs::file_size(path), 32 + tokens.size() * expected_bytes_per_token);
  TokenFile file(path);
  EXPECT_EQ(file.path(), path);
  EXPECT_EQ(file.size(), static_cast<int64_t>(tokens.size()));
  EXPECT_EQ(file.vocab_size(), vocab_size);
  EXPECT_EQ(file.bytes_per_token(), expected_bytes_per_token);
  for (size_t i = 0; i < tokens.size(); ++i) ASSERT_EQ(file.token(static_cast<int64_t>(i)), tokens[i]) << i;
  std::vector<int64_t> window(100);
  file.read(900, 100, window.data());
  for (int64_t i = 0; i < 100; ++i) EXPECT_EQ(window[i], tokens[900 + i]);
}

INSTANTIATE_TEST_SUITE_P(TokenFileDtypes, TokenFileRoundTrip,
                         ::testing::Values(RoundTripCase{2, 1}, RoundTripCase{256, 1}, RoundTripCase{257, 2},
                                           RoundTripCase{65536, 2}, RoundTripCase{65537, 4},
                                           RoundTripCase{int64_t{1} << 32, 4}));

TEST(TokenFileTest, EmptyFileRoundTrips) {
  TempDir dir;
  write_token_file(dir.file("empty.bin"), {}, 256);
  TokenFile file(dir.file("empty.bin"));
  EXPECT_EQ(file.size(), 0);
  EXPECT_EQ(file.vocab_size(), 256);
}

TEST(TokenFileTest, WriteRejectsTokenOutsideVocab) {
  TempDir dir;
  const std::string path = dir.file("bad.bin");
  try {
    write_token_file(path, {1, 2, 256}, 256);
    FAIL() << "no error";
  } catch (const DataError& error) {
    const std::string message = error.what();
    EXPECT_NE(message.find(path), std::string::npos) << message;
    EXPECT_NE(message.find("token 256 at position 2"), std::string::npos) << message;
  }
  EXPECT_FALSE(fs::exists(path));
  EXPECT_FALSE(fs::exists(path + ".tmp"));
}

TEST(TokenFileTest, WriteReplacesExistingFile) {
  TempDir dir;
  const std::string path = dir.file("tokens.bin");
  write_token_file(path, {1, 2, 3}, 256);
  write_token_file(path, {4, 5}, 1000);
  TokenFile file(path);
  EXPECT_EQ(file.size(), 2);
  EXPECT_EQ(file.token(1), 5);
  EXPECT_EQ(file.bytes_per_token(), 2);
}

TEST(TokenFileTest, WrongMagicIsAnError) {
  TempDir dir;
  std::string bytes = valid_file_bytes(dir);
  std::memcpy(bytes.data(), "ABCDEFGH", 8);
  write_bytes(dir.file("magic.bin"), bytes);
  expect_open_error(dir.file("magic.bin"), {"wrong magic 'ABCDEFGH'", "expected 'DTLABTOK'", "dtlab data build"});
}

TEST(TokenFileTest, WrongVersionIsAnError) {
  TempDir dir;
  std::string bytes = valid_file_bytes(dir);
  const uint32_t version = 7;
  std::memcpy(bytes.data() + 8, &version, 4);
  write_bytes(dir.file("version.bin"), bytes);
  expect_open_error(dir.file("version.bin"), {"unsupported version 7", "supported versions: 1"});
}

TEST(TokenFileTest, BadDtypeIsAnError) {
  TempDir dir;
  std::string bytes = valid_file_bytes(dir);
  const uint32_t dtype = 3;
  std::memcpy(bytes.data() + 12, &dtype, 4);
  write_bytes(dir.file("dtype.bin"), bytes);
  expect_open_error(dir.file("dtype.bin"), {"bad dtype code 3"});
}

TEST(TokenFileTest, TruncatedHeaderIsAnError) {
  TempDir dir;
  write_bytes(dir.file("short.bin"), valid_file_bytes(dir).substr(0, 20));
  expect_open_error(dir.file("short.bin"), {"truncated header", "20 bytes"});
  write_bytes(dir.file("zero.bin"), "");
  expect_open_error(dir.file("zero.bin"), {"truncated header", "0 bytes"});
}

TEST(TokenFileTest, TruncatedBodyIsAnError) {
  TempDir dir;
  const std::string bytes = valid_file_bytes(dir);  // 32 + 10 * 2 = 52 bytes
  write_bytes(dir.file("body.bin"), bytes.substr(0, bytes.size() - 1));
  expect_open_error(dir.file("body.bin"), {"truncated body", "expected 52 bytes", "actual 51 bytes"});
}

TEST(TokenFileTest, ExtraBytesAreAnError) {
  TempDir dir;
  write_bytes(dir.file("extra.bin"), valid_file_bytes(dir) + "xyz");
  expect_open_error(dir.file("extra.bin"), {"extra bytes", "expected 52 bytes", "actual 55 bytes"});
}

TEST(TokenFileTest, HugeCountIsASizeMismatchNotAnOverflow) {
  TempDir dir;
  std::string bytes = valid_file_bytes(dir);
  const uint64_t count = ~uint64_t{0};
  std::memcpy(bytes.data() + 16, &count, 8);
  write_bytes(dir.file("huge.bin"), bytes);
  expect_open_error(dir.file("huge.bin"), {"truncated body", "actual 52 bytes"});
}

TEST(TokenFileTest, HeaderVocabOutOfRangeIsAnError) {
  TempDir dir;
  for (const uint64_t vocab : {uint64_t{0}, (uint64_t{1} << 32) + 1}) {
    std::string bytes = valid_file_bytes(dir);
    std::memcpy(bytes.data() + 24, &vocab, 8);
    write_bytes(dir.file("vocab.bin"), bytes);
    expect_open_error(dir.file("vocab.bin"), {"vocab size " + std::to_string(vocab), "out of range", "1 .. 2^32"});
  }
}

TEST(TokenFileTest, TokenIdAtOrAboveTheHeaderVocabIsAnErrorWhenRead) {
  TempDir dir;
  std::string bytes = valid_file_bytes(dir);  // uint16 tokens 1..9, 299 with vocab 300
  const uint64_t vocab = 200;                 // the header now says 200: token 299 (position 9) is out of range
  std::memcpy(bytes.data() + 24, &vocab, 8);
  const std::string path = dir.file("ids.bin");
  write_bytes(path, bytes);
  TokenFile file(path);
  std::vector<int64_t> head(9);
  file.read(0, 9, head.data());  // ids 1..9 are fine
  std::vector<int64_t> all(10);
  try {
    file.read(0, 10, all.data());
    FAIL() << "reading an out-of-vocab id did not throw";
  } catch (const DataError& e) {
    const std::string message = e.what();
    for (const std::string& fragment :
         {path, std::string("token id 299 at position 9"), std::string(">= the header's vocab size 200")})
      EXPECT_NE(message.find(fragment), std::string::npos) << message;
  }
}

TEST(TokenFileTest, DirectoryOrPathBelowAFileIsAnError) {
  TempDir dir;
  fs::create_directory(dir.file("a_directory.bin"));
  expect_open_error(dir.file("a_directory.bin"), {"not a regular file"});
  write_bytes(dir.file("plain"), "x");
  expect_open_error(dir.file("plain") + "/tokens.bin", {"cannot open", "Not a directory"});
}

TEST(TokenFileTest, MissingFileIsAnError) {
  TempDir dir;
  expect_open_error(dir.file("absent.bin"), {"cannot open", "No such file"});
}

TEST(TokenFileTest, MoveTransfersTheMapping) {
  TempDir dir;
  write_token_file(dir.file("tokens.bin"), {10, 20, 30}, 256);
  TokenFile first(dir.file("tokens.bin"));
  TokenFile second(std::move(first));
  EXPECT_EQ(first.size(), 0);  // NOLINT(clang-analyzer-cplusplus.Move): the moved-from state is part of the contract
  EXPECT_EQ(second.size(), 3);
  EXPECT_EQ(second.token(2), 30);
  TokenFile third(dir.file("tokens.bin"));
  third = std::move(second);
  EXPECT_EQ(third.token(0), 10);
}

// ---------------------------------------------------------------------------------------------------------
// Tokenizer and text build

TEST(DataTokenizerTest, BytesAreTokensAndNulIsStripped) {
  const std::string text = std::string("Hi\xff") + '\0' + "!";
  EXPECT_EQ(tokenize_bytes(text), (std::vector<uint32_t>{'H', 'i', 0xff, '!'}));
  EXPECT_TRUE(tokenize_bytes("").empty());
}

TEST(DataBuildTest, ConcatenatesDocumentsWithSeparator) {
  TempDir dir;
  write_bytes(dir.file("a.txt"), "ab");
  write_bytes(dir.file("b.txt"), std::string("c") + '\0' + "d");
  const int64_t count = build_token_file_from_text({dir.file("a.txt"), dir.file("b.txt")}, dir.file("out.bin"));
  EXPECT_EQ(count, 5);  // a b <sep> c d
  TokenFile file(dir.file("out.bin"));
  EXPECT_EQ(file.vocab_size(), 256);
  EXPECT_EQ(file.bytes_per_token(), 1);
  ASSERT_EQ(file.size(), 5);
  std::vector<int64_t> tokens(5);
  file.read(0, 5, tokens.data());
  EXPECT_EQ(tokens, (std::vector<int64_t>{'a', 'b', 0, 'c', 'd'}));
}

TEST(DataBuildTest, MissingInputIsNamed) {
  TempDir dir;
  write_bytes(dir.file("a.txt"), "ab");
  try {
    build_token_file_from_text({dir.file("a.txt"), dir.file("missing.txt")}, dir.file("out.bin"));
    FAIL() << "no error";
  } catch (const DataError& error) {
    EXPECT_NE(std::string(error.what()).find(dir.file("missing.txt")), std::string::npos) << error.what();
  }
  EXPECT_FALSE(fs::exists(dir.file("out.bin")));
}

TEST(DataBuildTest, DefaultCorpusIsSortedReadableAndBuilds) {
  const std::vector<std::string> files = default_corpus_files();
  if (files.empty()) GTEST_SKIP() << "/usr/share/common-licenses is missing on this system";
  EXPECT_TRUE(std::is_sorted(files.begin(), files.end()));
  std::set<fs::path> targets;
  for (const auto& file : files) {
    EXPECT_TRUE(fs::is_regular_file(file)) << file;
    EXPECT_TRUE(targets.insert(fs::canonical(file)).second) << "duplicate: " << file;
  }
  TempDir dir;
  const int64_t count = build_token_file_from_text(files, dir.file("corpus.bin"));
  EXPECT_GT(count, 10000);
  EXPECT_EQ(TokenFile(dir.file("corpus.bin")).size(), count);
}

// ---------------------------------------------------------------------------------------------------------
// Sources

TEST(SyntheticSourceTest, DeterministicInSeedAndIndex) {
  const auto a = make_synthetic_source(256, 1);
  const auto b = make_synthetic_source(256, 1);
  const auto other_seed = make_synthetic_source(256, 2);
  EXPECT_EQ(a->vocab_size(), 256);
  for (int64_t index : {0, 1, 17, 123456789}) {
    EXPECT_EQ(sequence_of(*a, index, 64), sequence_of(*b, index, 64));
    EXPECT_NE(sequence_of(*a, index, 64), sequence_of(*other_seed, index, 64));
  }
  EXPECT_NE(sequence_of(*a, 0, 64), sequence_of(*a, 1, 64));
}

TEST(SyntheticSourceTest, TokensBelowVocab) {
  for (int64_t vocab : {1, 2, 7, 256, 50000}) {
    const auto source = make_synthetic_source(vocab, 3);
    for (int64_t index = 0; index < 50; ++index) {
      for (int64_t token : sequence_of(*source, index, 128)) {
        ASSERT_GE(token, 0);
        ASSERT_LT(token, vocab);
      }
    }
  }
}

// Learnability proxy: the empirical entropy of the next token given the current one is far below ln(vocab),
// so even a bigram model beats the uniform loss by a wide margin.
TEST(SyntheticSourceTest, NextTokenIsPredictable) {
  const int64_t vocab = 256;
  const auto source = make_synthetic_source(vocab, 1);
  std::map<int64_t, std::map<int64_t, int64_t>> bigrams;
  int64_t total = 0;
  for (int64_t index = 0; index < 2000; ++index) {
    const auto tokens = sequence_of(*source, index, 64);
    for (size_t t = 0; t + 1 < tokens.size(); ++t, ++total) ++bigrams[tokens[t]][tokens[t + 1]];
  }
  double conditional_entropy_nats = 0;
  for (const auto& [current, nexts] : bigrams) {
    int64_t row_total = 0;
    for (const auto& [next, n] : nexts) row_total += n;
    for (const auto& [next, n] : nexts) {
      conditional_entropy_nats -= static_cast<double>(n) / total * std::log(static_cast<double>(n) / row_total);
    }
  }
  EXPECT_LT(conditional_entropy_nats, std::log(static_cast<double>(vocab)) - 2.0) << conditional_entropy_nats;
}

TEST(DataFileSourceTest, SequencesTileTheFileAndWrapAround) {
  TempDir dir;
  const int64_t n_tokens = 100, seq_len = 8;
  std::vector<uint32_t> tokens;
  for (int64_t i = 0; i < n_tokens; ++i) tokens.push_back(static_cast<uint32_t>(i));
  write_token_file(dir.file("ramp.bin"), tokens, n_tokens);
  const auto source = make_file_source(dir.file("ramp.bin"));
  EXPECT_EQ(source->vocab_size(), n_tokens);
  const int64_t start_range = n_tokens - seq_len - 1;  // 91
  for (int64_t index : {0, 1, 5, 11, 12, 91, 1000}) {
    const auto sequence = sequence_of(*source, index, seq_len);
    const int64_t start = (index * seq_len) % start_range;
    for (int64_t t = 0; t <= seq_len; ++t) ASSERT_EQ(sequence[t], start + t) << "index " << index << " t " << t;
  }
  // Consecutive sequences share a boundary token while they do not wrap.
  EXPECT_EQ(sequence_of(*source, 3, seq_len).back(), sequence_of(*source, 4, seq_len).front());
  // Index 12 wraps: 96 mod 91 = 5.
  EXPECT_EQ(sequence_of(*source, 12, seq_len).front(), 5);
}

TEST(DataFileSourceTest, TooShortFileNamesPathAndCounts) {
  TempDir dir;
  write_token_file(dir.file("short.bin"), {1, 2, 3, 4, 5, 6, 7, 8, 9}, 256);
  const auto source = make_file_source(dir.file("short.bin"));
  std::vector<int64_t> out(9);
  EXPECT_NO_THROW(source->sequence(0, 7, out.data()));  // 9 tokens = 7 + 2: just enough
  try {
    source->sequence(0, 8, out.data());
    FAIL() << "no error";
  } catch (const DataError& error) {
    const std::string message = error.what();
    EXPECT_NE(message.find(dir.file("short.bin")), std::string::npos) << message;
    EXPECT_NE(message.find("has 9 tokens"), std::string::npos) << message;
    EXPECT_NE(message.find("at least seq_len + 2 = 10"), std::string::npos) << message;
  }
  // The sampler fails at construction, not at the first step.
  EXPECT_THROW(Sampler(*source, 8, 1, 1, 1, 0, 1, 1), DataError);
}

TEST(DataSourceTest, MakeTokenSourceChecksVocabAgainstModel) {
  TempDir dir;
  write_token_file(dir.file("big_vocab.bin"), {1, 299, 3}, 300);
  DataConfig data;
  data.source = "file";
  data.path = dir.file("big_vocab.bin");
  EXPECT_EQ(make_token_source(data, 300)->vocab_size(), 300);
  EXPECT_EQ(make_token_source(data, 512)->vocab_size(), 300);
  try {
    make_token_source(data, 256);
    FAIL() << "no error";
  } catch (const DataError& error) {
    const std::string message = error.what();
    EXPECT_NE(message.find(data.path), std::string::npos) << message;
    EXPECT_NE(message.find("vocab size 300"), std::string::npos) << message;
    EXPECT_NE(message.find("model.vocab_size=256"), std::string::npos) << message;
    EXPECT_NE(message.find("data.path"), std::string::npos) << message;
  }
  data.path.clear();
  EXPECT_THROW(make_token_source(data, 256), DataError);
  data.source = "nonsense";
  EXPECT_THROW(make_token_source(data, 256), DataError);
  data.source = "synthetic";
  EXPECT_EQ(make_token_source(data, 256)->vocab_size(), 256);
}

// ---------------------------------------------------------------------------------------------------------
// Sampler

struct Layout {
  int world_size;
  int64_t accumulation;
};

class SamplerLayout : public ::testing::TestWithParam<Layout> {};

TEST_P(SamplerLayout, RanksAreDisjointAndCoverTheGlobalBatch) {
  const auto [world_size, accumulation] = GetParam();
  const int64_t micro_batch = 2, global_batch = micro_batch * accumulation * world_size, seq_len = 16;
  const auto source = make_synthetic_source(256, 1);
  // The global batch must not depend on the layout: compare with one rank doing it all in one micro-step.
  const Sampler reference(*source, seq_len, global_batch, global_batch, 1, 0, 1, /*seed=*/9);
  std::set<int64_t> seen_over_steps;
  for (int64_t step = 0; step < 4; ++step) {
    const auto expected = reference.sequence_indices(step, 0, 0);
    std::multiset<int64_t> union_of_ranks;
    for (int rank = 0; rank < world_size; ++rank) {
      const Sampler sampler(*source, seq_len, global_batch, micro_batch, accumulation, rank, world_size, 9);
      for (int64_t m = 0; m < accumulation; ++m) {
        const auto indices = sampler.sequence_indices(step, rank, m);
        ASSERT_EQ(static_cast<int64_t>(indices.size()), micro_batch);
        union_of_ranks.insert(indices.begin(), indices.end());
        // The batch holds exactly those sequences.
        const Batch batch = sampler.batch(step, m);
        for (int64_t row = 0; row < micro_batch; ++row) {
          const auto tokens = sequence_of(*source, indices[row], seq_len);
          for (int64_t t = 0; t < seq_len; ++t) ASSERT_EQ(batch.inputs[row][t].item<int64_t>(), tokens[t]);
        }
      }
    }
    EXPECT_EQ(union_of_ranks, std::multiset<int64_t>(expected.begin(), expected.end()));
    EXPECT_EQ(std::set<int64_t>(union_of_ranks.begin(), union_of_ranks.end()).size(), union_of_ranks.size())
        << "a sequence appears twice in step " << step;
    seen_over_steps.insert(union_of_ranks.begin(), union_of_ranks.end());
  }
  EXPECT_EQ(static_cast<int64_t>(seen_over_steps.size()), 4 * global_batch) << "steps reuse sequences";
}

INSTANTIATE_TEST_SUITE_P(SamplerLayouts, SamplerLayout,
                         ::testing::Values(Layout{1, 1}, Layout{1, 2}, Layout{2, 1}, Layout{2, 2}, Layout{4, 1},
                                           Layout{4, 2}),
                         [](const auto& info) {
                           return "world" + std::to_string(info.param.world_size) + "_accum" +
                                  std::to_string(info.param.accumulation);
                         });

TEST(SamplerTest, ShapesDtypeAndShiftByOne) {
  const auto source = make_synthetic_source(256, 1);
  const Sampler sampler(*source, 32, 8, 4, 1, 1, 2, 5);
  const Batch batch = sampler.batch(3, 0);
  EXPECT_EQ(batch.inputs.sizes(), (at::IntArrayRef{4, 32}));
  EXPECT_EQ(batch.targets.sizes(), (at::IntArrayRef{4, 32}));
  EXPECT_EQ(batch.inputs.scalar_type(), at::kLong);
  EXPECT_EQ(batch.targets.scalar_type(), at::kLong);
  EXPECT_TRUE(batch.inputs.device().is_cpu());
  const auto indices = sampler.sequence_indices(3, 1, 0);
  for (int64_t row = 0; row < 4; ++row) {
    const auto tokens = sequence_of(*source, indices[row], 32);
    for (int64_t t = 0; t < 32; ++t) {
      ASSERT_EQ(batch.inputs[row][t].item<int64_t>(), tokens[t]);
      ASSERT_EQ(batch.targets[row][t].item<int64_t>(), tokens[t + 1]);
    }
    // Within a row, targets[t] == inputs[t + 1].
    EXPECT_TRUE(at::equal(batch.targets[row].slice(0, 0, 31), batch.inputs[row].slice(0, 1, 32)));
  }
}

TEST(SamplerTest, DeterministicAndSeeded) {
  const auto source = make_synthetic_source(256, 1);
  const Sampler a(*source, 16, 8, 2, 2, 1, 2, 5);
  const Sampler b(*source, 16, 8, 2, 2, 1, 2, 5);
  const Sampler other_seed(*source, 16, 8, 2, 2, 1, 2, 6);
  for (int64_t step = 0; step < 3; ++step) {
    for (int64_t m = 0; m < 2; ++m) {
      EXPECT_TRUE(at::equal(a.batch(step, m).inputs, b.batch(step, m).inputs));
      EXPECT_TRUE(at::equal(a.batch(step, m).targets, b.batch(step, m).targets));
    }
    EXPECT_NE(a.sequence_indices(step, 1, 0), other_seed.sequence_indices(step, 1, 0));
  }
  // Shuffled: consecutive slots are not consecutive sequence numbers.
  const auto indices = a.sequence_indices(0, 0, 0);
  EXPECT_NE(indices[1], indices[0] + 1);
}

TEST(SamplerTest, ResumeIsJustTheStepNumber) {
  const auto source = make_synthetic_source(256, 1);
  const Sampler long_running(*source, 16, 8, 4, 1, 0, 2, 5);
  for (int64_t step = 0; step < 5; ++step) (void)long_running.batch(step, 0);
  const Batch after_others = long_running.batch(5, 0);
  const Sampler fresh(*source, 16, 8, 4, 1, 0, 2, 5);
  const Batch resumed = fresh.batch(5, 0);
  EXPECT_TRUE(at::equal(after_others.inputs, resumed.inputs));
  EXPECT_TRUE(at::equal(after_others.targets, resumed.targets));
}

TEST(SamplerTest, MaskedTargetsAreIgnoredAndCounted) {
  const int64_t seq_len = 24, mask_token = 1, step = 2;
  const auto source = make_synthetic_source(4, 7);  // tiny vocab: the mask token is frequent
  const int world_size = 2;
  const int64_t accumulation = 2, micro_batch = 3, global_batch = micro_batch * accumulation * world_size;
  int64_t kept_targets = 0, ignored_targets = 0;
  std::vector<int64_t> counts_seen_by_rank;
  for (int rank = 0; rank < world_size; ++rank) {
    const Sampler sampler(*source, seq_len, global_batch, micro_batch, accumulation, rank, world_size, 5, mask_token);
    const Sampler unmasked(*source, seq_len, global_batch, micro_batch, accumulation, rank, world_size, 5);
    for (int64_t m = 0; m < accumulation; ++m) {
      const Batch batch = sampler.batch(step, m);
      const Batch plain = unmasked.batch(step, m);
      EXPECT_TRUE(at::equal(batch.inputs, plain.inputs)) << "inputs are never masked";
      EXPECT_TRUE(at::equal(batch.targets.eq(kIgnoreIndex), plain.targets.eq(mask_token)));
      EXPECT_EQ(batch.targets.eq(mask_token).sum().item<int64_t>(), 0);
      ignored_targets += batch.targets.eq(kIgnoreIndex).sum().item<int64_t>();
      kept_targets += batch.targets.ne(kIgnoreIndex).sum().item<int64_t>();
    }
    counts_seen_by_rank.push_back(sampler.global_target_count(step));
  }
  EXPECT_GT(ignored_targets, 0);
  EXPECT_EQ(kept_targets + ignored_targets, global_batch * seq_len);
  for (int64_t count : counts_seen_by_rank) EXPECT_EQ(count, kept_targets) << "every rank agrees on the denominator";
}

TEST(SamplerTest, UnmaskedCountIsTheWholeGlobalBatch) {
  const auto source = make_synthetic_source(256, 1);
  const Sampler sampler(*source, 16, 8, 2, 2, 0, 2, 5);
  EXPECT_EQ(sampler.global_target_count(0), 8 * 16);
  EXPECT_EQ(sampler.global_target_count(1000), 8 * 16);
}

TEST(SamplerTest, RejectsInconsistentLayout) {
  const auto source = make_synthetic_source(256, 1);
  try {
    Sampler(*source, 16, 8, 4, 1, 0, 4, 5);
    FAIL() << "no error";
  } catch (const DataError& error) {
    EXPECT_NE(std::string(error.what()).find("global_batch(8) != micro_batch(4) * accumulation(1) * dp_size(4)"),
              std::string::npos)
        << error.what();
  }
  EXPECT_THROW(Sampler(*source, 16, 8, 4, 1, 2, 2, 5), DataError);  // dp rank outside the data-parallel group
  EXPECT_THROW(Sampler(*source, 0, 8, 4, 2, 0, 1, 5), DataError);   // seq_len 0
  const Sampler sampler(*source, 16, 8, 4, 1, 0, 2, 5);
  EXPECT_THROW((void)sampler.sequence_indices(0, 0, 1), DataError);  // micro-step beyond accumulation
}

}  // namespace
}  // namespace dtlab
