// table_reporter.cpp: comm-bench's text report, laid out as nccl-tests lays out its own: a header, one table per
// op/algorithm (out-of-place and in-place side by side, the model's prediction after them), and a footer.
#include <cmath>
#include <stdexcept>

#include "lab/tools/comm_bench/reporter.hpp"

namespace dtlab::comm_bench {
namespace {

std::string format(const char* fmt, auto... args) {
  char buffer[512];
  std::snprintf(buffer, sizeof buffer, fmt, args...);
  return buffer;
}

std::string figure_columns(const Figure& f) {
  const std::string wrong = f.wrong ? std::to_string(*f.wrong) : "N/A";
  return format(" %10.1f %7.3f %7.3f %6s", f.time_us, f.algbw_GBps, f.busbw_GBps, wrong.c_str());
}

std::string table_header(bool with_model, bool model_in_place) {
  std::string h1 = "#                                                 out-of-place                           in-place";
  std::string h2 =
      "#       size        count      type  redop   root       time   algbw   busbw #wrong       time   algbw   busbw "
      "#wrong";
  std::string h3 =
      "#        (B)   (elements)                               (us)  (GB/s)  (GB/s)              (us)  (GB/s)  (GB/s)"
      "       ";
  if (with_model) {
    h1 += std::string("                 model (") + (model_in_place ? "in-place" : "out-of-place") + ")";
    h2 += "       time   err";
    h3 += "       (us)    %";
  }
  return h1 + "\n" + h2 + "\n" + h3 + "\n";
}

class TableReporter final : public Reporter {
 public:
  explicit TableReporter(int fd) {
    if (fd < 0) return;
    file_ = ::fdopen(fd, "w");
    if (!file_) throw std::runtime_error("comm-bench: cannot write the report to descriptor " + std::to_string(fd));
    owned_ = true;
  }
  ~TableReporter() override {
    if (owned_) std::fclose(file_);
  }

  void begin(const BenchHeader& h) override {
    dtype_ = h.dtype;
    with_model_ = !h.model_source.empty();
    line(
        format("# dtlab comm-bench: %s, %d ranks on %s, %s, %lld..%lld B (x%g), %d iterations after %d warm-up, "
               "check %s",
               h.backend.c_str(), h.ranks, h.host.c_str(), h.dtype.c_str(), static_cast<long long>(h.min_bytes),
               static_cast<long long>(h.max_bytes), h.factor, h.iters, h.warmup, h.check ? "on" : "off"));
    if (h.group != "world")
      line(format("# group %s: %d ranks each (%s), of the job's %d", h.group.c_str(), h.ranks,
                  h.group == "node" ? "every node's ranks at once" : "one rank per node; the others wait",
                  h.job_ranks));
    if (h.device != "cpu")
      line("# buffers on " + h.device + (h.backend == "gloo" ? ", staged through pinned host memory" : ""));
    line("# " + h.load + " at start");
    line(h.repeats > 1 ? format("# time = the smallest of %d repeats of the timed loop (--repeats), each a mean per "
                                "call, max over ranks",
                                h.repeats)
                       : std::string("# time = mean per call, max over ranks"));
    line(
        "# algbw = bytes/time; busbw = algbw x (2(n-1)/n all_reduce, (n-1)/n all_gather, reduce_scatter, their dim1 "
        "variants and all_to_all, 1 broadcast); GB = 1e9 B");
    if (with_model_) line("# model: " + h.model_source);
  }

  void series(const BenchSeries& s) override {
    line("#\n# " + s.op + "/" + s.algorithm + ": " + s.what_runs);
    line(table_header(s.with_model, s.model_in_place));
  }

  void row(const Row& row) override {
    const bool reduces = row.op == "all_reduce" || row.op == "reduce_scatter" || row.op == "reduce_scatter_dim1";
    std::string text =
        format("%12lld %12lld %9s %6s %6d", static_cast<long long>(row.bytes), static_cast<long long>(row.count),
               dtype_.c_str(), reduces ? "sum" : "none", row.op == "broadcast" ? 0 : -1);
    text += figure_columns(row.out_of_place) + " " + figure_columns(row.in_place);
    if (row.model_us) text += format(" %10.1f %7.1f", *row.model_us, *row.model_error_pct);
    line(text);
  }

  void note(const std::string& text) override { line(text); }

