// atomic_file_test.cpp: the one atomic writer (lab/atomic_file.hpp): a file is replaced whole or not at all, the
// temporary is never left behind, and failures name the file and the system's reason.
#include "lab/atomic_file.hpp"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

namespace dtlab {
namespace {

namespace fs = std::filesystem;

fs::path fresh_dir(const std::string& name) {
  const fs::path dir = fs::path(::testing::TempDir()) / ("dtlab_atomic_" + name);
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

std::string read_all(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

TEST(AtomicFile, ReplacesTheFileWholeAndLeavesNoTemporary) {
  const fs::path file = fresh_dir("replace") / "result.json";
  std::ofstream(file) << "the old contents";
  write_file_atomic(file.string(), "the new contents\n");
  EXPECT_EQ(read_all(file), "the new contents\n");
  EXPECT_FALSE(fs::exists(file.string() + ".tmp"));
}

TEST(AtomicFile, StreamsManyWritesAndBinaryBytes) {
  const fs::path file = fresh_dir("stream") / "shard.bin";
  AtomicFile out(file.string());
  const std::string zeros(3, '\0'), big(5 << 20, 'x');
  out.write(zeros.data(), 3);
  out.write(big.data(), static_cast<int64_t>(big.size()));
  EXPECT_FALSE(fs::exists(file)) << "nothing at the final name before commit";
  out.commit();
  EXPECT_EQ(read_all(file), zeros + big);
}

TEST(AtomicFile, WithoutCommitTheOldFileStaysAndTheTemporaryGoes) {
  const fs::path file = fresh_dir("abandon") / "metadata.json";
  std::ofstream(file) << "complete";
  try {
    AtomicFile out(file.string());
    out.write("half", 4);
    throw std::runtime_error("a crash on the way");
  } catch (const std::runtime_error&) {
  }
  EXPECT_EQ(read_all(file), "complete");
  EXPECT_FALSE(fs::exists(file.string() + ".tmp"));
}

TEST(AtomicFile, FailuresNameTheFileAndTheReason) {
  const fs::path missing = fresh_dir("errors") / "no_such_dir" / "x.json";
  try {
    write_file_atomic(missing.string(), "x");
    FAIL() << "wrote into a directory that does not exist";
  } catch (const AtomicFileError& e) {
    EXPECT_EQ(std::string(e.what()), missing.string() + ".tmp: cannot create: No such file or directory");
  }
  AtomicFile out((fresh_dir("twice") / "y").string());
  out.commit();
  EXPECT_THROW(out.commit(), AtomicFileError);
  EXPECT_THROW(out.write("z", 1), AtomicFileError);
}

TEST(AtomicFile, ARenameOntoADirectoryFailsAndLeavesItAlone) {
  const fs::path dir = fresh_dir("onto_dir") / "taken";
  fs::create_directories(dir / "inside");
  try {
    write_file_atomic(dir.string(), "x");
    FAIL() << "replaced a non-empty directory";
  } catch (const AtomicFileError& e) {
    EXPECT_NE(std::string(e.what()).find(dir.string() + ": rename from " + dir.string() + ".tmp failed: "),
              std::string::npos)
        << e.what();
  }
  EXPECT_TRUE(fs::is_directory(dir / "inside"));
  EXPECT_FALSE(fs::exists(dir.string() + ".tmp"));
}

}  // namespace
}  // namespace dtlab
