// trace_test.cpp: the Chrome/Perfetto trace writer -- valid events with the keys viewers and HTA need, gzip round
// trip, two-rank merge, and errors that name the file.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "lab/instrument/clock.hpp"
#include "lab/instrument/trace.hpp"

namespace dtlab {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

fs::path scratch_dir(const std::string& name) {
  const fs::path dir = fs::temp_directory_path() / ("dtlab_trace_test_" + name + "_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

// A rank's trace as the trainer writes it: lanes, steps with phases, a collective, a memory counter.
void record_sample(TraceWriter& w, double t0) {
  w.thread_name(trace_tid::kMain, "main");
  w.thread_name(trace_tid::kCommGroupBase, "comm world");
  for (int step = 1; step <= 2; ++step) {
    const double s = t0 + (step - 1) * 1000.0;
    w.span("ProfilerStep#" + std::to_string(step), trace_cat::kUserAnnotation, trace_tid::kMain, s, 900.0);
    w.span("forward-compute", trace_cat::kUserAnnotation, trace_tid::kMain, s + 10, 300.0);
    w.span("backward-compute", trace_cat::kUserAnnotation, trace_tid::kMain, s + 310, 400.0);
    w.span("all_reduce", trace_cat::kCpuOp, trace_tid::kCommGroupBase, s + 500, 300.0,
           {{"bytes", 4096}, {"algorithm", "ring"}});
    w.counter("memory", s + 900, {{"allocated_bytes", 1024 * step}});
  }
  w.instant("checkpoint", trace_tid::kMain, t0 + 1950.0);
}

json sample_trace(int rank, int world_size, double t0) {
  TraceWriter w(rank, world_size, "gloo");
  record_sample(w, t0);
  return w.to_json();
}

// Every event has what the Trace Event Format requires for its phase.
void expect_valid_events(const json& doc, const std::set<int>& pids) {
  ASSERT_TRUE(doc["traceEvents"].is_array());
  for (const json& e : doc["traceEvents"]) {
    SCOPED_TRACE(e.dump());
    for (const char* key : {"ph", "name", "pid", "tid", "ts"}) EXPECT_TRUE(e.contains(key)) << key;
    EXPECT_TRUE(e["ts"].is_number());
    EXPECT_TRUE(pids.count(e["pid"].get<int>()));
    const std::string ph = e["ph"];
    EXPECT_TRUE(ph == "X" || ph == "M" || ph == "C" || ph == "i") << ph;
    if (ph == "X") {
      EXPECT_TRUE(e["cat"].is_string());
      EXPECT_TRUE(e["dur"].is_number());
      EXPECT_GE(e["dur"].get<double>(), 0.0);
    }
    if (ph == "M" || ph == "C") {
      EXPECT_TRUE(e["args"].is_object());
    }
  }
}

int count_named(const json& doc, const std::string& name) {
  int n = 0;
  for (const json& e : doc["traceEvents"]) n += e["name"] == name;
  return n;
}

TEST(TraceWriter, DocumentHasKinetoKeysAndValidEvents) {
  TraceWriter w(1, 2, "gloo");
  record_sample(w, 5000.0);
  const json doc = w.to_json();
  EXPECT_EQ(doc["schemaVersion"], 1);
  EXPECT_EQ(doc["distributedInfo"], json({{"backend", "gloo"}, {"rank", 1}, {"world_size", 2}}));
  EXPECT_TRUE(doc["deviceProperties"].is_array());
  EXPECT_EQ(doc["displayTimeUnit"], "ms");
  EXPECT_TRUE(doc["baseTimeNanoseconds"].is_number_integer());
  expect_valid_events(doc, {1});

  // process name, one thread name per lane, steps named as the PyTorch profiler names them
  const json& events = doc["traceEvents"];
  EXPECT_EQ(events[0]["ph"], "M");
  bool named_process = false;
  for (const json& e : events)
    named_process = named_process || (e["name"] == "process_name" && e["args"]["name"] == "rank 1");
  EXPECT_TRUE(named_process);
  EXPECT_EQ(count_named(doc, "thread_name"), 2);
  EXPECT_EQ(count_named(doc, "ProfilerStep#1"), 1);
  EXPECT_EQ(count_named(doc, "ProfilerStep#2"), 1);
  EXPECT_EQ(count_named(doc, "memory"), 2);
  EXPECT_EQ(w.event_count(), 2u * 2u + 2u * 5u + 1u);  // thread_name + sort index per lane, 5 per step, instant

  // after the metadata, sorted by ts
  double last = -1;
  for (const json& e : events) {
    if (e["ph"] == "M") continue;
    EXPECT_GE(e["ts"].get<double>(), last);
    last = e["ts"].get<double>();
  }
}

TEST(TraceWriter, BaseTimeMapsLabClockToUnixTime) {
  const TraceWriter w(0, 1, "none");
  const double now_us = lab_clock_us();
  const int64_t unix_now_ns =
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::system_clock::now().time_since_epoch()).count();
  const int64_t base_ns = w.to_json()["baseTimeNanoseconds"].get<int64_t>();
  // HTA: unix_ns = ts * 1000 + baseTimeNanoseconds. One second of slack: no timing assert, only the mapping.
  EXPECT_NEAR(static_cast<double>(base_ns) + now_us * 1000.0, static_cast<double>(unix_now_ns), 1e9);
}

TEST(TraceWriter, ConcurrentWritersLoseNoEvents) {
  TraceWriter w(0, 1, "none");
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&w, t] {
      for (int i = 0; i < 250; ++i) w.span("op", trace_cat::kCpuOp, t, i, 1.0);
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(w.event_count(), 1000u);
  // What a reader sees: every span, 250 per thread, none torn or duplicated.
  const fs::path dir = scratch_dir("concurrent");
  w.write((dir / "trace.json").string());
  std::map<int64_t, std::set<double>> starts_by_tid;
  const json doc = read_trace((dir / "trace.json").string());  // kept alive: the loop walks a reference into it
  for (const auto& e : doc.at("traceEvents"))
    if (e.value("name", "") == "op") starts_by_tid[e.at("tid").get<int64_t>()].insert(e.at("ts").get<double>());
  ASSERT_EQ(starts_by_tid.size(), 4u);
  for (const auto& [tid, starts] : starts_by_tid) EXPECT_EQ(starts.size(), 250u) << "tid " << tid;
}

TEST(TraceWriter, GzipAndPlainRoundTrip) {
  const fs::path dir = scratch_dir("roundtrip");
  TraceWriter w(0, 1, "gloo");
  record_sample(w, 123.456789);
  const std::string gz = (dir / "rank0" / "trace.json.gz").string();  // parent dir created by write()
  const std::string plain = (dir / "trace.json").string();
  w.write(gz);
  w.write(plain);

  std::ifstream raw(gz, std::ios::binary);
  unsigned char magic[2] = {0, 0};
  raw.read(reinterpret_cast<char*>(magic), 2);
  EXPECT_EQ(magic[0], 0x1f);  // gzip magic: the .gz file really is compressed
  EXPECT_EQ(magic[1], 0x8b);
  EXPECT_LT(fs::file_size(gz), fs::file_size(plain));

  EXPECT_EQ(read_trace(gz), w.to_json());
  EXPECT_EQ(read_trace(plain), w.to_json());
  EXPECT_FALSE(fs::exists(gz + ".tmp"));
  fs::remove_all(dir);
}

// HTA reads a file's rank line by line with the pattern "rank":\s+(\d+) (hta/common/trace_file.py) before parsing
// it; compact JSON ("rank":1) does not match, and HTA then takes every file for rank 0.
TEST(TraceWriter, HtasRankPatternFindsTheRankOnTheFirstMatchingLine) {
  const std::regex hta_rank(R"re("rank":\s+(\d+))re");
  for (int rank : {0, 3}) {
    const std::string text = trace_text(sample_trace(rank, 4, 10.0));
    std::istringstream lines(text);
    std::string line;
    std::smatch m;
    bool found = false;
    while (!found && std::getline(lines, line)) found = std::regex_search(line, m, hta_rank);
    ASSERT_TRUE(found) << text.substr(0, 300);
    EXPECT_EQ(std::stoi(m[1].str()), rank);
    EXPECT_NE(line.find("distributedInfo"), std::string::npos) << "the first match must be distributedInfo's";
    EXPECT_EQ(json::parse(text), sample_trace(rank, 4, 10.0));  // the layout changes no value
  }
}

TEST(TraceMerge, TwoRanksBecomeOneDocument) {
  const json t0 = sample_trace(0, 2, 1000.0);
  json t1 = sample_trace(1, 2, 1100.0);
  // rank 1's clock starts 2 µs later in Unix time: its events move 2 µs later in the merged file
  t1["baseTimeNanoseconds"] = t0["baseTimeNanoseconds"].get<int64_t>() + 2000;
  const json merged = merge_traces({t1, t0});  // input order does not matter

  EXPECT_EQ(merged["schemaVersion"], 1);
  EXPECT_EQ(merged["distributedInfo"]["rank"], 0);
  EXPECT_EQ(merged["distributedInfo"]["world_size"], 2);
  EXPECT_EQ(merged["distributedInfo"]["ranks"], json::array({0, 1}));
  EXPECT_EQ(merged["distributedInfo"]["backend"], "gloo");
  EXPECT_EQ(merged["rankInfo"].size(), 2u);
  EXPECT_EQ(merged["baseTimeNanoseconds"], t0["baseTimeNanoseconds"]);
  EXPECT_EQ(merged["traceEvents"].size(), t0["traceEvents"].size() + t1["traceEvents"].size());
  expect_valid_events(merged, {0, 1});

  bool seen_rank1_step = false;
  bool in_metadata = true;
  double last = -1;
  for (const json& e : merged["traceEvents"]) {
    if (e["ph"] == "M") {
      EXPECT_TRUE(in_metadata) << "metadata after timed events";
      continue;
    }
    in_metadata = false;
    EXPECT_GE(e["ts"].get<double>(), last);
    last = e["ts"].get<double>();
    if (e["pid"] == 1 && e["name"] == "ProfilerStep#1") {
      EXPECT_DOUBLE_EQ(e["ts"].get<double>(), 1102.0);
      seen_rank1_step = true;
    }
  }
  EXPECT_TRUE(seen_rank1_step);
  EXPECT_EQ(count_named(merged, "process_name"), 2);
}

TEST(TraceMerge, RejectsDuplicateOrMissingRanks) {
  const json t0 = sample_trace(0, 2, 0);
  EXPECT_THROW(merge_traces({}), TraceError);
  try {
    merge_traces({t0, t0});
    FAIL() << "duplicate rank accepted";
  } catch (const TraceError& e) {
    EXPECT_NE(std::string(e.what()).find("rank 0 appears in more than one input"), std::string::npos) << e.what();
  }
  json no_rank = t0;
  no_rank.erase("distributedInfo");
  EXPECT_THROW(merge_traces({no_rank}), TraceError);
}

TEST(TraceRead, ErrorsNameTheFile) {
  const fs::path dir = scratch_dir("errors");
  const std::string missing = (dir / "nope.json.gz").string();
  const std::string not_json = (dir / "bad.json").string();
  const std::string no_events = (dir / "empty.json").string();
  const std::string truncated = (dir / "cut.json.gz").string();
  std::ofstream(not_json) << "{ this is not json";
  std::ofstream(no_events) << R"({"schemaVersion": 1})";
  write_trace_json(sample_trace(0, 1, 0), truncated);
  fs::resize_file(truncated, fs::file_size(truncated) / 2);

  for (const std::string& path : {missing, not_json, no_events, truncated}) {
    try {
      read_trace(path);
      ADD_FAILURE() << path << " was accepted";
    } catch (const TraceError& e) {
      EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
    }
  }
  EXPECT_THROW(TraceWriter(2, 2, "gloo"), TraceError);  // rank outside [0, world_size)
  fs::remove_all(dir);
}

TEST(TraceMergeFiles, RunDirGivesEveryRankInRankOrder) {
  const fs::path dir = scratch_dir("run");
  for (int r : {10, 2, 0})
    write_trace_json(sample_trace(r, 11, 100.0 * r), (dir / ("rank" + std::to_string(r)) / "trace.json.gz").string());
  fs::create_directories(dir / "rank1");  // a rank dir without a trace (instrument.trace=false) is skipped
  fs::create_directories(dir / "rankings");

  const std::vector<std::string> files = find_trace_files({dir.string()});
  ASSERT_EQ(files.size(), 3u);
  EXPECT_NE(files[0].find("rank0/"), std::string::npos);
  EXPECT_NE(files[1].find("rank2/"), std::string::npos);
  EXPECT_NE(files[2].find("rank10/"), std::string::npos);

  const std::string out = (dir / "merged" / "trace.json.gz").string();
  const std::string line = merge_trace_files({dir.string()}, out);
  EXPECT_NE(line.find("merged 3 ranks"), std::string::npos) << line;
  const json merged = read_trace(out);
  EXPECT_EQ(merged["distributedInfo"]["ranks"], json::array({0, 2, 10}));
  EXPECT_EQ(merged["distributedInfo"]["world_size"], 11);
  fs::remove_all(dir);
}

TEST(TraceMergeFiles, NothingFoundIsAClearError) {
  const fs::path dir = scratch_dir("empty_run");
  fs::create_directories(dir / "rank0");
  for (const std::string& input : {dir.string(), (dir / "missing").string()}) {
    try {
      find_trace_files({input});
      ADD_FAILURE() << input << " was accepted";
    } catch (const TraceError& e) {
      EXPECT_NE(std::string(e.what()).find(input), std::string::npos) << e.what();
    }
  }
  EXPECT_THROW(find_trace_files({}), TraceError);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace dtlab