  // The nodes, the inter-node rate against the set one, and all_reduce against the link bound.
  void cluster_lines(const BenchSummary& s) {
    const ClusterFacts& c = *s.cluster;
    line(format("# Cluster              : %d nodes x %d ranks, inter-node link %s, intra-node %s", c.nodes,
                c.ranks_per_node, c.inter_link.c_str(), c.intra_link.c_str()));
    if (s.p2p_inter) {
      const double gbit_per_s = s.p2p_inter->GBps * 8;
      std::string versus_set;
      if (c.inter_link_bps > 0)
        versus_set = format(", %.1f%% of the set rate", gbit_per_s * 1e9 / c.inter_link_bps * 100);
      line(
          format("# Inter-node p2p       : %.4f GB/s = %.1f Mbit/s per direction (ranks 0 <-> %d, both directions at "
                 "once, 64 MiB, %.1f us)%s",
                 s.p2p_inter->GBps, gbit_per_s * 1e3, c.ranks_per_node, s.p2p_inter->time_us, versus_set.c_str()));
    }
    for (const LinkBound& b : s.link_bounds)
      line(format(
          "# Link bound           : all_reduce 64 MiB (%s, in-place) %.0f us = %.2fx the bound %.0f us (each node "
          "sends 2(M-1)/M of the buffer at the set rate)%s",
          b.algorithm.c_str(), b.time_us, b.time_us / b.bound_us, b.bound_us,
          b.algorithm == "hierarchical" ? "; target <= 1.25x" : ""));
  }

  void end(const BenchSummary& s) override {
    line("#");
    line(s.total_wrong ? format("# Wrong elements       : %lld %s", static_cast<long long>(*s.total_wrong),
                                *s.total_wrong == 0 ? "OK" : "FAILED")
                       : std::string("# Wrong elements       : not checked (--check 0)"));
    line(format("# Avg bus bandwidth    : %.4f", s.avg_busbw_GBps));
    if (s.p2p) {
      // On an emulated cluster ranks 0 and 1 share a node; the flat ring's slowest hop is the inter-node one.
      const bool inside_a_node = s.cluster && s.p2p->peer < s.cluster->ranks_per_node;
      const bool across_nodes = s.cluster && !inside_a_node;
      line(
          format("# Point-to-point       : %.4f GB/s per direction (Gloo send/recv, ranks 0 <-> %d%s, both directions "
                 "at once, 64 MiB, %.1f us)",
                 s.p2p->GBps, s.p2p->peer,
                 inside_a_node  ? " inside node 0"
                 : across_nodes ? " across nodes"
                                : "",
                 s.p2p->time_us));
      const P2pFigure& slowest = s.p2p_inter ? *s.p2p_inter : *s.p2p;
      if (const Row* r = s.all_reduce_at_p2p_size)
        line(
            format("# all_reduce busbw at 64 MiB = %.1f%% of %spoint-to-point (target >= 80%%; %s, in-place: %.4f "
                   "GB/s)",
                   r->in_place.busbw_GBps / slowest.GBps * 100, s.p2p_inter ? "inter-node " : "", r->algorithm.c_str(),
                   r->in_place.busbw_GBps));
    }
    if (s.overlap) {
      const comm_bench::OverlapFigure& o = *s.overlap;
      const std::string verdict =
          o.hidden_fraction >= 0 ? format("compute hides %.0f%% of the collective", 100 * o.hidden_fraction)
                                 : format("overlapping costs %.0f%% more than taking turns", -100 * o.hidden_fraction);
      line(
          format("# Overlap              : all_reduce %lld MiB alone %.0f us, %d GEMM(s) %dx%d alone %.0f us, both "
                 "at once %.0f us -> %s",
                 static_cast<long long>(o.bytes >> 20), o.comm_us, o.gemms, o.gemm_size, o.gemm_size, o.compute_us,
                 o.together_us, verdict.c_str()));
    }
    if (s.cluster) cluster_lines(s);
    if (!with_model_) return;
    line(s.model_median_error_pct ? format("# model: median |error| %.1f%% over %zu rows (1 KiB..256 MiB)",
                                           *s.model_median_error_pct, s.model_rows)
                                  : std::string("# model: no rows between 1 KiB and 256 MiB to compare"));
  }

 private:
  void line(const std::string& text) {
    std::fputs(text.c_str(), file_);
    if (text.empty() || text.back() != '\n') std::fputc('\n', file_);
    std::fflush(file_);
  }

  FILE* file_ = stdout;
  bool owned_ = false;
  std::string dtype_;
  bool with_model_ = false;
};

}  // namespace

std::unique_ptr<Reporter> make_table_reporter(int fd) { return std::make_unique<TableReporter>(fd); }

}  // namespace dtlab::comm_bench
