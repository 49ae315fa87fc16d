// cmd_compare.cpp: `dtlab compare A B [--threshold PCT] [--fail-on-regression PCT] [--json FILE]` — two runs or two
// study directories, run by run: medians, ratio, bootstrap interval and a verdict per metric (analysis/compare.hpp).
// With --json, the comparison is also written as JSON; a report over the directory holding a comparison.json shows
// it (analysis/report_comparison.cpp).
#include <cstdio>
#include <fstream>
#include <memory>
#include <string>

#include "analysis/compare.hpp"
#include "lab/cli/command.hpp"

namespace dtlab::cli {

Command add_compare_command(CLI::App& app) {
  struct Args {
    std::string a, b, json;
    analysis::CompareOptions options;
    double fail_on_regression = -1;
  };
  auto args = std::make_shared<Args>();
  auto* cmd = app.add_subcommand("compare", "two runs or study directories: faster, slower or no change");
  cmd->footer("example: dtlab compare results/before results/mine --fail-on-regression 5");
  cmd->add_option("A", args->a, "the baseline: a run dir (result.json) or a study/results dir")
      ->required()
      ->check(CLI::ExistingPath);
  cmd->add_option("B", args->b, "the candidate, matched to A by <study>/<run> name")
      ->required()
      ->check(CLI::ExistingPath);
  cmd->add_option("--threshold", args->options.threshold_pct,
                  "smallest change that counts, % (the 95% interval must pass it)")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 1000.0));
  cmd->add_option("--fail-on-regression", args->fail_on_regression,
                  "exit 4 when a run got worse by at least PCT % (CI gates)")
      ->check(CLI::Range(0.0, 1000.0));
  cmd->add_option("--resamples", args->options.resamples, "bootstrap resamples")
      ->capture_default_str()
      ->check(CLI::Range(100, 1000000));
  cmd->add_option("--json", args->json, "also write the comparison as JSON");
  return {cmd, [args] {
            const analysis::ResultsComparison c = analysis::compare_results({args->a}, {args->b}, args->options);
            std::printf("%s", analysis::format_comparison(c, args->a, args->b).c_str());
            if (!args->json.empty()) {
              nlohmann::json j = analysis::to_json(c);
              j["a"] = args->a;
              j["b"] = args->b;
              std::ofstream out(args->json);
              out << j.dump(1) << "\n";
              if (!out) throw std::runtime_error("compare: cannot write " + args->json);
              std::printf("comparison written to %s\n", args->json.c_str());
            }
            if (args->fail_on_regression >= 0) {
              const int n = c.regressions(args->fail_on_regression);
              std::printf("%d of %zu runs regressed by %.1f%% or more\n", n, c.runs.size(), args->fail_on_regression);
              if (n > 0) return 4;
            }
            return 0;
          }};
}

}  // namespace dtlab::cli
