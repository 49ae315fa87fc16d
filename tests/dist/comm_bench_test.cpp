// comm_bench_test.cpp: `dtlab comm-bench` on real processes — its table, footer, point-to-point and overlap lines by
// pattern (not bytes), its JSON keys, #wrong = 0 for every op/algorithm (float32 and bfloat16, 2 and 3 ranks),
// and `--model` with a model fitted (analysis/cost/fit.hpp) from the run's own JSON.
// Runs from a plain environment (comm-bench re-launches itself as 2 ranks, as `dtlab calibrate` will use it) and
// under `dtlab launch -n 3` (a rank of a job: no re-launch, every line prefixed by the launcher).
#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "analysis/cost/fit.hpp"
#include "lab/launch/cluster.hpp"
#include "tests/strategy/job.hpp"

namespace {

namespace fs = std::filesystem;
using dtlab::testing::run_job;

const std::string kDtlab = std::string(DTLAB_BINARY_DIR) + "/bin/dtlab";
const std::set<std::string> kSeries = {"all_reduce/backend", "all_reduce/ring",        "all_gather/backend",
                                       "all_gather/ring",    "reduce_scatter/backend", "reduce_scatter/ring",
                                       "broadcast/backend",  "all_to_all/backend"};

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

int count_matching(const std::vector<std::string>& lines, const std::string& pattern) {
  const std::regex re(pattern);
  int n = 0;
  for (const auto& line : lines) n += std::regex_match(line, re) ? 1 : 0;
  return n;
}

class CommBench : public ::testing::Test {
 protected:
  void SetUp() override {
    char pattern[] = "/tmp/dtlab_comm_bench_test_XXXXXX";
    ASSERT_NE(mkdtemp(pattern), nullptr);
    dir_ = pattern;
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  static nlohmann::json read_json(const fs::path& path) {
    std::ifstream in(path);
    return nlohmann::json::parse(in);
  }
  fs::path dir_;
};

// Rows: 1K, 4K, 16K, 64K for each of the 8 op/algorithm series.
TEST_F(CommBench, GoldenTableFooterAndJson) {
  const fs::path json = dir_ / "bench.json";
  const auto job =
      run_job({kDtlab, "comm-bench", "-b", "1K", "-e", "64K", "-n", "3", "-w", "1", "--json", json.string()}, 120);
  ASSERT_FALSE(job.timed_out) << job.output;
  ASSERT_EQ(job.exit_code, 0) << job.output;
  const auto lines = lines_of(job.output);

  // The report comes unprefixed (rank 0 writes to the shell's stdout), in this order.
  EXPECT_EQ(count_matching(lines, R"(# dtlab comm-bench: gloo, 2 ranks on \S+, float32, 1024\.\.65536 B \(x4\), )"
                                  R"(3 iterations after 1 warm-up, check on)"),
            1)
      << job.output;
  EXPECT_EQ(count_matching(lines, R"(# load average \d+\.\d\d on \d+ cores at start)"), 1) << job.output;
  for (const auto& series : kSeries)
    EXPECT_EQ(count_matching(lines, "# " + series + ": .+"), 1) << series << "\n" << job.output;
  EXPECT_EQ(count_matching(lines, R"(#\s+out-of-place\s+in-place)"), 8) << job.output;
  EXPECT_EQ(count_matching(lines, R"(#\s+size\s+count\s+type\s+redop\s+root(\s+time\s+algbw\s+busbw\s+#wrong){2})"), 8)
      << job.output;
  EXPECT_EQ(count_matching(lines, R"(#\s+\(B\)\s+\(elements\)(\s+\(us\)\s+\(GB/s\)\s+\(GB/s\)){2}\s*)"), 8)
      << job.output;
  const std::string figure = R"(\s+\d+\.\d\s+\d+\.\d{3}\s+\d+\.\d{3}\s+0)";
  EXPECT_EQ(count_matching(lines, R"(\s+(1024|4096|16384|65536)\s+\d+\s+float32\s+sum\s+-1)" + figure + figure), 16)
      << job.output;  // all_reduce and reduce_scatter
  EXPECT_EQ(count_matching(lines, R"(\s+(1024|4096|16384|65536)\s+\d+\s+float32\s+none\s+-1)" + figure + figure), 12)
      << job.output;  // all_gather (two algorithms) and all_to_all
  EXPECT_EQ(count_matching(lines, R"(\s+(1024|4096|16384|65536)\s+\d+\s+float32\s+none\s+0)" + figure + figure), 4)
      << job.output;  // broadcast from root 0
  EXPECT_EQ(count_matching(lines, R"(# Wrong elements       : 0 OK)"), 1) << job.output;
  EXPECT_EQ(count_matching(lines, R"(# Avg bus bandwidth    : \d+\.\d{4})"), 1) << job.output;
  EXPECT_EQ(count_matching(lines, R"(# Point-to-point       : \d+\.\d{4} GB/s per direction \(Gloo send/recv, )"
                                  R"(ranks 0 <-> 1, both directions at once, 64 MiB, \d+\.\d us\))"),
            1)
      << job.output;
  EXPECT_EQ(count_matching(
                lines, R"(# Overlap              : all_reduce 4 MiB alone \d+ us, \d+ GEMM\(s\) 256x256 alone )"
                       R"(\d+ us, both at once \d+ us -> (compute hides \d+% of the collective|overlapping costs \d+% )"
                       R"(more than taking turns))"),
            1)
      << job.output;
  // 64 MiB was not in the sweep, so no percentage line.
  EXPECT_EQ(count_matching(lines, R"(# all_reduce busbw at 64 MiB.*)"), 0) << job.output;
  EXPECT_EQ(count_matching(lines, R"(\[rank 0\] #.*)"), 0) << job.output;

  const nlohmann::json doc = read_json(json);
  for (const char* key :
       {"tool", "backend", "world_size", "host", "dtype", "iters", "warmup", "results", "avg_busbw_GBps", "p2p"})
    EXPECT_TRUE(doc.contains(key)) << key;
  EXPECT_EQ(doc["tool"], "dtlab comm-bench");
  EXPECT_EQ(doc["backend"], "gloo");
  EXPECT_EQ(doc["world_size"], 2);
  EXPECT_EQ(doc["dtype"], "float32");
  EXPECT_EQ(doc["iters"], 3);
  EXPECT_EQ(doc["warmup"], 1);
  EXPECT_EQ(doc["p2p"]["bytes"], 64 << 20);
  EXPECT_GT(doc["p2p"]["time_us"].get<double>(), 0);
  EXPECT_GT(doc["p2p"]["GBps"].get<double>(), 0);
  // The overlap line: its parts measured, and the fraction the one its own figures give (clamped to [-1, 1]).
  const nlohmann::json& overlap = doc["overlap"];
  EXPECT_EQ(overlap["bytes"], 4 << 20);
  EXPECT_GE(overlap["gemms"].get<int>(), 1);
  const double comm = overlap["comm_us"], compute = overlap["compute_us"], together = overlap["together_us"];
  EXPECT_GT(comm, 0);
  EXPECT_GT(compute, 0);
  EXPECT_GT(together, 0);
  const double hidden = std::clamp((comm + compute - together) / std::min(comm, compute), -1.0, 1.0);
  EXPECT_DOUBLE_EQ(overlap["hidden_fraction"].get<double>(), hidden);
  ASSERT_EQ(doc["results"].size(), 32u);
  std::map<std::string, int> rows_per_series;
  for (const auto& row : doc["results"]) {
    for (const char* key : {"op", "algorithm", "bytes", "count", "type", "out_of_place", "in_place"})
      ASSERT_TRUE(row.contains(key)) << key << " in " << row.dump();
    const std::string series = row["op"].get<std::string>() + "/" + row["algorithm"].get<std::string>();
    ++rows_per_series[series];
    EXPECT_EQ(row["bytes"].get<int64_t>(), row["count"].get<int64_t>() * 4) << row.dump();
    const double factor = row["op"] == "all_reduce" ? 1.0 : row["op"] == "broadcast" ? 1.0 : 0.5;  // n = 2
    for (const char* placement : {"out_of_place", "in_place"}) {
      const auto& f = row[placement];
      for (const char* key : {"time_us", "algbw_GBps", "busbw_GBps", "wrong"})
        ASSERT_TRUE(f.contains(key)) << key << " in " << row.dump();
      EXPECT_EQ(f["wrong"], 0) << series << " " << placement;
      EXPECT_NEAR(f["algbw_GBps"].get<double>(), row["bytes"].get<double>() / f["time_us"].get<double>() * 1e-3, 1e-9);
      EXPECT_NEAR(f["busbw_GBps"].get<double>(), f["algbw_GBps"].get<double>() * factor, 1e-9);
    }
  }
  for (const auto& series : kSeries) EXPECT_EQ(rows_per_series[series], 4) << series;

  // What `dtlab calibrate` does with it: the fit accepts the document, and --model prints the accuracy line.
  const dtlab::analysis::CommModel model = dtlab::analysis::fit_comm_model(doc);
  for (const auto& series : kSeries) EXPECT_EQ(model.ops.count(series), 1u) << series;
  const fs::path model_path = dir_ / "model.json";
  std::ofstream(model_path) << model.to_json().dump(2);
  const auto with_model = run_job({kDtlab, "comm-bench", "-b", "1K", "-e", "16K", "-n", "2", "-w", "0", "--op",
                                   "all_gather", "--model", model_path.string()},
                                  120);
  ASSERT_EQ(with_model.exit_code, 0) << with_model.output;
  const auto model_lines = lines_of(with_model.output);
  EXPECT_EQ(count_matching(model_lines, R"(\s+(1024|4096|16384)\s+\d+\s+float32\s+none\s+-1)" + figure + figure +
                                            R"(\s+\d+\.\d\s+-?\d+\.\d)"),
            6)
      << with_model.output;
  // The model column is the fitted model's prediction for the row, and err% compares it with the measured
  // out-of-place time: checked against the model file (a timing bound would be noise at 1-16 KiB on loopback).
  const std::regex row_re(R"(\s+(\d+)\s+\d+\s+float32\s+none\s+-1\s+(\d+\.\d)\s.*\s(\d+\.\d)\s+(-?\d+\.\d)\s*)");
  std::string algorithm;
  int rows = 0;
  for (const auto& line : model_lines) {
    if (line.rfind("# all_gather/", 0) == 0)
      algorithm = line.substr(std::string("# all_gather/").size(), line.find(':') - 13);
    std::smatch m;
    if (!std::regex_match(line, m, row_re)) continue;
    ASSERT_TRUE(algorithm == "backend" || algorithm == "ring") << line;
    const double predicted = dtlab::analysis::collective_time_us(model, "all_gather", algorithm, std::stoll(m[1]), 2);
    EXPECT_NEAR(std::stod(m[3]), predicted, 0.051) << line;
    const double measured = std::stod(m[2]), model_us = std::stod(m[3]);
    // The three columns are printed to 0.1 (each up to 0.05 off): the bound is that rounding carried through
    // err = (model - measured) / measured * 100, which matters when the model is far above a small time.
    const double rounding = 0.05 + 100.0 * 0.05 / measured + 100.0 * model_us * 0.05 / (measured * measured);
    EXPECT_NEAR(std::stod(m[4]), (model_us - measured) / measured * 100.0, rounding + 1e-9) << line;
    ++rows;
  }
  EXPECT_EQ(rows, 6) << with_model.output;
  EXPECT_EQ(count_matching(model_lines, R"(# model: median \|error\| \d+\.\d% over 6 rows \(1 KiB\.\.256 MiB\))"), 1)
      << with_model.output;
}

// #wrong is 0 for every op/algorithm in bfloat16 too (the pattern's sums are exact there).
// The series of a comm-bench JSON document, every row of which has no wrong element in either placement.
std::set<std::string> series_with_nothing_wrong(const nlohmann::json& doc) {
  std::set<std::string> seen;
  for (const auto& row : doc["results"]) {
    const std::string series = row["op"].get<std::string>() + "/" + row["algorithm"].get<std::string>();
    seen.insert(series);
    EXPECT_EQ(row["out_of_place"]["wrong"], 0) << series << " " << row["bytes"];
    EXPECT_EQ(row["in_place"]["wrong"], 0) << series << " " << row["bytes"];
  }
  return seen;
}

TEST_F(CommBench, NothingWrongInBfloat16) {
  const fs::path json = dir_ / "bf16.json";
  const auto job = run_job({kDtlab, "comm-bench", "-b", "1K", "-e", "4K", "-n", "1", "-w", "0", "--dtype", "bfloat16",
                            "--json", json.string()},
                           120);
  ASSERT_EQ(job.exit_code, 0) << job.output;
  const nlohmann::json doc = read_json(json);
  for (const auto& row : doc["results"]) {
    EXPECT_EQ(row["type"], "bfloat16");
    EXPECT_EQ(row["bytes"].get<int64_t>(), row["count"].get<int64_t>() * 2);
  }
  EXPECT_EQ(series_with_nothing_wrong(doc), kSeries);
}

// The dim-wise variants run only when named (the GoldenTable's `--op all` has exactly the eight flat series), in
// float32 and bfloat16 and over 3 ranks, with nothing wrong: the matrix rows (8, or fewer where a rank's share is
// odd) and each rank's columns land where the collective along dim 1 puts them; bus bandwidth as the flat ones.
TEST_F(CommBench, TheDimWiseVariantsRunWhenNamedWithNothingWrong) {
  for (const char* op : {"all_gather_dim1", "reduce_scatter_dim1"})
    for (const std::string& dtype : {"float32", "bfloat16"}) {
      const fs::path json = dir_ / (std::string(op) + dtype + ".json");
      const auto job = run_job({kDtlab, "launch", "-n",      "3",   "--timeout", "100", kDtlab,   "comm-bench",
                                "--op", op,       "--dtype", dtype, "-b",        "1K",  "-e",     "64K",
                                "-f",   "8",      "-n",      "2",   "-w",        "0",   "--json", json.string()},
                               120);
      ASSERT_EQ(job.exit_code, 0) << job.output;
      const nlohmann::json doc = read_json(json);
      for (const auto& row : doc["results"]) EXPECT_GT(row["out_of_place"]["busbw_GBps"].get<double>(), 0) << row;
      EXPECT_EQ(series_with_nothing_wrong(doc),
                (std::set<std::string>{std::string(op) + "/backend", std::string(op) + "/ring"}))
          << job.output;
      EXPECT_EQ(doc["results"].size(), 6u) << job.output;  // 1K, 8K, 64K for each algorithm
    }
}

// The pipeline's batched point-to-point (a receive from the previous rank and a send to the next, posted together)
// runs when named, over 3 ranks so that the previous and the next rank differ: each rank holds the previous rank's
// pattern, and each byte crosses one link (bus bandwidth = algorithm bandwidth).
TEST_F(CommBench, SendRecvRunsWhenNamedWithNothingWrong) {
  const fs::path json = dir_ / "send_recv.json";
  const auto job = run_job(
      {kDtlab, "launch", "-n",  "3",  "--timeout", "100", kDtlab, "comm-bench", "--op", "send_recv", "-b",
       "1K",   "-e",     "64K", "-f", "8",         "-n",  "2",    "-w",         "0",    "--json",    json.string()},
      120);
  ASSERT_EQ(job.exit_code, 0) << job.output;
  const nlohmann::json doc = read_json(json);
  EXPECT_EQ(series_with_nothing_wrong(doc), (std::set<std::string>{"send_recv/backend"})) << job.output;
  ASSERT_EQ(doc["results"].size(), 3u) << job.output;  // 1K, 8K, 64K
  for (const auto& row : doc["results"])
    for (const char* placement : {"out_of_place", "in_place"}) {
      const auto& figures = row[placement];
      EXPECT_GT(figures["busbw_GBps"].get<double>(), 0) << row;
      EXPECT_DOUBLE_EQ(figures["busbw_GBps"].get<double>(), figures["algbw_GBps"].get<double>()) << row;
    }
}

// Inside a job of 3 ranks (odd: chunks and factors differ from 2): no re-launch, the launcher prefixes lines.
TEST_F(CommBench, RankOfAThreeRankJob) {
  const auto job = run_job({kDtlab, "launch", "-n", "3", "--timeout", "100", kDtlab, "comm-bench", "-b", "1K", "-e",
                            "4K", "-n", "2", "-w", "0", "--check", "1"},
                           120);
  ASSERT_EQ(job.exit_code, 0) << job.output;
  const auto lines = lines_of(job.output);
  EXPECT_EQ(count_matching(lines, R"(\[rank 0\] # dtlab comm-bench: gloo, 3 ranks on .*)"), 1) << job.output;
  // 1 KiB = 256 floats -> 255 (divisible by 3) -> 1020 B; 4 KiB -> 1023 floats -> 4092 B.
  EXPECT_EQ(count_matching(lines, R"(\[rank 0\]\s+(1020|4092)\s+(255|1023)\s+float32.*)"), 16) << job.output;
  EXPECT_EQ(count_matching(lines, R"(\[rank 0\] # Wrong elements       : 0 OK)"), 1) << job.output;
  EXPECT_EQ(count_matching(lines, R"(\[rank [12]\] #.*)"), 0) << "only rank 0 reports\n" << job.output;
}

// --check 0 skips the pass: N/A in the table, null in the JSON. --repeats says how time was taken.
TEST_F(CommBench, CheckOffSaysNotChecked) {
  const fs::path json = dir_ / "nocheck.json";
  const auto job = run_job({kDtlab, "comm-bench", "-b", "1K", "-e", "1K", "-n", "1", "-w", "0", "--op", "broadcast",
                            "--check", "0", "--repeats", "2", "--json", json.string()},
                           120);
  ASSERT_EQ(job.exit_code, 0) << job.output;
  const auto lines = lines_of(job.output);
  EXPECT_EQ(count_matching(lines, R"(\s+1024\s+256\s+float32\s+none\s+0\s+.*N/A\s+.*N/A)"), 1) << job.output;
  EXPECT_EQ(count_matching(lines, R"(# Wrong elements       : not checked \(--check 0\))"), 1) << job.output;
  EXPECT_EQ(count_matching(lines, R"(# time = the smallest of 2 repeats of the timed loop.*)"), 1) << job.output;
  EXPECT_TRUE(read_json(json)["results"][0]["in_place"]["wrong"].is_null());
}

// On an emulated cluster (root or CAP_NET_ADMIN): the cluster line, the inter-node point-to-point figure against the
// set rate, the flat all_reduce against the link bound; the same facts in the JSON. The rate itself is a benchmark
// figure (docs/performance.md), not checked here. --algorithm all includes the hierarchical all-reduce on a cluster
// (and only there: the golden test above runs without it).
TEST_F(CommBench, OnAnEmulatedClusterItReportsTheLinks) {
  std::string why;
  if (!dtlab::can_build_clusters(&why)) GTEST_SKIP() << why;
  const fs::path json = dir_ / "cluster.json";
  const auto job = run_job(
      {kDtlab, "comm-bench", "--nodes", "2", "--ranks", "2", "--inter-link", "4gbit",      "-b",     "64M",
       "-e",   "64M",        "-n",      "1", "-w",      "0", "--op",         "all_reduce", "--json", json.string()},
      240);
  ASSERT_EQ(job.exit_code, 0) << job.output;
  const auto lines = lines_of(job.output);
  EXPECT_EQ(count_matching(lines, R"(# Cluster +: 2 nodes x 2 ranks, inter-node link 4 Gbit/s, intra-node unshaped)"),
            1)
      << job.output;
  EXPECT_EQ(count_matching(lines, R"(# Point-to-point +: .* ranks 0 <-> 1 inside node 0, .*)"), 1) << job.output;
  EXPECT_EQ(
      count_matching(lines,
                     R"(# Inter-node p2p +: .* Mbit/s per direction \(ranks 0 <-> 2, .*\), [0-9.]+% of the set rate)"),
      1)
      << job.output;
  EXPECT_EQ(count_matching(lines, R"(# all_reduce busbw at 64 MiB = [0-9.]+% of inter-node point-to-point .*)"), 1)
      << job.output;
  EXPECT_EQ(count_matching(lines, R"(# Link bound +: all_reduce 64 MiB \((backend|ring), in-place\) .*x the bound .*)"),
            2)
      << job.output;
  EXPECT_EQ(
      count_matching(
          lines, R"(# Link bound +: all_reduce 64 MiB \(hierarchical, in-place\) .*x the bound .*; target <= 1.25x)"),
      1)
      << job.output;
  EXPECT_EQ(count_matching(lines, R"(# all_reduce/hierarchical: lab ring reduce-scatter in the node .*)"), 1)
      << job.output;
  const nlohmann::json doc = read_json(json);
  EXPECT_EQ(doc["cluster"]["nodes"], 2);
  EXPECT_EQ(doc["cluster"]["ranks_per_node"], 2);
  EXPECT_EQ(doc["cluster"]["inter_link_bps"], 4e9);
  EXPECT_EQ(doc["p2p_inter"]["peer"], 2);
  ASSERT_EQ(doc["link_bounds"].size(), 3u);  // backend, ring, hierarchical
  // 64 MiB across 2 nodes: each node sends 2(M-1)/M = 1 buffer at 4 Gbit/s.
  EXPECT_NEAR(doc["link_bounds"][0]["bound_us"].get<double>(), 67108864 * 8 / 4e9 * 1e6, 1.0);
}

TEST_F(CommBench, BadFlagsAreNamed) {
  auto job = run_job({kDtlab, "comm-bench", "--op", "all_to_one"}, 30);
  EXPECT_NE(job.exit_code, 0);
  EXPECT_NE(job.output.find("--op all_to_one is not one of"), std::string::npos) << job.output;
  job = run_job({kDtlab, "comm-bench", "-b", "12Q"}, 30);
  EXPECT_NE(job.exit_code, 0);
  EXPECT_NE(job.output.find("'12Q'"), std::string::npos) << job.output;
  job = run_job({kDtlab, "comm-bench", "--op", "broadcast", "--algorithm", "ring"}, 30);
  EXPECT_NE(job.exit_code, 0);
  EXPECT_NE(job.output.find("broadcast has only the backend algorithm"), std::string::npos) << job.output;
  job = run_job({kDtlab, "comm-bench", "--op", "all_reduce", "--algorithm", "hierarchical"}, 30);
  EXPECT_NE(job.exit_code, 0);
  EXPECT_NE(job.output.find("--algorithm hierarchical needs a job across nodes"), std::string::npos) << job.output;
  job = run_job({kDtlab, "comm-bench", "--device", "tpu"}, 30);
  EXPECT_NE(job.exit_code, 0);
  EXPECT_NE(job.output.find("--device tpu is not one of cpu | cuda"), std::string::npos) << job.output;
  job = run_job({kDtlab, "comm-bench", "--backend", "mpi"}, 30);
  EXPECT_NE(job.exit_code, 0);
  EXPECT_NE(job.output.find("--backend mpi is not one of auto | gloo | nccl"), std::string::npos) << job.output;
  // Host buffers cannot go over NCCL; and this machine has no GPU (GPU machines run tests/gpu/gpu_check.sh).
  job = run_job({kDtlab, "comm-bench", "--backend", "nccl", "-b", "1K", "-e", "1K"}, 60);
  EXPECT_NE(job.exit_code, 0);
  EXPECT_NE(job.output.find("--backend nccl needs --device cuda"), std::string::npos) << job.output;
  job = run_job({kDtlab, "comm-bench", "--device", "cuda", "-b", "1K", "-e", "1K"}, 60);
  EXPECT_NE(job.exit_code, 0);
  EXPECT_NE(job.output.find("--device cuda needs the cuda configuration (make build-cuda) and a visible GPU"),
            std::string::npos)
      << job.output;
}

}  // namespace
