// json_reporter.cpp: comm-bench's JSON document (the input of `dtlab calibrate`): the header's settings, every row's
// out-of-place and in-place figures, the mean bus bandwidth and the point-to-point figure; on a cluster also the
// nodes and link rates, the inter-node point-to-point figure and all_reduce against the link bound.
#include <filesystem>
#include <fstream>
#include <stdexcept>

#include <nlohmann/json.hpp>

#include "lab/tools/comm_bench/reporter.hpp"

namespace dtlab::comm_bench {
namespace {

nlohmann::json figure_json(const Figure& f) {
  return {{"time_us", f.time_us},
          {"algbw_GBps", f.algbw_GBps},
          {"busbw_GBps", f.busbw_GBps},
          {"wrong", f.wrong ? nlohmann::json(*f.wrong) : nlohmann::json(nullptr)}};
}

class JsonReporter final : public Reporter {
 public:
  JsonReporter(std::string path, Reporter* table) : path_(std::move(path)), table_(table) {}

  void begin(const BenchHeader& h) override { header_ = h; }

  void row(const Row& row) override {
    results_.push_back({{"op", row.op},
                        {"algorithm", row.algorithm},
                        {"bytes", row.bytes},
                        {"count", row.count},
                        {"type", header_.dtype},
                        {"out_of_place", figure_json(row.out_of_place)},
                        {"in_place", figure_json(row.in_place)}});
  }

  void end(const BenchSummary& s) override {
    nlohmann::json doc = {{"tool", "dtlab comm-bench"},
                          {"backend", header_.backend},
                          {"device", header_.device},
                          {"world_size", header_.job_ranks},
                          {"group", header_.group},
                          {"group_size", header_.ranks},
                          {"host", header_.host},
                          {"dtype", header_.dtype},
                          {"iters", header_.iters},
                          {"warmup", header_.warmup},
                          {"results", results_},
                          {"avg_busbw_GBps", s.avg_busbw_GBps},
                          {"p2p", nullptr}};
    if (s.p2p)
      doc["p2p"] = {{"bytes", s.p2p->bytes}, {"time_us", s.p2p->time_us}, {"GBps", s.p2p->GBps}, {"peer", s.p2p->peer}};
    if (s.overlap)
      doc["overlap"] = {{"op", "all_reduce"},
                        {"algorithm", "backend"},
                        {"bytes", s.overlap->bytes},
                        {"gemms", s.overlap->gemms},
                        {"gemm_size", s.overlap->gemm_size},
                        {"comm_us", s.overlap->comm_us},
                        {"compute_us", s.overlap->compute_us},
                        {"together_us", s.overlap->together_us},
                        {"hidden_fraction", s.overlap->hidden_fraction}};
    if (s.cluster) {
      const ClusterFacts& c = *s.cluster;
      doc["cluster"] = {{"nodes", c.nodes},
                        {"ranks_per_node", c.ranks_per_node},
                        {"inter_link", c.inter_link},
                        {"intra_link", c.intra_link},
                        {"inter_link_bps", c.inter_link_bps}};
      if (s.p2p_inter)
        doc["p2p_inter"] = {{"bytes", s.p2p_inter->bytes},
                            {"time_us", s.p2p_inter->time_us},
                            {"GBps", s.p2p_inter->GBps},
                            {"peer", c.ranks_per_node}};
      doc["link_bounds"] = nlohmann::json::array();
      for (const LinkBound& b : s.link_bounds)
        doc["link_bounds"].push_back({{"op", "all_reduce"},
                                      {"algorithm", b.algorithm},
                                      {"bytes", b.bytes},
                                      {"time_us", b.time_us},
                                      {"bound_us", b.bound_us},
                                      {"ratio", b.time_us / b.bound_us}});
    }
    const std::filesystem::path path(path_);
    if (path.has_parent_path()) std::filesystem::create_directories(path.parent_path());
    std::ofstream out(path);
    out << doc.dump(2) << "\n";
    if (!out) throw std::runtime_error("comm-bench: cannot write " + path_);
    if (table_) table_->note("# wrote " + path_);
  }

 private:
  std::string path_;
  Reporter* table_;
  BenchHeader header_;
  nlohmann::json results_ = nlohmann::json::array();
};

}  // namespace

std::unique_ptr<Reporter> make_json_reporter(const std::string& path, Reporter* table) {
  return std::make_unique<JsonReporter>(path, table);
}

}  // namespace dtlab::comm_bench
